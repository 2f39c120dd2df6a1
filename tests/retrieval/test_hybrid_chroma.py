"""The retriever against real Chroma and the real shipped `use` embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.domain import document_id
from app.providers.embeddings import build_embedder
from app.providers.types import Embedder
from app.retrieval.hybrid import build_retriever
from app.services.blocks.corpus import Corpus
from app.text.arabic import strip_vowel_marks
from testkit.indexing import build_corpus
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.integration

FACTS = [
    "The Nile is the longest river in Africa and flows north into the Mediterranean Sea.",
    "Paris is the capital of France and is known for the Eiffel Tower.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "نهر النيل هو أطول نهر في أفريقيا ويصب في البحر الأبيض المتوسط.",
    "القاهرة هي عاصمة مصر وأكبر مدنها.",
]
SKUS = [f"6672WN55{i:02d}" for i in range(12)]


def _catalogue(sku: str) -> str:
    return f"Cordless drill, 18 V, weight 1.6 kg, colour red, two batteries. SKU {sku}."


@pytest.fixture(scope="module")
def use_embedder() -> Embedder:
    return build_embedder(load_settings(_env_file=None, embedding_provider="use"))


@pytest.fixture
def use_settings(data_dir: Path) -> Settings:
    return load_settings(_env_file=None, data_dir=data_dir, embedding_provider="use")


@pytest.fixture
def chroma(use_settings: Settings, use_embedder: Embedder) -> Corpus:
    return build_corpus(use_settings, use_embedder)


def test_finds_passages_in_english_and_arabic_and_across_languages(
    use_settings: Settings, use_embedder: Embedder, chroma: Corpus
) -> None:
    add_document(chroma, use_embedder, "acme", "facts.txt", FACTS)
    retriever = build_retriever(use_settings, use_embedder, chroma, None)
    english = retriever.search("acme", "What is the capital of France?", 3)
    assert english.hits[0].chunk.text == FACTS[1]
    arabic = retriever.search("acme", "ما هي عاصمة مصر؟", 3)
    assert arabic.hits[0].chunk.text == FACTS[4]
    # Arabic question, only the English paragraph holds the answer: the dense arm crosses.
    cross = retriever.search("acme", "ما هي عملية التمثيل الضوئي؟", 5)
    assert FACTS[2] in [h.chunk.text for h in cross.hits[:3]]
    assert cross.hits[0].stages["dense_score"] is not None


def test_exact_sku_wins_among_near_identical_items(
    use_settings: Settings, use_embedder: Embedder, chroma: Corpus
) -> None:
    add_document(chroma, use_embedder, "shop", "catalogue.txt", [_catalogue(s) for s in SKUS])
    retriever = build_retriever(use_settings, use_embedder, chroma, None)
    for sku in SKUS:
        result = retriever.search("shop", f"How heavy is the drill {sku}?", 3)
        assert result.hits[0].chunk.text.endswith(f"SKU {sku}.")
        assert result.relevant
    # Without the exact-match arm, dense alone cannot tell these items apart reliably.
    dense_hits = [
        retriever.search("shop", f"How heavy is the drill {sku}?", 1, mode="dense").hits[0]
        for sku in SKUS
    ]
    assert sum(
        h.chunk.text.endswith(f"SKU {s}.") for h, s in zip(dense_hits, SKUS, strict=True)
    ) < len(SKUS)


def test_index_follows_upload_replace_delete_and_survives_restart(
    use_settings: Settings, use_embedder: Embedder, chroma: Corpus
) -> None:
    retriever = build_retriever(use_settings, use_embedder, chroma, None)
    index = retriever.keyword_index
    add_document(chroma, use_embedder, "acme", "a.txt", ["The SR-33 valve is rated 40 bar."])
    assert retriever.search("acme", "SR-33 rating", 3).hits
    retriever.search("acme", "valve", 3)
    assert index.rebuilds["acme"] == 1

    add_document(chroma, use_embedder, "acme", "a.txt", ["The SR-34 valve is rated 60 bar."])
    result = retriever.search("acme", "SR-34", 3, mode="keyword")
    assert [h.chunk.text for h in result.hits] == ["The SR-34 valve is rated 60 bar."]
    stale = retriever.search("acme", "SR-33", 3, mode="keyword").hits
    assert all("SR-33" not in h.chunk.text for h in stale)  # the replaced text is gone
    assert index.rebuilds["acme"] == 2

    add_document(chroma, use_embedder, "acme", "b.txt", ["Pump P-7 manual."])
    assert retriever.search("acme", "P-7", 3, mode="keyword").hits
    chroma.delete_document(tenant_id="acme", document_id=document_id("acme", "b.txt"))
    deleted = retriever.search("acme", "P-7", 3, mode="keyword").hits
    assert all("P-7" not in h.chunk.text for h in deleted)
    assert index.rebuilds["acme"] == 4

    restarted = build_retriever(use_settings, use_embedder, chroma, None)
    hits = restarted.search("acme", "SR-34", 3, mode="keyword").hits
    assert [h.chunk.text for h in hits] == ["The SR-34 valve is rated 60 bar."]
    assert restarted.keyword_index.rebuilds["acme"] == 0
    assert restarted.keyword_index.loads["acme"] == 1


def test_calibrated_gate_refuses_an_off_topic_question(
    use_settings: Settings, use_embedder: Embedder, chroma: Corpus
) -> None:
    add_document(chroma, use_embedder, "acme", "facts.txt", FACTS)
    retriever = build_retriever(use_settings, use_embedder, chroma, None)
    assert retriever.threshold is not None  # calibrated for this model
    assert retriever.search("acme", "Which river is the longest in Africa?", 3).relevant
    off_topic = retriever.search("acme", "How do I reset my router's admin password?", 3)
    assert not off_topic.relevant
    assert "threshold" in off_topic.reason


# Fully vowelled Arabic, as the Qur'an and hadith collections are written, and the English
# question each one answers. Embedded with their marks, some rank below another passage and
# others score below the relevance gate.
VOWELLED = [
    (
        "ذَهَبَ الطِّفْلُ إِلَى الْمَدْرَسَةِ صَبَاحًا وَتَعَلَّمَ الْقِرَاءَةَ وَالْكِتَابَةَ.",
        "Where did the child learn to read and write?",
    ),
    (
        "الْمَطَرُ يَسْقِي الْأَرْضَ فَيَنْبُتُ الزَّرْعُ وَيَأْكُلُ النَّاسُ وَالْأَنْعَامُ.",
        "What happens when rain falls on the land?",
    ),
    (
        "التَّاجِرُ الصَّادِقُ يَبِيعُ بِضَاعَتَهُ فِي السُّوقِ وَلَا يَغُشُّ الْمُشْتَرِينَ.",
        "Does the honest merchant cheat his customers?",
    ),
    (
        "سَافَرَ الرِّجَالُ عَلَى الْإِبِلِ عَبْرَ الصَّحْرَاءِ أَيَّامًا طَوِيلَةً بِلَا مَاءٍ.",
        "Who crossed the desert on camels?",
    ),
    (
        "أَمَرَ الْمَلِكُ بِبِنَاءِ مَسْجِدٍ كَبِيرٍ فِي وَسَطِ الْمَدِينَةِ.",
        "What did the king order to be built?",
    ),
]


def test_vowelled_arabic_is_found_by_english_questions_and_shown_as_written(
    use_settings: Settings, use_embedder: Embedder, chroma: Corpus
) -> None:
    passages = [passage for passage, _ in VOWELLED]
    add_document(chroma, use_embedder, "acme", "verses.txt", passages)
    retriever = build_retriever(use_settings, use_embedder, chroma, None)
    for passage, question in VOWELLED:
        for mode in ("dense", "hybrid"):
            result = retriever.search("acme", question, 3, mode=mode)
            assert result.hits[0].chunk.text == passage, (mode, question)  # marks kept
            assert result.relevant
    # An unvowelled Arabic question reaches the vowelled passage the same way.
    unvowelled = retriever.search("acme", "أين تعلم الطفل القراءة والكتابة؟", 3, mode="dense")
    assert unvowelled.hits[0].chunk.text == passages[0]
    # Text without marks embeds as it always did, so only vowelled documents need re-indexing.
    assert [strip_vowel_marks(fact) for fact in FACTS] == FACTS
