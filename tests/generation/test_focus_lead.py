"""The focus budget shared among the passages shown (the `lead` rule): none is shown as a few
words, the budget holds, and the markers number what the model reads."""

from __future__ import annotations

import re

import pytest
from generation_builders import PassageSpec, make_hits, relevant

from app.generation.focus import MIN_SHARE_CHARS, focus_passages
from app.generation.grounded_answer import final_answer, stream_answer
from tests.fakes import FakeLLM

pytestmark = pytest.mark.unit

REFUSAL = "I could not find the answer in the provided documents."
READABLE_CHARS = 120  # fewer is a crumb ("… Tip", "5.10."), unless the passage is that short
QUESTION = "How do I put tic marks on the second y axis?"

# The top passage repeats the question's words in every sentence; the gold page (ranked third)
# says it once, as gnuplot's pages on `my2tics` and `y2tics` do.
TICS: list[PassageSpec] = [
    (
        "gnuplot.pdf",
        88,
        "88",
        "The my2tics command controls minor tic marks on the second y axis. "
        "Minor tic marks on the second y axis are drawn between the major tic marks. "
        "By default minor tic marks on the second y axis are off for linear axes. "
        "The number of minor tic marks on the second y axis can be given as a frequency. "
        "Minor tic marks on the second y axis are not drawn on a log axis unless asked for. "
        "Minor tic marks on the second y axis take the line type of the border. "
        "Minor tic marks on the second y axis can be mirrored on the first y axis. "
        "See also the mytics command for minor tic marks of the first y axis.",
    ),
    (
        "gnuplot.pdf",
        90,
        "90",
        "The y2range command sets the range of the second y axis. "
        "Its syntax is the same as that of xrange. "
        "An axis without a range is autoscaled to the data. "
        "Reverse ranges are allowed and flip the axis.",
    ),
    (
        "gnuplot.pdf",
        89,
        "89",
        "5.10. "
        "Use set y2tics to put major tic marks on it. "
        "They are mirrored on the first y axis with the mirror option. "
        "By default they are off. "
        "Positions are given by a start, an increment and an end, or listed explicitly.",
    ),
]


def _lengths(rule: str, budget: int) -> dict[int, int]:
    focused = focus_passages(QUESTION, make_hits(TICS), budget, rule)  # type: ignore[arg-type]
    return {hit.chunk.page: len(hit.chunk.text) for hit in focused}


def test_every_passage_shown_gets_a_readable_excerpt() -> None:
    # Sharing by sentence rank alone, the gold page is a few words beside the top passage.
    ranked = _lengths("ranked", 700)
    assert ranked[89] < READABLE_CHARS and 90 not in ranked
    shown = focus_passages(QUESTION, make_hits(TICS), 700, "lead")
    assert [hit.chunk.page for hit in shown] == [88, 90, 89]
    assert all(len(hit.chunk.text) >= READABLE_CHARS for hit in shown)
    gold = shown[2].chunk.text
    assert "Use set y2tics to put major tic marks on it." in gold
    assert "They are mirrored on the first y axis" in gold  # its neighbour, in reading order


def test_the_passage_holding_the_best_sentence_reads_about_twice_the_others() -> None:
    lengths = _lengths("lead", 700)
    assert lengths[88] > 2 * max(lengths[90], lengths[89]) * 0.9


@pytest.mark.parametrize("budget", [90, 200, 320, 451, 700, 1000, 1600])
def test_the_budget_holds(budget: int) -> None:
    lengths = _lengths("lead", budget)
    assert sum(lengths.values()) <= budget
    assert len(lengths) == max(1, min(3, budget // MIN_SHARE_CHARS))


@pytest.mark.parametrize("budget", [700, 1000, 1600])
def test_no_excerpt_is_a_crumb(budget: int) -> None:
    lengths = _lengths("lead", budget)
    whole = {page: len(text) for _, page, _, text in TICS}
    assert all(n >= min(READABLE_CHARS, whole[page]) for page, n in lengths.items())


def test_a_budget_too_small_for_every_passage_drops_the_lowest_ranked() -> None:
    assert list(_lengths("lead", 550)) == [88, 90]


def test_a_best_sentence_longer_than_its_share_is_cut_to_the_question_words() -> None:
    long_sentence = (
        "Besides the axes themselves, every plot has a border, a key, a title and labels, "
        "which are all described in their own sections of this manual, and the options that "
        "control their fonts, colours and positions are shared with the canvas settings that "
        "the terminal chooses, so to put tic marks on the second y axis use set y2tics."
    )
    passages = [TICS[0], ("gnuplot.pdf", 91, "91", long_sentence), TICS[1]]
    shown = focus_passages(QUESTION, make_hits(passages), 450, "lead")
    cut = next(hit.chunk.text for hit in shown if hit.chunk.page == 91)
    assert cut.startswith("… ") and cut.endswith("use set y2tics.")
    assert "second y axis" in cut
    assert sum(len(hit.chunk.text) for hit in shown) <= 450


def test_the_markers_number_what_the_model_reads() -> None:
    def cite_the_gold_passage(request: object) -> str:
        prompt = request.messages[-1].content  # type: ignore[attr-defined]
        numbers = re.findall(r'<passage n="(\d+)"[^>]*>([^<]*)', prompt)
        assert [n for n, _ in numbers] == ["1", "2", "3"]
        gold = next(n for n, text in numbers if "Use set y2tics" in text)
        return f"Use set y2tics [{gold}]."

    llm = FakeLLM(cite_the_gold_passage)
    answer = final_answer(
        stream_answer(
            QUESTION,
            relevant(TICS),
            llm,
            refusal_text=REFUSAL,
            max_passages=3,
            focus_chars=700,
            focus_rule="lead",
            best_last=True,
        )
    )
    assert [c.page_label for c in answer.citations] == ["89"]
    assert "They are mirrored on the first y axis" in llm.requests[0].messages[-1].content
