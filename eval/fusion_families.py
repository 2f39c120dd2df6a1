"""Fusion families scored from cached recalls (eval/manuals_loo.py): each is a function of
(recall, question) and a parameter grid, so leave-one-out can choose parameters per fold.

The final-order rules the service applies after fusion (exact matches first, heading lines
promoted, role pages demoted) are parameters of every family, so the numbers say whether each
rule helps on manuals it was not chosen on.
"""

from __future__ import annotations

import itertools
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.domain import SECTION_SEPARATOR, section_path
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.headings import has_heading
from app.retrieval.hybrid import Recall, RetrieverConfig, demote_page_roles, fuse, promote_headings
from app.text.tokenizer import DEFAULT_TOKENIZER
from eval.query_signals import idf, peakedness, rare_word_coverage, word_counts

Params = dict[str, Any]
Rank = Callable[[Recall, str, Params], list[str]]


@dataclass(frozen=True)
class Family:
    """A named fusion with the grid its parameters are chosen from."""

    name: str
    grid: list[Params]
    rank: Rank

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
    recall = _with_signals(recall, p)
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
                reserve_dense_first=(0,),
                reserve_dense_top_within=(0,),
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


# --- query-time weighting, places reserved for each arm's first candidates (RAG_RESERVE_*),
# the rank and score orders fused again (RAG_FUSION=blend) ---


def _with_signals(recall: Recall, p: Params) -> Recall:
    """The recall with its coverage read as rare-word coverage (idf-weighted) when asked."""
    if p.get("coverage_signal", "count") != "idf":
        return recall
    return replace(recall, coverage=rare_word_coverage(*word_counts(recall)))


def _blend(recall: Recall, query: str, p: Params) -> list[str]:
    """Rank fusion of the two fusions (`RAG_FUSION=blend`): today's RRF order and today's
    score-fusion order, fused again; then the final-order rules."""
    return _service(recall, query, {**p, "fusion": "blend"})


FAMILIES.extend(
    [
        Family(
            "rrf-idf",
            _grid(
                TODAYS_RULES,
                fusion=("rrf",),
                rrf_k=(5, 20),
                dense_weight=(0.3, 0.6, 1.0),
                coverage_signal=("count", "idf"),
                keyword_coverage_power=(1.0, 2.0, 4.0),
            ),
            _service,
        ),
        Family(
            "rrf-reserved",
            _grid(
                TODAYS_RULES,
                fusion=("rrf",),
                rrf_k=(5,),
                dense_weight=(0.3, 0.6),
                reserve_dense_first=(1, 2),
                reserve_keyword_first=(0, 1),
                reserve_within=(2, 3, 5),
            ),
            _service,
        ),
        Family(
            "scores-reserved",
            _grid(
                TODAYS_RULES,
                fusion=("scores",),
                score_dense_weight=(0.3, 0.5),
                score_dense_spread=(0.08,),
                score_keyword_spread=(2.0,),
                reserve_dense_first=(0, 1, 2),
                reserve_keyword_first=(0, 1),
                reserve_within=(2, 3, 5),
            ),
            _service,
        ),
        Family(
            "scores-idf",
            _grid(
                TODAYS_RULES,
                fusion=("scores",),
                score_dense_weight=(0.3, 0.5, 0.7),
                score_dense_spread=(0.08,),
                score_keyword_spread=(2.0,),
                coverage_signal=("count", "idf"),
                keyword_coverage_power=(1.0, 2.0, 4.0),
            ),
            _service,
        ),
        Family(
            "blend",
            _grid(
                TODAYS_RULES,
                blend_score_weight=(0.5, 1.0, 2.0),
                blend_rrf_k=(5, 60),
                reserve_dense_first=(0, 1, 2),
                reserve_keyword_first=(0, 1),
                reserve_within=(5,),
            ),
            _blend,
        ),
    ]
)


