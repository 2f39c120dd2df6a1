"""Passages cut down to the sentences that bear on the question, to shorten the prompt.

Reading the prompt is most of a local model's time to first token (~90 tokens/s here), and the
fixed rules and examples are already evaluated once and reused; what is left is the passages.
Most of a retrieved paragraph does not bear on the question, so each passage shows only its
best-scoring sentences (rare question terms, `app.text.sentences.rank_sentences`), best first
until `max_chars` is spent, in their original order, with "…" where text was left out. A passage
none of whose sentences made the cut is not shown, so the markers number only what the model
reads. Sentences sharing no term with the question (a paraphrase, another language) fill the
budget in rank and reading order: the top passage's opening sentences.

The hits keep their ids, pages and scores: only the text the model reads (and the citation
snippet, taken from it) is shortened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise

from app.domain import SearchHit
from app.text.sentences import RankedSentence, rank_sentences

ELISION = " … "


def _chosen(ranked: list[RankedSentence], max_chars: int) -> list[RankedSentence]:
    """The best sentences, each followed by its neighbours, within `max_chars` (the best one
    always, whatever its length)."""
    by_place = {(s.marker, s.position): s for s in ranked}
    chosen: dict[tuple[int, int], RankedSentence] = {}
    used = 0
    for best in ranked:
        group = [best] + [
            by_place[place]
            for place in ((best.marker, best.position - 1), (best.marker, best.position + 1))
            if place in by_place
        ]
        for sentence in group:
            place = (sentence.marker, sentence.position)
            if place in chosen:
                continue
            cost = len(sentence.text) + len(ELISION)
            if chosen and used + cost > max_chars:
                continue  # a shorter, lower-ranked sentence may still fit
            chosen[place] = sentence
            used += cost
    return list(chosen.values())


def _excerpt(sentences: list[RankedSentence]) -> str:
    """Sentences of one passage in reading order, "…" between ones that were not adjacent."""
    ordered = sorted(sentences, key=lambda s: s.position)
    parts = [ordered[0].text]
    for previous, sentence in pairwise(ordered):
        parts.append(" " if sentence.position == previous.position + 1 else ELISION)
        parts.append(sentence.text)
    lead = "… " if ordered[0].position > 0 else ""
    return lead + "".join(parts)


def focus_passages(
    question: str,
    hits: Sequence[SearchHit],
    max_chars: int,
) -> list[SearchHit]:
    """The hits, in rank order, whose text is cut to the question's best sentences."""
    ranked = rank_sentences(question, [hit.chunk.text for hit in hits])
    by_marker: dict[int, list[RankedSentence]] = {}
    for sentence in _chosen(ranked, max_chars):
        by_marker.setdefault(sentence.marker, []).append(sentence)
    return [
        replace(hit, chunk=replace(hit.chunk, text=_excerpt(by_marker[marker])))
        for marker, hit in enumerate(hits, start=1)
        if marker in by_marker
    ]
