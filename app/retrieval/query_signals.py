"""Query-time signals of how much each arm has to go on, read from one query's recall.

Pure functions of numbers the arms already computed (no index access), so fusion can weigh the
arms per query and the leave-one-manual-out harness can score the same rules from cached recalls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


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
