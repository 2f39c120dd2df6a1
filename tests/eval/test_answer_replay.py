"""Recorded manual answers re-scored without the model give what the service answered, and
other citation rules or thresholds change only what they should."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain import Chunk, RetrievalResult, SearchHit
from app.generation.answer_limits import GenerationLimits, PassageLimits
from app.providers.types import Embedder
from eval.answer_replay import REFUSAL_TEXT, RecordingLLM, Rules, replay, replay_rows
from tests.fakes import FakeEmbedder, FakeLLM

pytestmark = pytest.mark.unit

PASSAGES = {
    12: "To install a package from source, run R CMD INSTALL with the tarball name.",
    30: "The sink function diverts all printed output to a connection such as a file.",
    41: "Environment variables set in Renviron are read when R starts up.",
}
QUESTION = "How can I send everything R prints into a file?"


def _retrieval() -> RetrievalResult:
    hits = [
        SearchHit(
            Chunk(f"c{page}", "t", "d", "R-admin.pdf", page, str(page), 0, 0, len(text), text),
            score=1.0 - place / 10,
        )
        for place, (page, text) in enumerate(PASSAGES.items())
    ]
    return RetrievalResult(hits=hits, relevant=True)


def _live(
    reply: str, probability: float | None, threshold: float, embedder: Embedder | None = None
) -> tuple[dict[str, Any], Any]:
    """Answer as the evaluation does (the citation check comparing with `embedder`) and record
    the row it writes."""
    limits = GenerationLimits(
        refusal_text=REFUSAL_TEXT,
        passages=PassageLimits(
            max_passages=3, max_passage_chars=3000, focus_chars=0, best_last=True
        ),
        abstain_threshold=threshold,
    )
    llm = RecordingLLM(FakeLLM(reply, probe_probability=probability))
    retrieval = _retrieval()
    shown = limits.passages.shown(QUESTION, retrieval.hits)
    answer = limits.answer(QUESTION, retrieval, llm, embedder)
    row = {
        "id": "q",
        "manual": "R-admin",
        "question": QUESTION,
        "gold_pages": [30],
        "shown_pages": [h.chunk.page for h in shown],
        "shown_texts": [h.chunk.text for h in shown],
        "model_text": llm.take(),
        "refusal_probability": answer.refusal_probability,
    }
    return row, answer


@pytest.mark.parametrize(
    "reply",
    [
        "Use the sink function to divert printed output to a file [3].",  # the right marker
        "Use the sink function to divert printed output to a file [1].",  # re-pointed
        "Use the sink function to divert printed output to a connection.",  # no marker
        "Run R CMD INSTALL with the tarball [7].",  # an invented marker
        REFUSAL_TEXT,
    ],
)
def test_a_replayed_answer_cites_the_pages_the_service_cited(reply: str) -> None:
    row, answer = _live(reply, probability=0.01, threshold=1.0)

    assert replay(row, threshold=1.0) == (answer.refused, [c.page for c in answer.citations])


@pytest.mark.parametrize(
    "reply",
    [
        "Use the sink function to divert printed output to a file [3].",
        "It diverts all printed output [1].",  # every term the question's or shared: cosines
        "Run R CMD INSTALL with the tarball [2].",
    ],
)
def test_a_replay_with_the_embedder_check_cites_what_the_service_cited(reply: str) -> None:
    row, answer = _live(reply, probability=0.01, threshold=1.0, embedder=FakeEmbedder())

    cited = [c.page for c in answer.citations]
    assert replay(row, threshold=1.0, embedder=FakeEmbedder()) == (answer.refused, cited)


def test_a_paragraph_answer_replays_with_its_passages_places_as_pages() -> None:
    recorded = {
        "task": "xquad-en-en",
        "setting": "answerable",
        "question": QUESTION,
        "shown_texts": list(PASSAGES.values()),
        "shown_is_gold": [False, True, False],
        "model_text": "Use the sink function to divert printed output to a file [1].",
        "refusal_probability": 0.01,
    }
    unanswerable = {**recorded, "setting": "unanswerable"}
    older = {key: value for key, value in recorded.items() if key != "shown_texts"}

    rows = replay_rows({"answers": [recorded, unanswerable, older]})

    assert [row["gold_pages"] for row in rows] == [[2]]  # only what a marker can change
    # The marker named the install passage; the term check points it at passage 2, the gold.
    assert replay(rows[0], threshold=0.05) == (False, [2])


def test_a_lower_threshold_refuses_as_the_service_would_have() -> None:
    reply = "Use the sink function to divert printed output to a file [3]."
    recorded, _ = _live(reply, probability=0.2, threshold=1.0)
    _, abstained = _live(reply, probability=0.2, threshold=0.1)

    assert abstained.refused
    assert replay(recorded, threshold=0.1) == (True, [])
    assert replay(recorded, threshold=0.5) == (False, [30])


def test_other_rules_move_only_the_citations_they_govern() -> None:
    # No marker, and no passage holds 40% of the answer's terms: today it cites nothing.
    row, answer = _live("Use sink and redirect the output somewhere safe later.", 0.0, 1.0)

    assert answer.citations == []
    assert replay(row, 1.0) == (False, [])
    assert replay(row, 1.0, Rules(uncited_support=0.2, lead=0.1)) == (False, [30])
    assert replay(row, 1.0) == (False, [])  # the module's own thresholds are restored