def _peak_weighted(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's fusion with the dense weight of this query scaled by (dense peakedness /
    keyword peakedness) ** power, clipped to [1/4, 4]: the arm whose first candidate stands
    out more counts for more."""
    base = _service_config()
    recall = truncated(recall, base.dense_candidates, base.keyword_candidates)
    c = recall.candidates
    dense = peakedness([float(c[i].dense_score or 0.0) for i in recall.dense_ids])
    keyword = peakedness([float(c[i].keyword_score or 0.0) for i in recall.keyword_ids])
    ratio = min(4.0, max(0.25, (max(dense, 0.1) / max(keyword, 0.1)) ** p["peak_power"]))
    fields = {name: p[name] for name in p if name in RetrieverConfig.__dataclass_fields__}
    config = replace(base, **fields)
    if config.fusion == "scores":
        config = replace(config, score_dense_weight=config.score_dense_weight * ratio)
    else:
        config = replace(config, dense_weight=config.dense_weight * ratio)
    ordered = fuse(recall, "hybrid", config)
    return _finish(ordered, recall, query, {**p, "pin": False})


FAMILIES.append(
    Family(
        "rrf-peak",
        _grid(
            TODAYS_RULES,
            fusion=("rrf",),
            rrf_k=(5, 20),
            dense_weight=(0.3, 0.6, 1.0),
            peak_power=(0.0, 0.5, 1.0, 2.0),
        ),
        _peak_weighted,
    )
)


# --- section titles counting in ranking: a chunk whose outline path names the question's words ---

_SECTION_TOKENS: dict[str, frozenset[str]] = {}


def section_match(recall: Recall, cid: str) -> float:
    """Share of the query's word weight (idf) that the chunk's section path holds (0 when it
    has no path)."""
    chunk = recall.candidates[cid].chunk
    path = section_path(chunk) if chunk is not None else None
    term_chunks, total = word_counts(recall)
    if not path or not term_chunks:
        return 0.0
    held = _SECTION_TOKENS.get(path)
    if held is None:
        held = _SECTION_TOKENS[path] = frozenset(DEFAULT_TOKENIZER(path))
    weights = {t: idf(n, total) for t, n in term_chunks.items()}
    mass = sum(weights.values())
    return sum(w for t, w in weights.items() if t in held) / mass if mass > 0 else 0.0


def _section_boosted(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's order, then each chunk whose section path holds at least `min_share` of
    the query's word weight moves `shift` places up (exact matches stay first)."""
    base = _service_config()
    recall = truncated(recall, base.dense_candidates, base.keyword_candidates)
    fields = {name: p[name] for name in p if name in RetrieverConfig.__dataclass_fields__}
    ordered = fuse(recall, "hybrid", replace(base, **fields))
    if p["section_shift"] > 0:
        pinned = set(recall.pinned)

        def key(item: tuple[int, str]) -> tuple[int, float]:
            position, cid = item
            boosted = section_match(recall, cid) >= p["min_share"]
            return (0 if cid in pinned else 1, position - (p["section_shift"] if boosted else 0))

        ordered = [cid for _, cid in sorted(enumerate(ordered), key=key)]
    return _finish(ordered, recall, query, {**p, "pin": False})


FAMILIES.append(
    Family(
        "section-boost",
        _grid(
            TODAYS_RULES,
            fusion=("rrf", "scores"),
            section_shift=(0, 2, 5, 10, 30),
            min_share=(0.3, 0.5, 0.8),
        ),
        _section_boosted,
    )
)


# --- boilerplate by the outline: chunks under an appendix, licence, index, glossary or
# changelog title of the document's own outline yield places to the rest ---

BOILERPLATE_TITLE = re.compile(
    r"^\s*(appendix\b|annex\b|index\b|glossary\b|licen[cs]e\b|gnu (free|general)\b|"
    r"copying\b|change ?log|changes\b|release notes|history\b|differences\b|"
    r"(.*\b)?(licen[cs]e|glossary|changelog|release notes)\s*$)",
    re.IGNORECASE,
)


def outline_boilerplate(recall: Recall, cid: str) -> bool:
    """Whether a title on the chunk's outline path names an appendix, a licence, an index, a
    glossary, a changelog or a "differences" section."""
    chunk = recall.candidates[cid].chunk
    path = section_path(chunk) if chunk is not None else None
    return bool(path) and any(
        BOILERPLATE_TITLE.match(title) for title in str(path).split(SECTION_SEPARATOR)
    )


