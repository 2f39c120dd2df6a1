"""Reciprocal Rank Fusion: combine rankings by rank, not by their incomparable scores."""

from __future__ import annotations

from collections.abc import Sequence


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = 60
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(id) = sum of weight / (k + rank), rank 1-based; best first.

    Ties break on the best single rank an id reached, then on the id, so the result never
    depends on the order in which the rankings are given.
    """
    if len(rankings) != len(weights):
        raise ValueError("one weight per ranking is required")
    if k <= 0:
        raise ValueError("k must be positive")
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:  # a duplicate in one arm must not count twice
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            best_rank[item] = min(best_rank.get(item, rank), rank)
    ordered = sorted(scores, key=lambda item: (-scores[item], best_rank[item], item))
    return [(item, scores[item]) for item in ordered]


def standardised_score_fusion(
    arms: Sequence[Sequence[tuple[str, float]]],
    weights: Sequence[float],
    spread_floors: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse scored id lists by their standardised scores: score(id) = sum of weight * z, where
    z = (score - mean) / standard deviation over that arm's own list; an id an arm did not
    return takes that arm's lowest z. Best first.

    Per query, an arm whose first candidates stand far above the rest of its list (a rare word
    matched in a few chunks, a passage much closer than the others) counts for more than an arm
    whose list is flat, which rank fusion cannot see. `spread_floors` (one per arm, in the arm's
    own score units): the standard deviation an arm's scores are divided by is at least this, so
    a nearly flat list (every passage about as close) is not stretched as if its first
    candidates stood out. An arm of weight 0, or with fewer than two distinct scores, adds
    nothing (its ids are still ranked, by the other arms). Ties break on the best single rank an
    id reached, then on the id.
    """
    if len(arms) != len(weights):
        raise ValueError("one weight per arm is required")
    floors = list(spread_floors) if spread_floors is not None else [0.0] * len(arms)
    if len(floors) != len(arms):
        raise ValueError("one spread floor per arm is required")
    ids: dict[str, None] = {}
    best_rank: dict[str, int] = {}
    for arm in arms:
        for rank, (item, _) in enumerate(arm, start=1):
            ids.setdefault(item, None)
            best_rank[item] = min(best_rank.get(item, rank), rank)
    scores = dict.fromkeys(ids, 0.0)
    for arm, weight, floor_spread in zip(arms, weights, floors, strict=True):
        z = _standardised(arm, floor_spread)
        if weight <= 0 or not z:
            continue
        floor = min(z.values())
        for item in scores:
            scores[item] += weight * z.get(item, floor)
    ordered = sorted(scores, key=lambda item: (-scores[item], best_rank[item], item))
    return [(item, scores[item]) for item in ordered]


def _standardised(arm: Sequence[tuple[str, float]], floor: float = 0.0) -> dict[str, float]:
    """Each id's z-score within its arm (the first score of a duplicate id), the deviation taken
    as at least `floor`; {} when the arm has fewer than two distinct scores."""
    first: dict[str, float] = {}
    for item, score in arm:
        first.setdefault(item, float(score))
    values = list(first.values())
    if len(values) < 2:
        return {}
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    if spread <= 0:
        return {}
    spread = max(spread, floor)
    return {item: (v - mean) / spread for item, v in first.items()}


def reserve_places(ordered: Sequence[str], wanted: Sequence[str], within: int) -> list[str]:
    """`ordered` with the ids of `wanted` that it holds (at most `within`, the best placed)
    inside its first `within` places; the other places of that head go to the rest in order,
    and the head and the tail each keep their order. A fused ranking can then never push an
    arm's first candidates further down than `within`, however strongly the other arm disagrees.
    """
    if within <= 0:
        return list(ordered)
    position = {item: i for i, item in enumerate(ordered)}
    held = sorted({item for item in wanted if item in position}, key=position.__getitem__)
    must = set(held[:within])
    others = within - len(must)
    head: list[str] = []
    for item in ordered:
        if len(head) >= within:
            break
        if item in must:
            head.append(item)
        elif others > 0:
            head.append(item)
            others -= 1
    taken = set(head)
    return head + [item for item in ordered if item not in taken]
