"""Fusion families scored from cached recalls (eval/manuals_loo.py): each is a function of
(recall, question) and a parameter grid, so leave-one-out can choose parameters per fold.

The final-order rules the service applies after fusion (exact matches first, heading lines
promoted, role pages demoted) are parameters of every family, so the numbers say whether each
rule helps on manuals it was not chosen on.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.headings import has_heading
from app.retrieval.hybrid import Recall, RetrieverConfig, demote_page_roles, fuse, promote_headings

Params = dict[str, Any]


@dataclass(frozen=True)
class Family:
    """A named fusion with the grid its parameters are chosen from."""

    name: str
    grid: list[Params]
    rank: Callable[[Recall, str, Params], list[str]]

    def order(self, params: Params) -> Callable[[Recall, str], list[str]]:
        """The ordering of one question's candidates (its recall and text) under these
        parameters."""
        return lambda recall, query: self.rank(recall, query, params)


_TRUNCATED: dict[tuple[int, int, int], tuple[Recall, Recall]] = {}


def truncated(recall: Recall, dense: int, keyword: int) -> Recall:
    """The recall as arms of these depths would have found it (exact pins kept); remembered
    across grid points (the cached recalls live as long as the run)."""
    key = (id(recall), dense, keyword)
    found = _TRUNCATED.get(key)
    if found is not None and found[0] is recall:
        return found[1]
    dense_ids, keyword_ids = recall.dense_ids[:dense], recall.keyword_ids[:keyword]
    keep = set(dense_ids) | set(keyword_ids) | set(recall.pinned)
    candidates = {cid: c for cid, c in recall.candidates.items() if cid in keep}
    cut = replace(recall, candidates=candidates, dense_ids=dense_ids, keyword_ids=keyword_ids)
    _TRUNCATED[key] = (recall, cut)
    return cut


def shipped_order(recall: Recall, query: str, config: RetrieverConfig) -> list[str]:
    """What /search orders with these settings (hybrid mode, no reranker)."""
    recall = truncated(recall, config.dense_candidates, config.keyword_candidates)
    ordered = fuse(recall, "hybrid", config)
    if config.promote_headings:
        ordered = promote_headings(ordered, recall, query)
    return demote_page_roles(ordered, recall, config.page_role_shift)


def _finish(ordered: list[str], recall: Recall, query: str, params: Params) -> list[str]:
    """The service's final-order rules, each switched by a parameter."""
    if params.get("pin", True):
        pinned = set(recall.pinned)
        ordered = [c for c in ordered if c in pinned] + [c for c in ordered if c not in pinned]
    if params.get("headings", True):
        ordered = _promoted(ordered, recall, query)
    return demote_page_roles(ordered, recall, params.get("role_shift", 10))


_HEADINGS: dict[tuple[str, str], bool] = {}


def _promoted(ordered: list[str], recall: Recall, query: str) -> list[str]:
    """`promote_headings`, with each (chunk, query) verdict remembered across grid points."""
    pinned = set(recall.pinned)

    def heading(cid: str) -> bool:
        key = (cid, query)
        if key not in _HEADINGS:
            chunk = recall.candidates[cid].chunk
            _HEADINGS[key] = chunk is not None and has_heading(chunk, query)
        return cid not in pinned and _HEADINGS[key]

    matched = [cid for cid in ordered if heading(cid)]
    if not matched:
        return ordered
    moved = pinned | set(matched)
    return [c for c in ordered if c in pinned] + matched + [c for c in ordered if c not in moved]


RULES: list[Params] = [
    {"pin": pin, "headings": headings, "role_shift": shift}
    for pin, headings, shift in itertools.product((True, False), (True, False), (0, 10))
]


# The rules as the service applies them today.
TODAYS_RULES: list[Params] = [{"pin": True, "headings": True, "role_shift": 10}]


def _grid(rules: Sequence[Params] = RULES, **axes: Sequence[Any]) -> list[Params]:
    names = list(axes)
    return [
        {**dict(zip(names, values, strict=True)), **rule}
        for values in itertools.product(*axes.values())
        for rule in rules
    ]


def _rrf(recall: Recall, query: str, p: Params) -> list[str]:
    recall = truncated(recall, p["depth"], p["depth"])
    fused = reciprocal_rank_fusion(
        [recall.dense_ids, recall.keyword_ids], [p["dense_weight"], 1.0], p["k"]
    )
    return _finish([cid for cid, _ in fused], recall, query, p)


