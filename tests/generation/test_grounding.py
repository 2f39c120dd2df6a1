"""Marker checking against the passages, and abstaining on the model's own hesitation."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from generation_builders import PARIS, relevant

from app.generation import grounding
from app.generation.grounded_answer import AnswerDelta, final_answer, stream_answer
from app.generation.grounding import CitationChecker, embedding_similarity
from tests.fakes import FakeEmbedder, FakeLLM

pytestmark = pytest.mark.unit

REFUSAL = "I could not find the answer in the provided documents."
TEXTS = [text for *_, text in PARIS]


def test_a_marker_naming_a_passage_without_the_fact_is_pointed_at_the_one_with_it() -> None:
    llm = FakeLLM("It is 330 metres tall [2].", piece_chars=4)
    events = list(
        stream_answer("How tall is the tower?", relevant(PARIS), llm, refusal_text=REFUSAL)
    )
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    answer = events[-1].answer  # type: ignore[union-attr]

    assert streamed == answer.text == "It is 330 metres tall [1]."
    assert [c.source for c in answer.citations] == ["eiffel.pdf"]


def test_a_marker_is_kept_when_its_passage_holds_the_claim() -> None:
    checker = CitationChecker("When did Paris host the Olympics?", TEXTS)
    assert checker.repoint("Paris hosted them in 1900, 1924 and 2024", [3]) == [3]
    # 1889 is only in passage 1, but the cited one holds most of the claim: a close call stays.
    assert checker.repoint("in 1900, 1924 and 2024 (and 1889)", [3]) == [3]


def test_a_claim_with_no_distinctive_terms_keeps_its_marker() -> None:
    checker = CitationChecker("When was the Eiffel Tower completed?", TEXTS)
    assert checker.repoint("The Eiffel Tower was completed", [2]) == [2]


def test_an_uncited_answer_gets_the_marker_of_its_evident_source() -> None:
    answer = final_answer(
        stream_answer(
            "Which museum is the most visited?",
            relevant(PARIS),
            FakeLLM("The Louvre."),
            refusal_text=REFUSAL,
        )
    )
    assert answer.text == "The Louvre. [1]"  # passage 2, the only source
    assert [c.source for c in answer.citations] == ["museums.txt"]


def test_an_uncited_answer_no_passage_supports_stays_uncited() -> None:
    answer = final_answer(
        stream_answer(
            "Who painted the Mona Lisa?",
            relevant(PARIS),
            FakeLLM("Leonardo da Vinci."),
            refusal_text=REFUSAL,
        )
    )
    assert answer.text == "Leonardo da Vinci." and answer.citations == []


def test_a_refusal_never_gets_a_marker() -> None:
    answer = final_answer(
        stream_answer("q", relevant(PARIS), FakeLLM(REFUSAL), refusal_text=REFUSAL)
    )
    assert answer.refused and answer.text == REFUSAL and answer.citations == []


def test_a_hesitant_model_is_stopped_and_the_answer_is_the_refusal() -> None:
    llm = FakeLLM("Guessed answer [1].", probe_probability=0.3)
    events = list(
        stream_answer("q", relevant(PARIS), llm, refusal_text=REFUSAL, abstain_threshold=0.2)
    )
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    answer = events[-1].answer  # type: ignore[union-attr]

    assert streamed == answer.text == REFUSAL
    assert answer.refused and answer.citations == []
    assert answer.refusal_probability == 0.3
    assert llm.pieces_streamed == 1  # generation stopped at the first delta


def test_a_confident_model_answers_below_the_threshold() -> None:
    llm = FakeLLM("Built in 1889 [1].", probe_probability=0.1)
    answer = final_answer(
        stream_answer("q", relevant(PARIS), llm, refusal_text=REFUSAL, abstain_threshold=0.2)
    )
    assert not answer.refused and answer.text == "Built in 1889 [1]."
    assert answer.refusal_probability == 0.1


def test_a_marker_whose_passage_holds_none_of_the_claim_yields_to_one_holding_most() -> None:
    checker = CitationChecker("Who designed it?", TEXTS)
    # Passage 1 holds 3 of the claim's 5 distinctive terms (not "nearly all"), passage 3 none.
    assert checker.repoint("It is 330 metres tall and very old", [3]) == [1]
    # A cited passage holding some of the claim keeps its marker under the same support.
    assert checker.repoint("It is 330 metres tall and very old", [1]) == [1]


def test_an_uncited_answer_gets_the_marker_of_a_passage_clearly_ahead_of_the_others() -> None:
    checker = CitationChecker("Who designed it?", TEXTS)
    # Passage 1 holds 4 of the 7 distinctive terms, no other passage any: it is the source.
    assert (
        checker.best_supported(
            "The engineering company of Gustave Eiffel, in Lyon with steel rivets"
        )
        == 1
    )
    # Too little support, or two passages level: no marker is invented.
    assert checker.best_supported("Gustave Eiffel built it with steel rivets and cranes") is None
    claim = "The company of Gustave Eiffel built it, and wrote about the Louvre museum in the world"
    assert checker.best_supported(claim) is None


def _cosines(*values: float) -> Callable[[str], list[float]]:
    """A scripted embedder check: the same cosine with each passage for any claim."""
    return lambda claim: list(values)


def test_a_marker_the_terms_leave_alone_yields_to_a_clearly_closer_passage() -> None:
    # Every word of the claim is the question's, so the term checks have nothing to go on.
    question = "When was the Eiffel Tower completed?"
    claim = "The Eiffel Tower was completed"
    assert CitationChecker(question, TEXTS).repoint(claim, [2]) == [2]

    closer = CitationChecker(question, TEXTS, _cosines(0.6, 0.45, 0.2))
    assert closer.repoint(claim, [2]) == [1]  # 0.15 closer than the cited passage
    near = CitationChecker(question, TEXTS, _cosines(0.5, 0.45, 0.2))
    assert near.repoint(claim, [2]) == [2]  # 0.05: a close call stays the model's
    assert closer.repoint(claim, [1]) == [1]  # already the closest
    assert closer.repoint(claim, [1, 2]) == [1, 2]


def test_a_closer_passage_holding_fewer_of_the_claims_terms_does_not_take_the_marker() -> None:
    question = "Who designed it?"
    claim = "the Louvre, the most visited museum"
    # Passage 2 holds the claim's terms; passage 1 is closer by the scripted cosines.
    checker = CitationChecker(question, TEXTS, _cosines(0.7, 0.3, 0.1))
    assert checker.repoint(claim, [2]) == [2]


def test_the_embedder_check_is_off_at_a_zero_lead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grounding, "EMBEDDING_LEAD", 0.0)
    checker = CitationChecker("When was the Eiffel Tower completed?", TEXTS, _cosines(0.9, 0.1, 0))
    assert checker.repoint("The Eiffel Tower was completed", [2]) == [2]


class FailingEmbedder(FakeEmbedder):
    """An embedding server that is down."""

    def embed_query(self, text: str) -> list[float]:
        raise ConnectionError("embedding server unreachable")

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedding server unreachable")


def test_an_embedder_that_fails_leaves_the_answer_to_the_term_rules() -> None:
    """The citation check is a refinement: the answer streams to its end with the markers the
    term rules give, as without an embedder."""
    llm = FakeLLM("The Eiffel Tower was completed [2]. It is 330 metres tall [2].", piece_chars=5)

    def answered(embedder: FakeEmbedder | None) -> str:
        events = list(
            stream_answer(
                "When was the Eiffel Tower completed?",
                relevant(PARIS),
                llm,
                refusal_text=REFUSAL,
                embedder=embedder,
            )
        )
        return events[-1].answer.text  # type: ignore[union-attr]

    assert answered(FailingEmbedder()) == answered(None)


def test_the_passages_are_embedded_at_the_first_marker_in_one_request() -> None:
    embedder = CountingEmbedder()
    similarity = embedding_similarity(embedder, TEXTS)
    assert embedder.requests == []  # nothing before the model writes a marker

    first = similarity("The Eiffel Tower was completed in 1889")
    # The passages together (one request to a remote embedder), then the claim.
    assert embedder.requests == [len(TEXTS), 1]
    similarity("It is 330 metres tall")
    assert embedder.requests == [len(TEXTS), 1, 1]  # the passages once, each claim once
    assert max(range(len(first)), key=first.__getitem__) == 0  # the tower's own passage


class CountingEmbedder(FakeEmbedder):
    """The fake embedder, recording how many texts each request embeds as questions."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[int] = []

    def embed_query(self, text: str) -> list[float]:
        self.requests.append(1)
        return super().embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.requests.append(len(texts))
        return [super(CountingEmbedder, self).embed_query(text) for text in texts]
