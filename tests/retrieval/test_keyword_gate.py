"""The keyword gate (RAG_KEYWORD_GATE): a question whose keyword matches are only function words,
words in another script than its own, or words (and numbers) more than half of the chunks hold,
or none at all (its words in a script the documents lack), is ranked as the dense arm ranks it; a
content word or a number fewer chunks hold still counts. Real Chroma, the
real shipped `use` embedder, the real keyword index."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.providers.embeddings import build_embedder
from app.providers.types import Embedder
from app.retrieval.function_words import matches_content_word
from app.retrieval.hybrid import HybridRetriever, build_retriever
from testkit.indexing import build_corpus
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.integration

# Arabic regulations, each numbered 5 and each closing with the formula "ﷺ" expands to.
FORMULA = "صلى الله عليه وسلم"
ARTICLES = [
    "المادة 5: يجب على كل مسافر أن يحمل جواز سفر ساري المفعول عند عبور الحدود.",
    "المادة 5 مكرر: تدفع الضرائب على الدخل مرة واحدة في السنة قبل نهاية الشهر الخامس.",
    "المادة 5 (أ): يحق للعامل إجازة سنوية مدفوعة الأجر مدتها ثلاثون يوما.",
    "المادة 5 (ب): يمنع التدخين في المستشفيات والمدارس ووسائل النقل العام منذ عام 2011.",
    "المادة 5 (ج): تسجل منظمة UNESCO المواقع الأثرية في قائمة التراث العالمي.",
    "المادة 5 (د): يجب تطعيم الأطفال ضد الحصبة قبل دخول المدرسة.",
]


@pytest.fixture(scope="module")
def use_embedder() -> Embedder:
    return build_embedder(load_settings(_env_file=None, embedding_provider="use"))


@pytest.fixture
def gated(data_dir: Path, use_embedder: Embedder) -> HybridRetriever:
    settings = load_settings(
        _env_file=None, data_dir=data_dir, embedding_provider="use", keyword_gate=True
    )
    corpus = build_corpus(settings, use_embedder)
    texts = [f"{article} قال النبي {FORMULA}." for article in ARTICLES]
    add_document(corpus, use_embedder, "law", "articles.txt", texts)
    return build_retriever(settings, use_embedder, corpus, None)


def _ids(retriever: HybridRetriever, query: str, mode: str) -> list[str]:
    return [h.chunk.id for h in retriever.search("law", query, 6, mode).hits]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "query",
    [
        # English over Arabic text: its only matches are the Arabic words "ﷺ" expands to,
        # which every chunk holds.
        "Did the Prophet (ﷺ) allow paid annual leave for workers?",
        # Arabic, but its only matches are function words (ما, هي, في).
        "ما هي عقوبة السرقة في الفصل",
        # No match at all: an English question without numbers.
        "Is smoking allowed in hospitals?",
    ],
)
def test_a_question_without_a_content_word_match_ranks_as_dense_does(
    gated: HybridRetriever, query: str
) -> None:
    assert _ids(gated, query, "hybrid") == _ids(gated, query, "dense")


def test_the_right_article_comes_first_for_an_english_question_with_a_number(
    gated: HybridRetriever,
) -> None:
    hits = gated.search("law", "What does article 5 say about paid annual leave for workers?", 3)
    assert "إجازة سنوية" in hits.hits[0].chunk.text


def test_a_content_word_match_still_counts(gated: HybridRetriever) -> None:
    # "UNESCO" is written in Latin letters inside one Arabic article: the keyword arm speaks.
    recall = gated.recall("law", "Which organisation lists world heritage? UNESCO", "hybrid")
    assert recall.content_match
    hits = gated.search("law", "Which organisation lists world heritage? UNESCO", 3)
    assert "UNESCO" in hits.hits[0].chunk.text


def test_matches_content_word_reads_the_tenant_text(gated: HybridRetriever) -> None:
    index = gated.keyword_index
    snapshot = index.snapshot("law")
    tokenizer = index.tokenizer
    assert matches_content_word(snapshot, tokenizer("التدخين في المستشفيات"), tokenizer, 2)
    assert matches_content_word(snapshot, tokenizer("smoking since 2011"), tokenizer, 2)  # a number
    # ...but not one every chunk holds, nor a word every chunk holds.
    assert not matches_content_word(snapshot, tokenizer("article 5"), tokenizer, 2)
    assert not matches_content_word(snapshot, tokenizer("ما هي المادة"), tokenizer, 2)
    assert not matches_content_word(snapshot, tokenizer("ما هي في"), tokenizer, 2)
    assert not matches_content_word(snapshot, tokenizer("smoking hospitals"), tokenizer, 2)
    assert not matches_content_word(
        snapshot, tokenizer("the Prophet (ﷺ) forbade selling fruit early"), tokenizer, 2
    )


# English hadith, most of them holding "ﷺ", which the keyword tokenizer expands to Arabic words.
HADITHS = [
    "The Prophet (ﷺ) said: Whoever fasts Ramadan out of faith, his past sins are forgiven.",
    "The Prophet (ﷺ) forbade the sale of fruit before it is ripe and safe from blight.",
    "The Prophet (ﷺ) said: Give the labourer his wage before his sweat dries.",
    "The Prophet (ﷺ) used the toothstick before every prayer, morning and night.",
    "A man asked which deed is best; he was told: prayer offered at its proper time.",
    "Charity does not decrease wealth, and forgiveness only adds to a servant's honour.",
]


def _hadith_retriever(data_dir: Path, embedder: Embedder, texts: list[str]) -> HybridRetriever:
    """A gated retriever over one tenant ("hadith") whose one document holds `texts`."""
    settings = load_settings(
        _env_file=None, data_dir=data_dir, embedding_provider="use", keyword_gate=True
    )
    corpus = build_corpus(settings, embedder)
    add_document(corpus, embedder, "hadith", "hadith.txt", texts)
    return build_retriever(settings, embedder, corpus, None)


@pytest.fixture
def english_hadith(data_dir: Path, use_embedder: Embedder) -> HybridRetriever:
    return _hadith_retriever(data_dir, use_embedder, HADITHS)


def test_an_arabic_question_matching_only_the_blessing_in_english_hadith_ranks_as_dense(
    english_hadith: HybridRetriever,
) -> None:
    # الله is in the question's own script and in four of the six chunks (from "ﷺ"): no
    # evidence of which hadith is meant, so the keyword arm stays out.
    query = "ماذا قال رسول الله عن أجر العامل"
    recall = english_hadith.recall("hadith", query, "hybrid")
    assert recall.keyword_ids  # the keyword arm did match something...
    assert not recall.content_match  # ...but nothing that tells the chunks apart
    assert _hadith_ids(english_hadith, query, "hybrid") == _hadith_ids(
        english_hadith, query, "dense"
    )


def test_a_word_few_hadiths_hold_still_lets_the_keyword_arm_speak(
    english_hadith: HybridRetriever,
) -> None:
    query = "What did he say about the toothstick?"
    assert english_hadith.recall("hadith", query, "hybrid").content_match
    # The keyword arm takes part: fused by rank, the hybrid's order is not the dense arm's.
    by_rank = HybridRetriever(
        english_hadith.embedder,
        english_hadith.store,
        english_hadith.keyword_index,
        replace(english_hadith.config, fusion="rrf"),
    )
    assert _hadith_ids(by_rank, query, "hybrid") != _hadith_ids(by_rank, query, "dense")


def _hadith_ids(retriever: HybridRetriever, query: str, mode: str) -> list[str]:
    return [h.chunk.id for h in retriever.search("hadith", query, 6, mode).hits]  # type: ignore[arg-type]


def test_chunk_count_counts_the_chunks_holding_a_token(
    english_hadith: HybridRetriever,
) -> None:
    index = english_hadith.keyword_index
    snapshot = index.snapshot("hadith")
    [allah] = index.tokenizer("الله")
    assert len(snapshot.chunk_ids) == 6
    assert snapshot.chunk_count(allah) == 4
    assert snapshot.chunk_count(index.tokenizer("toothstick")[0]) == 1
    assert snapshot.chunk_count("zzzunknown") == 0


def test_the_gate_is_on_by_default(settings: Settings) -> None:
    assert settings.keyword_gate is True


# English hadith where "ﷺ" is in three of fourteen (21%): under the near-ubiquity share, so only the
# Arabic being borrowed (not a script the tenant's text is written in) keeps the gate shut.
FEW_BLESSED = [
    "The Prophet (ﷺ) said: Whoever fasts Ramadan out of faith, his past sins are forgiven.",
    "The Prophet (ﷺ) forbade the sale of fruit before it is ripe and safe from blight.",
    "The Prophet (ﷺ) said: Give the labourer his wage before his sweat dries.",
    "A man asked which deed is best; he was told: prayer offered at its proper time, then "
    "kindness toward parents, then striving with patience through hardship and exile.",
    "Charity does not decrease wealth, and forgiveness only adds to a servant's honour; "
    "humility raises rank, while arrogance, envy and backbiting ruin friendships quickly.",
    "Travellers shortened their noon prayers during journeys across deserts and mountains, "
    "combining afternoon devotions whenever caravans hurried toward distant wells.",
    "Neighbours deserve generosity: share soup, visit the sick, guard their homes at night, "
    "lend tools willingly, forgive quarrels, and greet newcomers warmly at gates.",
    "Merchants must weigh grain honestly; cheating buyers with faulty scales is condemned, "
    "hoarding barley raises famine prices, and usurious lending corrupts markets.",
    "Orphans inherit their parents' property; guardians manage it until maturity arrives, "
    "avoiding wasteful spending, keeping ledgers, and returning livestock intact.",
    "Drinking water while seated, slowly, in three breaths, was recommended by companions, "
    "alongside washing hands, eating dates modestly, and thanking hosts after meals.",
    "Judges hear both litigants before ruling; witnesses swear oaths, bribery voids verdicts, "
    "and appeals reach governors when evidence seems doubtful or contradictory.",
    "Farmers irrigate palm groves from canals, pruning branches each spring, harvesting olives "
    "in autumn, and resting fields fallow every seventh season.",
    "Scholars copied manuscripts by lamplight, debating grammar, astronomy, medicine and "
    "arithmetic in libraries endowed by wealthy patrons of learning.",
    "Sailors navigated monsoon winds between Basra and Zanzibar, trading ivory, pepper, "
    "cinnamon, silk and copper ingots along coastal harbours.",
]


@pytest.fixture
def few_blessed(data_dir: Path, use_embedder: Embedder) -> HybridRetriever:
    return _hadith_retriever(data_dir, use_embedder, FEW_BLESSED)


def test_arabic_words_an_english_text_only_borrows_do_not_open_the_gate(
    few_blessed: HybridRetriever,
) -> None:
    snapshot = few_blessed.keyword_index.snapshot("hadith")
    [allah] = few_blessed.keyword_index.tokenizer("الله")
    assert "arabic" not in snapshot.scripts  # four expanded words among the English vocabulary
    # under the near-ubiquity share
    assert (snapshot.chunk_count(allah), len(snapshot.chunk_ids)) == (3, 14)
    query = "ماذا قال رسول الله عن أجر العامل"
    recall = few_blessed.recall("hadith", query, "hybrid")
    assert recall.keyword_ids  # the keyword arm matched the three blessed hadiths...
    assert not recall.content_match  # ...by a borrowed word, which does not say which one
    assert _hadith_ids(few_blessed, query, "hybrid") == _hadith_ids(few_blessed, query, "dense")


def test_a_borrowed_word_in_few_chunks_still_counts(gated: HybridRetriever) -> None:
    index = gated.keyword_index
    snapshot = index.snapshot("law")
    tokenizer = index.tokenizer
    assert "latin" not in snapshot.scripts  # UNESCO is the text's only Latin word
    # In one chunk: it names the article meant. Allowed none, it would not count.
    assert matches_content_word(snapshot, tokenizer("Who lists heritage? UNESCO"), tokenizer, 2)
    assert not matches_content_word(snapshot, tokenizer("Who lists heritage? UNESCO"), tokenizer, 0)