def _boilerplate_demoted(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's order, then chunks under a boilerplate title (`outline_boilerplate`) move
    `boiler_shift` places down (exact matches stay first)."""
    ordered = _service(recall, query, p)
    if p["boiler_shift"] <= 0:
        return ordered
    pinned = set(recall.pinned)

    def key(item: tuple[int, str]) -> tuple[int, int]:
        position, cid = item
        demoted = cid not in pinned and outline_boilerplate(recall, cid)
        return (0 if cid in pinned else 1, position + (p["boiler_shift"] if demoted else 0))

    return [cid for _, cid in sorted(enumerate(ordered), key=key)]


FAMILIES.append(
    Family(
        "boilerplate-outline",
        _grid(TODAYS_RULES, fusion=("blend",), boiler_shift=(0, 1, 2, 3, 5, 10)),
        _boilerplate_demoted,
    )
)


# --- page support: a chunk whose page holds other strong chunks moves up (the manuals are
# scored by page) ---


def _page_supported(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's fusion, then each page's first chunk scored 1 / (k + its place) plus
    `support` times the same score of the page's other chunks (the others keep their own score);
    exact matches stay first; then the final-order rules."""
    base = _service_config()
    recall = truncated(recall, base.dense_candidates, base.keyword_candidates)
    ordered = fuse(recall, "hybrid", base)
    pinned = set(recall.pinned)
    rest = [c for c in ordered if c not in pinned]
    own = {cid: 1.0 / (p["page_k"] + i) for i, cid in enumerate(rest, start=1)}
    pages: dict[object, list[str]] = {}
    for cid in rest:
        chunk = recall.candidates[cid].chunk
        pages.setdefault((chunk.document_id, chunk.page) if chunk else cid, []).append(cid)
    score = dict(own)
    for members in pages.values():
        first = members[0]
        score[first] += p["support"] * sum(own[c] for c in members[1:])
    place = {cid: i for i, cid in enumerate(rest)}
    rest = sorted(rest, key=lambda c: (-score[c], place[c]))
    return _finish([c for c in ordered if c in pinned] + rest, recall, query, {**p, "pin": False})


FAMILIES.append(
    Family(
        "page-support",
        _grid(TODAYS_RULES, page_k=(5, 20, 60), support=(0.0, 0.1, 0.25, 0.5, 1.0)),
        _page_supported,
    )
)


# --- keyword selectivity: the keyword arm weighs less on a question whose best BM25 chunk holds
# little of the question's word weight ---


def keyword_selectivity(recall: Recall) -> float:
    """The keyword arm's first score over the idf mass of the question's words the text holds
    (about the score of a chunk holding each of them once): near 1 when its best chunk holds
    them all, low when it matched a few common ones."""
    term_chunks, total = word_counts(recall)
    mass = sum(idf(n, total) for n in term_chunks.values() if n > 0)
    if mass <= 0 or not recall.keyword_ids:
        return 1.0
    return float(recall.candidates[recall.keyword_ids[0]].keyword_score or 0.0) / mass


def _selectivity_weighted(recall: Recall, query: str, p: Params) -> list[str]:
    """The service's order with the keyword arm's coverage (its weight) scaled by
    clip(selectivity / `full_at`, `least`, 1)."""
    factor = min(1.0, max(p["least"], keyword_selectivity(recall) / p["full_at"]))
    return _service(replace(recall, coverage=recall.coverage * factor), query, p)


FAMILIES.append(
    Family(
        "keyword-selectivity",
        _grid(TODAYS_RULES, fusion=("blend",), full_at=(0.01, 0.3, 0.5, 0.7), least=(0.0, 0.6)),
        _selectivity_weighted,
    )
)


# --- the English arm (RAG_ENGLISH_EMBEDDING): fusion values of its own, used only where it
# ranked the dense list (`Recall.english_dense`); other questions keep today's ---


def _english_only(rank: Rank) -> Rank:
    """`rank` where the English arm ranked the dense list, today's order elsewhere."""

    def ranked(recall: Recall, query: str, p: Params) -> list[str]:
        if not recall.english_dense:
            return _service(recall, query, {"fusion": _service_config().fusion, **TODAYS_RULES[0]})
        return rank(recall, query, p)

    return ranked


# Today's order, with these RetrieverConfig values where the English arm ranked the dense list
# (as `RetrieverConfig.english_fusion` applies them).
_english_fused = _english_only(_service)


FAMILIES.append(
    Family(
        "english",
        _grid(
            TODAYS_RULES,
            fusion=("blend", "scores", "rrf"),
            dense_weight=(0.3, 0.6, 1.0),
            score_dense_weight=(0.5, 0.7, 1.0),
            blend_score_weight=(1.0, 2.0),
            reserve_dense_first=(1, 2),
        ),
        _english_fused,
    )
)


# --- a per-query lean towards the dense arm: today's fusion, with the dense arm's weights
# raised on a question whose signals say the dense arm is sure and the keyword arm is not ---


def arm_signals(recall: Recall) -> dict[str, float]:
    """Query-time signals of the two arms (their lists as fusion sees them):
    `peaks`: dense peakedness less keyword peakedness (each arm's first score above its first
    ten, in their standard deviations); `dense_peak`, `keyword_peak` alone; `agree`: how many of
    the dense arm's first 5 the keyword arm's first 10 hold (0-5); `keyword_gap`: the keyword
    arm's relative drop from its first to its fifth score (0 flat, 1 steep)."""
    c = recall.candidates
    dense = [float(c[i].dense_score or 0.0) for i in recall.dense_ids]
    keyword = [float(c[i].keyword_score or 0.0) for i in recall.keyword_ids]
    dense_peak, keyword_peak = peakedness(dense), peakedness(keyword)
    top_keyword = set(recall.keyword_ids[:10])
    gap = (keyword[0] - keyword[4]) / keyword[0] if len(keyword) > 4 and keyword[0] > 0 else 1.0
    return {
        "peaks": dense_peak - keyword_peak,
        "dense_peak": dense_peak,
        "keyword_peak": keyword_peak,
        "agree": float(sum(cid in top_keyword for cid in recall.dense_ids[:5])),
        "keyword_gap": gap,
    }


# Signals that speak for the dense arm as they grow, and those that speak against it.
_FOR_DENSE = ("peaks", "dense_peak")


def leans_dense(recall: Recall, signal: str, threshold: float) -> bool:
    """Whether this question's `signal` (`arm_signals`) passes `threshold` towards the dense
    arm (at or above it for a signal for the dense arm, at or below it for one against)."""
    value = arm_signals(recall)[signal]
    return value >= threshold if signal in _FOR_DENSE else value <= threshold


def _signals(recall: Recall) -> dict[str, float]:
    """`arm_signals` of the recall as today's arms' depths cut it."""
    base = _service_config()
    return arm_signals(truncated(recall, base.dense_candidates, base.keyword_candidates))


def _dense_weights_times(recall: Recall, query: str, p: Params, factor: float) -> list[str]:
    """Today's order with both orders' dense weights (rank and score) times `factor`."""
    base = _service_config()
    leaned = {
        **p,
        "dense_weight": base.dense_weight * factor,
        "score_dense_weight": base.score_dense_weight * factor,
    }
    return _service(recall, query, leaned)


def _dense_leaning(recall: Recall, query: str, p: Params) -> list[str]:
    """Today's order; on a question that leans dense (`leans_dense`), both orders' dense weights
    times `boost` and the dense arm's first `lean_reserve` kept within `lean_within` places."""
    base = _service_config()
    cut = truncated(recall, base.dense_candidates, base.keyword_candidates)
    signal, threshold = p["lean"]
    if (p["boost"] == 1.0 and not p["lean_reserve"]) or not leans_dense(cut, signal, threshold):
        return _service(recall, query, p)
    if p["lean_reserve"]:
        p = {**p, "reserve_dense_first": p["lean_reserve"], "reserve_within": p["lean_within"]}
    return _dense_weights_times(recall, query, p, p["boost"])


LEANS = (
    ("peaks", -0.5),
    ("peaks", 0.0),
    ("peaks", 0.5),
    ("peaks", 1.0),
    ("agree", 0.0),
    ("agree", 1.0),
    ("keyword_gap", 0.2),
    ("keyword_gap", 0.3),
    ("keyword_gap", 0.4),
    ("keyword_peak", 1.8),
    ("keyword_peak", 2.2),
)

FAMILIES.append(
    Family(
        "dense-lean",
        _grid(
            TODAYS_RULES,
            fusion=("blend",),
            lean=LEANS,
            boost=(1.0, 2.0, 4.0, 8.0),
            lean_reserve=(0, 1),
            lean_within=(1,),
        ),
        _dense_leaning,
    )
)


def _dense_leaning_smoothly(recall: Recall, query: str, p: Params) -> list[str]:
    """Today's order with both orders' dense weights times boost ** x, x the question's
    `peaks` signal mapped linearly from [`low`, `high`] onto [0, 1] (clipped)."""
    x = (_signals(recall)["peaks"] - p["low"]) / (p["high"] - p["low"])
    return _dense_weights_times(recall, query, p, p["boost"] ** min(1.0, max(0.0, x)))


FAMILIES.append(
    Family(
        "dense-lean-smooth",
        _grid(
            TODAYS_RULES,
            fusion=("blend",),
            low=(-1.0, 0.0),
            high=(1.0, 2.0),
            boost=(1.0, 2.0, 4.0, 8.0),
        ),
        _dense_leaning_smoothly,
    )
)


FAMILIES.extend(
    [
        Family(
            "english-lean-smooth",
            _grid(
                TODAYS_RULES,
                fusion=("blend",),
                low=(-1.0, 0.0),
                high=(1.0, 2.0),
                boost=(1.0, 1.5, 2.0, 4.0),
            ),
            _english_only(_dense_leaning_smoothly),
        ),
    ]
)


def _dense_leaning_signed(recall: Recall, query: str, p: Params) -> list[str]:
    """Today's order with both orders' dense weights times boost ** clip(peaks / scale, -1, 1):
    up on a question whose dense arm stands out more than its keyword arm, down on one whose
    keyword arm stands out more (`arm_signals`)."""
    x = min(1.0, max(-1.0, _signals(recall)[p["signal"]] / p["scale"]))
    return _dense_weights_times(recall, query, p, p["boost"] ** x)


FAMILIES.append(
    Family(
        "english-lean-signed",
        _grid(
            TODAYS_RULES,
            fusion=("blend",),
            signal=("peaks",),
            scale=(0.5, 1.0, 2.0),
            boost=(1.0, 1.5, 2.0, 4.0),
        ),
        _english_only(_dense_leaning_signed),
    )
)


def _dense_leaning_unless_rare(recall: Recall, query: str, p: Params) -> list[str]:
    """`_dense_leaning_smoothly`, except on a question holding a word that at most `rare_max`
    chunks hold (a rare term the keyword arm is there for): today's order."""
    term_chunks, _ = word_counts(recall)
    if any(0 < n <= p["rare_max"] for n in term_chunks.values()):
        return _service(recall, query, p)
    return _dense_leaning_smoothly(recall, query, p)


FAMILIES.append(
    Family(
        "english-lean-unless-rare",
        _grid(
            TODAYS_RULES,
            fusion=("blend",),
            rare_max=(0, 2, 5, 10),
            low=(-1.0, 0.0),
            high=(2.0,),
            boost=(1.0, 2.0, 4.0),
        ),
        _english_only(_dense_leaning_unless_rare),
    )
)


# --- the dense arm's very first candidate kept inside fewer places than its first two
# (RAG_RESERVE_DENSE_TOP_WITHIN) ---

FAMILIES.append(
    Family(
        "blend-top",
        _grid(TODAYS_RULES, fusion=("blend",), reserve_dense_top_within=(0, 2, 3, 4)),
        _service,
    )
)