def _normalised(scores: dict[str, float]) -> dict[str, float]:
    """Min-max over the arm's own list (its last candidate 0, its first 1)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {cid: (s - low) / span if span > 0 else 1.0 for cid, s in scores.items()}


def _convex(recall: Recall, query: str, p: Params) -> list[str]:
    """alpha * dense + (1 - alpha) * keyword, each min-max normalised over its list."""
    recall = truncated(recall, p["depth"], p["depth"])
    c = recall.candidates
    dense = _normalised({cid: float(c[cid].dense_score or 0.0) for cid in recall.dense_ids})
    keyword = _normalised({cid: float(c[cid].keyword_score or 0.0) for cid in recall.keyword_ids})
    alpha = p["alpha"]
    fused = {
        cid: alpha * dense.get(cid, 0.0) + (1 - alpha) * keyword.get(cid, 0.0)
        for cid in dict.fromkeys([*recall.dense_ids, *recall.keyword_ids])
    }
    ordered = sorted(fused, key=lambda cid: -fused[cid])
    return _finish(ordered, recall, query, p)


FAMILIES: list[Family] = [
    Family(
        "rrf",
        _grid(depth=(30,), k=(5, 20, 60), dense_weight=(0.3, 0.6, 1.0, 1.5, 2.5)),
        _rrf,
    ),
    Family(
        "convex",
        _grid(depth=(30,), alpha=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)),
        _convex,
    ),
]


def _capped(recall: Recall, query: str, p: Params) -> list[str]:
    """Weighted RRF, but a candidate the dense arm ranks below `dense_depth` (or not at all)
    may not take one of the first `floor` places: the keyword arm alone cannot put it there."""
    recall = truncated(recall, p["depth"], p["depth"])
    fused = reciprocal_rank_fusion(
        [recall.dense_ids, recall.keyword_ids], [p["dense_weight"], 1.0], p["k"]
    )
    ordered = [cid for cid, _ in fused]
    ranks = {cid: i for i, cid in enumerate(recall.dense_ids, start=1)}
    agreed = [c for c in ordered if ranks.get(c, 10**6) <= p["dense_depth"]]
    head = agreed[: p["floor"]]
    rest = [c for c in ordered if c not in set(head)]
    return _finish(head + rest, recall, query, p)


FAMILIES.append(
    Family(
        "capped",
        _grid(
            depth=(30,),
            k=(5, 20, 60),
            dense_weight=(0.3, 0.6, 1.0, 1.5),
            dense_depth=(5, 10, 20),
            floor=(1, 3),
        ),
        _capped,
    )
)


@cache
def _service_config() -> RetrieverConfig:
    """The retriever configuration of today's default settings."""
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        return RetrieverConfig.from_settings(settings)


def _service(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's own `fuse` with these settings (RetrieverConfig fields), then the rules."""
    fields = {name: p[name] for name in p if name in RetrieverConfig.__dataclass_fields__}
    config = replace(_service_config(), **fields)
    recall = truncated(recall, config.dense_candidates, config.keyword_candidates)
    if not p.get("pin", True):
        recall = replace(recall, pinned=[])
    ordered = fuse(recall, "hybrid", config)
    if p.get("climb_floor", 0):
        ordered = _climb_capped(ordered, recall, p["climb_dense_depth"], p["climb_floor"])
    return _finish(ordered, recall, query, {**p, "pin": False})


def _climb_capped(ordered: list[str], recall: Recall, dense_depth: int, floor: int) -> list[str]:
    """The first `floor` places (after exact matches) go to candidates the dense arm ranks
    within `dense_depth`: the keyword arm alone cannot put a chunk there."""
    pinned = set(recall.pinned)
    ranks = {cid: i for i, cid in enumerate(recall.dense_ids, start=1)}
    head = [c for c in ordered if c in pinned]
    agreed = [c for c in ordered if c not in pinned and ranks.get(c, 10**6) <= dense_depth]
    head += agreed[:floor]
    taken = set(head)
    return head + [c for c in ordered if c not in taken]


FAMILIES.extend(
    [
        Family(
            "service-rrf",
            _grid(
                fusion=("rrf",),
                rrf_k=(5, 20, 60),
                dense_weight=(0.3, 0.6, 1.0, 1.5),
                keyword_coverage_power=(0.0, 1.0),
                keyword_gate=(True, False),
            ),
            _service,
        ),
        Family(
            "scores",
            _grid(
                fusion=("scores",),
                score_dense_weight=(0.3, 0.5, 0.7, 1.0, 1.4, 2.0),
                keyword_coverage_power=(0.0, 1.0),
                keyword_gate=(True, False),
            ),
            _service,
        ),
        Family(
            "scores-floored",
            _grid(
                TODAYS_RULES,
                fusion=("scores",),
                score_dense_weight=(0.3, 0.5, 0.7),
                keyword_coverage_power=(1.0,),
                keyword_gate=(True,),
                score_dense_spread=(0.05, 0.08, 0.12, 0.2),
                score_keyword_spread=(1.0, 2.0, 3.0, 5.0, 8.0),
            ),
            _service,
        ),
        Family(
            "scores-capped",
            _grid(
                fusion=("scores",),
                score_dense_weight=(0.5, 0.7, 1.0, 1.4),
                keyword_coverage_power=(1.0,),
                keyword_gate=(True,),
                climb_dense_depth=(3, 10, 30),
                climb_floor=(1, 2),
            ),
            _service,
        ),
    ]
)
