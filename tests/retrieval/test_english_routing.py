"""The English arm's routing inside the retriever (RAG_ENGLISH_EMBEDDING), with a scripted
English reader: which list the dense arm is for each question, and which fusion values apply.
The real models and Chroma are in tests/api/test_api_english_arm.py."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from app.domain import Chunk
from app.retrieval.extra_dense import ExtraDense
from app.retrieval.hybrid import HybridRetriever, Recall, RetrieverConfig, fuse
from app.services.blocks.corpus import Corpus
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.unit

ENGLISH_TEXTS = [
    "The battery charges fully in three hours.",
    "Reset the router with the power button.",
    "The fan is loud when the grille is dusty.",
]
ARABIC_TEXTS = ["تشحن البطارية في ثلاث ساعات.", "الجمل سفينة الصحراء."]


class ScriptedEnglishReader:
    """An English collection holding `english` chunks, ranking them in the given order."""

    def __init__(self, english: list[Chunk], complete: bool = True) -> None:
        self.english = english
        self.complete = complete
        self.asked = 0

    def ready(self, tenant_id: str) -> bool:
        return self.complete

    def query(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
        chunk_ids: Sequence[str] | None = None,
    ) -> list[tuple[Chunk, float]]:
        self.asked += 1
        inside = [c for c in self.english if documents is None or c.document_id in documents]
        return [(c, 0.9 - 0.1 * i) for i, c in enumerate(inside[:k])]

    def held(self, *, tenant_id: str, chunk_ids: Sequence[str]) -> set[str]:
        return {c.id for c in self.english} & set(chunk_ids)


@pytest.fixture
def mixed(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> tuple[HybridRetriever, ScriptedEnglishReader, list[Chunk], list[Chunk]]:
    english = add_document(store, embedder, "acme", "manual.txt", ENGLISH_TEXTS)
    arabic = add_document(store, embedder, "acme", "arabic.txt", ARABIC_TEXTS)
    # The English arm ranks the English chunks in reverse order of their writing.
    reader = ScriptedEnglishReader(list(reversed(english)))
    return with_english(retriever, reader), reader, english, arabic


def with_english(base: HybridRetriever, reader: ScriptedEnglishReader | None) -> HybridRetriever:
    """The same retriever over the same store, with the scripted English arm (or none)."""
    english = None if reader is None else ExtraDense("english", FakeEmbedder(), reader)
    return HybridRetriever(
        base.embedder, base.store, base.keyword_index, base.config, english=english
    )


def test_an_english_question_reorders_the_english_chunks_and_keeps_the_others_places(
    mixed: tuple[HybridRetriever, ScriptedEnglishReader, list[Chunk], list[Chunk]],
) -> None:
    routed, reader, english, arabic = mixed
    question = "How long does the battery take to charge?"
    recall = routed.recall("acme", question, "dense")
    assert recall.english_dense and reader.asked == 1
    dense = recall.dense_ids
    # Every chunk is in the dense list once: the English ones in the English arm's order.
    assert sorted(dense) == sorted(c.id for c in english + arabic)
    assert [cid for cid in dense if cid in {c.id for c in english}] == [
        c.id for c in reversed(english)
    ]
    # The Arabic chunks keep the places the first arm gave them.
    plain = with_english(routed, None).recall("acme", question, "dense").dense_ids
    arabic_ids = {c.id for c in arabic}
    assert [i for i, cid in enumerate(dense) if cid in arabic_ids] == [
        i for i, cid in enumerate(plain) if cid in arabic_ids
    ]
    first = recall.candidates[english[-1].id]
    assert (first.english_dense_rank, first.dense_score) == (1, pytest.approx(0.9))
    assert all(recall.candidates[c.id].english_dense_rank is None for c in arabic)


def test_an_arabic_question_never_asks_the_english_arm(
    mixed: tuple[HybridRetriever, ScriptedEnglishReader, list[Chunk], list[Chunk]],
) -> None:
    routed, reader, _, _ = mixed
    recall = routed.recall("acme", "كم ساعة تحتاج البطارية للشحن؟", "dense")
    assert reader.asked == 0 and not recall.english_dense
    assert all(c.english_dense_rank is None for c in recall.candidates.values())


def test_an_incomplete_english_collection_leaves_the_first_arm_alone(
    mixed: tuple[HybridRetriever, ScriptedEnglishReader, list[Chunk], list[Chunk]],
) -> None:
    routed, reader, _, _ = mixed
    reader.complete = False
    question = "How long does the battery take to charge?"
    recall = routed.recall("acme", question, "dense")
    plain = with_english(routed, None).recall("acme", question, "dense")
    assert reader.asked == 0 and not recall.english_dense
    assert recall.dense_ids == plain.dense_ids


def test_the_english_fusion_values_apply_only_where_the_english_arm_ranked() -> None:
    config = RetrieverConfig(
        fusion="rrf", dense_weight=0.3, english_fusion=(("dense_weight", 2.0),)
    )
    recall = Recall(dense_ids=["a", "b"], keyword_ids=["b", "a"], coverage=1.0)
    for cid in ("a", "b"):
        recall.candidate(cid)
    assert fuse(recall, "hybrid", config)[0] == "b"  # the keyword arm weighs more
    assert recall.fusion is not None and recall.fusion.dense_weight == 0.3
    recall.english_dense = True
    assert fuse(recall, "hybrid", config)[0] == "a"  # the dense arm weighs more
    assert recall.fusion is not None and recall.fusion.dense_weight == 2.0
    assert "english_arm" in recall.fusion.rules
