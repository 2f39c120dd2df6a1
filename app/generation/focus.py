"""Passages cut down to the sentences that bear on the question, to shorten the prompt.

Reading the prompt is most of a local model's time to first token (~90 tokens/s here), and the
fixed rules and examples are already evaluated once and reused; what is left is the passages.
Most of a retrieved paragraph does not bear on the question, so each passage shows only its
best-scoring sentences (rare question terms, `app.text.sentences.rank_sentences`), each with its
neighbours, in their original order, with "…" where text was left out; `max_chars` is the
budget for all of them together.

Two rules share the budget out (`RAG_LLM_FOCUS_RULE`):

- `lead`: every passage shown gets a share of the budget for its own best sentences, the
  passage holding the question's best sentence two shares, every other one share (700
  characters over three passages: 350, 175, 175). A passage that needs less than its share
  leaves the rest to the others; the room a share has left is filled by the passage's next
  best sentence cut at word boundaries to the words around the question's terms (a best
  sentence longer than its share is cut the same way); a sentence's neighbours join it only
  when it is chosen itself. One passage is shown per `MIN_SHARE_CHARS` of the budget at most
  (three for 700), the lowest-ranked ones left out. What the shares leave goes back to the
  cut sentences, made whole, then to the best remaining sentences.
- `ranked`: the best sentences of all passages first, until the budget is spent (the best one
  always, whatever its length; a neighbour may join without its sentence); a passage none of
  whose sentences made the cut is not shown. A passage whose sentences score lower than a
  neighbour's is often shown as a few words ("… Tip", "5.10."): the model is shown the page
  and cannot read it.

Either way the markers number only what the model reads. Sentences sharing no term with the
question (a paraphrase, another language) fill the budget in rank and reading order: the
passages' opening sentences.

The hits keep their ids, pages and scores: only the text the model reads (and the citation
snippet, taken from it) is shortened.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Literal

from app.domain import SearchHit
from app.text.sentences import RankedSentence, rank_sentences
from app.text.tokenizer import tokenize

FocusRule = Literal["lead", "ranked"]
ELISION = " … "
MIN_SHARE_CHARS = 200  # budget characters per passage shown, at least
LEAD_SHARES = 2  # the shares of the passage holding the question's best sentence
MIN_CUT_CHARS = 80  # room a share must have left for a sentence cut to fit it

Place = tuple[int, int]  # (marker, position)


def _cost(sentence: RankedSentence) -> int:
    """What a sentence adds to an excerpt at most: its text and the "…" joining it."""
    return len(sentence.text) + len(ELISION)


class _Selection:
    """Sentences chosen so far, by place, and the characters they cost."""

    def __init__(self, ranked: Iterable[RankedSentence]) -> None:
        self.by_place = {(s.marker, s.position): s for s in ranked}
        self.chosen: dict[Place, RankedSentence] = {}
        self.used = 0

    def add(self, sentence: RankedSentence) -> None:
        """Choose the sentence (in place of a cut of it chosen before)."""
        place = (sentence.marker, sentence.position)
        if place in self.chosen:
            self.used -= _cost(self.chosen[place])
        self.chosen[place] = sentence
        self.used += _cost(sentence)

    def neighbours(self, sentence: RankedSentence) -> list[RankedSentence]:
        """The sentences just before and after `sentence` in its passage (those there are)."""
        near = ((sentence.marker, sentence.position - 1), (sentence.marker, sentence.position + 1))
        return [self.by_place[place] for place in near if place in self.by_place]

    def widen(self, ranked: Iterable[RankedSentence], max_chars: int) -> None:
        """Put back whole, best first, the sentences chosen as cuts, while `max_chars` holds."""
        for sentence in ranked:
            cut = self.chosen.get((sentence.marker, sentence.position))
            if cut and cut != sentence and self.used + _cost(sentence) - _cost(cut) <= max_chars:
                self.add(sentence)

    def fill(self, ranked: Iterable[RankedSentence], budget: int) -> None:
        """Add the best sentences not yet chosen, each followed by its neighbours, while they
        cost at most `budget` (a sentence that does not fit is skipped, and its neighbours with
        it; a shorter, lower-ranked one may still fit)."""
        spent = 0
        for best in ranked:
            place = (best.marker, best.position)
            if place in self.chosen or spent + _cost(best) > budget:
                continue
            self.add(best)
            spent += _cost(best)
            for neighbour in self.neighbours(best):
                near = (neighbour.marker, neighbour.position)
                if near not in self.chosen and spent + _cost(neighbour) <= budget:
                    self.add(neighbour)
                    spent += _cost(neighbour)


def _window(bears: list[bool], lengths: list[int], room: int) -> tuple[int, int]:
    """The words [start, end) of at most `room` characters holding the most question terms,
    those terms nearest its middle (no term: the opening words)."""
    best: tuple[int, int, int, int] = (-1, 0, 0, 0)  # terms held, -off-centre, start, end
    for start in range(len(lengths)):
        end, length = start, -1
        while end < len(lengths) and length + 1 + lengths[end] <= room:
            length += 1 + lengths[end]
            end += 1
        held = [i for i in range(start, end) if bears[i]]
        off_centre = abs((held[0] - start) - (end - 1 - held[-1])) if held else start
        best = max(best, (len(held), -off_centre, start, end))
        if end == len(lengths):
            break
    return best[2], best[3]


def _clipped(sentence: RankedSentence, terms: frozenset[str], max_chars: int) -> RankedSentence:
    """The sentence cut at word boundaries to cost at most `max_chars` (its "…" marks and the
    joiner included), keeping the words around the question's terms."""
    words = sentence.text.split(" ")
    room = max_chars - len(ELISION) - len("… ") - len(" …")
    bears = [bool(terms.intersection(tokenize(word))) for word in words]
    start, end = _window(bears, [len(word) for word in words], room)
    text = " ".join(words[start:end]) or sentence.text[: max(room, 0)]
    lead = "… " if start > 0 and not text.startswith("…") else ""
    tail = " …" if end < len(words) and not text.endswith("…") else ""
    return replace(sentence, text=lead + text + tail)


