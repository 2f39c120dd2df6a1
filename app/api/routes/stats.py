"""Per-tenant statistics."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AccessStoreDep, CallerAccess, Principal, Stats
from app.api.schemas import QuotaOut, QuotasOut, StatsOut
from app.services.collections import stats_in_reach
from app.services.stats import tenant_stats

router = APIRouter(tags=["ops"])


@router.get("/stats", response_model=StatsOut)
def stats(
    principal: Principal, deps: Stats, access_store: AccessStoreDep, access: CallerAccess
) -> StatsOut:
    """The tenant's documents, chunks, cache entries, cache hit rate and quota usage (the
    per-user conversation quotas as the caller uses them); a caller who does not read every
    collection sees its collections' documents and chunks, and no cache figures."""
    found = stats_in_reach(
        tenant_stats(deps, tenant_id=principal.tenant_id, user_id=principal.user_id),
        access_store,
        access,
    )
    quotas = {name: QuotaOut(used=q.used, limit=q.limit) for name, q in found.quotas.items()}
    cache = found.cache
    return StatsOut(
        documents=found.documents,
        chunks=found.chunks,
        cache_entries=None if cache is None else cache.entries,
        cache_hits=None if cache is None else cache.hits,
        cache_misses=None if cache is None else cache.misses,
        cache_hit_rate=None if cache is None else cache.hit_rate,
        quotas=QuotasOut(**quotas),
    )
