"""Which natural manual questions the answer evaluation asks.

Two sets, each with the same `tuning` / `test` halves:
- `halved`: the first five manuals (R-admin, R-data, R-exts, R-lang, gnuplot); a fixed-seed
  sample of the split's pooled questions, so a manual with more questions gets more (the
  sample of every run before 2026-12-06, kept reproducible);
- `development`: the fifteen development manuals (the first five and the wider set; R-intro
  stays held out), with the same number of questions from each (round robin over the
  manuals in a fixed-seed order, each manual's questions in a fixed-seed order), so a 45-question
  sample asks three of each. The wider set is not halved elsewhere (its questions are "dev", for
  leave-one-manual-out runs); here it is halved by the same rule as the first five
  (`assign_splits`: SHA-256 order of the ids), so tuning and test never share a question.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping
from typing import Literal

from eval.manual_questions import (
    ALL_SOURCES,
    SOURCES,
    ManualQuestion,
    ManualSource,
    assign_splits,
    install_hint,
    load_questions,
    missing_sources,
)

ManualSet = Literal["halved", "development"]
MANUAL_SETS: tuple[ManualSet, ...] = ("halved", "development")
SET_SOURCES: dict[ManualSet, Mapping[str, ManualSource]] = {
    "halved": SOURCES,
    "development": ALL_SOURCES,
}


def split_pool(questions: list[ManualQuestion], split: str) -> list[ManualQuestion]:
    """The questions of one half, in file order; questions without a half (the wider set's
    "dev") are halved per manual by `assign_splits`."""
    unhalved = assign_splits([q for q in questions if q.split == "dev"])
    halves = {q.id: q.split for q in unhalved}
    return [q for q in questions if halves.get(q.id, q.split) == split]


def pooled_sample(pool: list[ManualQuestion], count: int, seed: int) -> list[ManualQuestion]:
    """A fixed-seed sample of the pooled questions, in file order."""
    chosen = set(random.Random(seed).sample(range(len(pool)), min(count, len(pool))))
    return [q for i, q in enumerate(pool) if i in chosen]


def spread_sample(pool: list[ManualQuestion], count: int, seed: int) -> list[ManualQuestion]:
    """`count` questions taken round robin over the manuals (fixed-seed order of the manuals
    and of each manual's questions), so every manual gives as many as it can; grouped by
    manual, in file order within each."""
    rng = random.Random(seed)
    queues = {m: [q for q in pool if q.manual == m] for m in dict.fromkeys(q.manual for q in pool)}
    for queue in queues.values():
        rng.shuffle(queue)
    order = list(queues)
    rng.shuffle(order)
    chosen: set[str] = set()
    depth = 0
    while len(chosen) < min(count, len(pool)):
        for manual in order:
            if depth < len(queues[manual]) and len(chosen) < count:
                chosen.add(queues[manual][depth].id)
        depth += 1
    return [q for manual in queues for q in pool if q.manual == manual and q.id in chosen]


def sample_manual_questions(
    split: str, count: int, seed: int, manual_set: ManualSet = "halved"
) -> list[ManualQuestion]:
    """A fixed-seed sample of one half's questions of the set's installed manuals."""
    sources = SET_SOURCES[manual_set]
    missing = missing_sources(sources)
    if missing:
        print(
            f"SKIPPED {sorted(s.name for s in missing)} ({install_hint(missing)})", file=sys.stderr
        )
    absent = {source.name for source in missing}
    installed = [q for q in load_questions(sources=sources) if sources[q.manual].name not in absent]
    pool = split_pool(installed, split)
    if manual_set == "halved":
        return pooled_sample(pool, count, seed)
    return spread_sample(pool, count, seed)