def _chosen_ranked(ranked: list[RankedSentence], max_chars: int) -> list[RankedSentence]:
    """The best sentences of all passages, each followed by its neighbours, within `max_chars`
    (the best one always, whatever its length; a neighbour may join without its sentence)."""
    selection = _Selection(ranked)
    for best in ranked:
        for sentence in [best, *selection.neighbours(best)]:
            if (sentence.marker, sentence.position) in selection.chosen:
                continue
            if selection.chosen and selection.used + _cost(sentence) > max_chars:
                continue  # a shorter, lower-ranked sentence may still fit
            selection.add(sentence)
    return list(selection.chosen.values())


def _chosen_in_shares(
    ranked: list[RankedSentence], max_chars: int, terms: frozenset[str]
) -> list[RankedSentence]:
    """Each passage's best sentences within its share of `max_chars` (`LEAD_SHARES` for the
    passage holding the best sentence, one for every other), the passages that need least
    served first, the room a share has left filled by its next best sentence cut to fit; what
    the shares leave goes to the cut sentences made whole, then to the best remaining
    sentences of the passages shown."""
    of_passage: dict[int, list[RankedSentence]] = {}
    for sentence in ranked:
        of_passage.setdefault(sentence.marker, []).append(sentence)
    shown = sorted(of_passage)[: max(1, max_chars // MIN_SHARE_CHARS)]
    first = ranked[0].marker if ranked[0].marker in shown else shown[0]
    weights = {marker: LEAD_SHARES if marker == first else 1 for marker in shown}
    needs = {marker: sum(map(_cost, of_passage[marker])) / weights[marker] for marker in shown}
    selection = _Selection(ranked)
    waiting = sum(weights.values())
    for marker in sorted(shown, key=needs.__getitem__):
        share = (max_chars - selection.used) * weights[marker] // waiting
        waiting -= weights[marker]
        end = selection.used + share
        selection.fill(of_passage[marker], share)
        rest = [s for s in of_passage[marker] if (marker, s.position) not in selection.chosen]
        if rest and end - selection.used >= MIN_CUT_CHARS:
            selection.add(_clipped(rest[0], terms, end - selection.used))
    remaining = [s for s in ranked if s.marker in needs]
    selection.widen(remaining, max_chars)
    selection.fill(remaining, max_chars - selection.used)
    return list(selection.chosen.values())


def _excerpt(sentences: list[RankedSentence]) -> str:
    """Sentences of one passage in reading order, "…" between ones that were not adjacent."""
    ordered = sorted(sentences, key=lambda s: s.position)
    parts = [ordered[0].text]
    for previous, sentence in pairwise(ordered):
        parts.append(" " if sentence.position == previous.position + 1 else ELISION)
        parts.append(sentence.text)
    lead = "… " if ordered[0].position > 0 and not ordered[0].text.startswith("…") else ""
    return lead + "".join(parts)


def focus_passages(
    question: str,
    hits: Sequence[SearchHit],
    max_chars: int,
    rule: FocusRule,
) -> list[SearchHit]:
    """The hits, in rank order, whose text is cut to the question's best sentences."""
    ranked = rank_sentences(question, [hit.chunk.text for hit in hits])
    if rule == "lead":
        chosen = _chosen_in_shares(ranked, max_chars, frozenset(tokenize(question)))
    else:
        chosen = _chosen_ranked(ranked, max_chars)
    by_marker: dict[int, list[RankedSentence]] = {}
    for sentence in chosen:
        by_marker.setdefault(sentence.marker, []).append(sentence)
    return [
        replace(hit, chunk=replace(hit.chunk, text=_excerpt(by_marker[marker])))
        for marker, hit in enumerate(hits, start=1)
        if marker in by_marker
    ]
