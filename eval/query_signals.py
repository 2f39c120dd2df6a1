"""Query-time signals of how much each arm has to go on, for fusion rules under measurement.

The leave-one-manual-out harness (eval/manuals_loo.py) counts, once per question, how many
chunks hold each of its content words (`counted`) and caches them with the recall; the rules
are pure functions of those numbers and the arms' scores. `/search` counts nothing of this: a
rule that wins moves into app/retrieval together with its counting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from app.retrieval.function_words import content_tokens
from app.retrieval.hybrid import Recall
from app.retrieval.keyword import KeywordSnapshot
from app.text.tokenizer import Tokenizer


@dataclass
class CountedRecall(Recall):
    """A recall with the rarity of the question's words: how many chunks of the searched text
    hold each content word (0: none), and how many chunks were searched."""

    term_chunks: dict[str, int] = field(default_factory=dict)
    chunk_total: int = 0


def counted(
    recall: Recall, snapshot: KeywordSnapshot, tokenizer: Tokenizer, query: str
) -> CountedRecall:
    """The recall with its question's word counts read from the keyword snapshot it searched."""
    content = content_tokens(tokenizer(query), tokenizer)
    return CountedRecall(
        **_values(recall),
        term_chunks={t: snapshot.chunk_count(t) for t in dict.fromkeys(content) if t},
        chunk_total=snapshot.size,
    )


def as_counted(recall: Recall) -> CountedRecall:
    """A cached recall as a `CountedRecall` (recalls cached while the service still counted
    carry the counts as plain attributes)."""
    if isinstance(recall, CountedRecall):
        return recall
    return CountedRecall(
        **_values(recall),
        term_chunks=dict(getattr(recall, "term_chunks", {})),
        chunk_total=int(getattr(recall, "chunk_total", 0)),
    )


def word_counts(recall: Recall) -> tuple[dict[str, int], int]:
    """The question's word counts and the chunks searched (a recall the harness counted)."""
    if not isinstance(recall, CountedRecall):
        raise TypeError("word counts are read from the harness's recalls (`counted`)")
    return recall.term_chunks, recall.chunk_total


def _values(recall: Recall) -> dict[str, Any]:
    return {f.name: getattr(recall, f.name) for f in fields(Recall)}


def idf(held_by: int, total: int) -> float:
    """BM25's (non-negative) inverse document frequency of a word `held_by` of `total` chunks."""
    return math.log(1.0 + (total - held_by + 0.5) / (held_by + 0.5))


def rare_word_coverage(term_chunks: Mapping[str, int], total: int) -> float:
    """Share of the query's word weight (idf, a word no chunk holds weighing most) that the text
    holds: 1 when every content word occurs, near 0 when only its common words do. 1 for a
    query without words, so that it changes nothing."""
    if not term_chunks or total <= 0:
        return 1.0
    weights = {t: idf(n, total) for t, n in term_chunks.items()}
    mass = sum(weights.values())
    if mass <= 0:
        return 1.0
    return sum(w for t, w in weights.items() if term_chunks[t] > 0) / mass


def peakedness(scores: Sequence[float], depth: int = 10) -> float:
    """How far an arm's first score stands above its first `depth` scores, in their standard
    deviations (0 for fewer than two scores or a flat list)."""
    head = [float(s) for s in scores[:depth]]
    if len(head) < 2:
        return 0.0
    mean = sum(head) / len(head)
    spread = (sum((s - mean) ** 2 for s in head) / len(head)) ** 0.5
    return (head[0] - mean) / spread if spread > 0 else 0.0
