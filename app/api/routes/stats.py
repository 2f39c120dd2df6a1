"""Per-tenant statistics."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ContainerDep, Principal
from app.api.schemas import QuotaOut, QuotasOut, StatsOut
from app.services.documents import quota_usage

router = APIRouter(tags=["ops"])


@router.get("/stats", response_model=StatsOut)
def stats(container: ContainerDep, principal: Principal) -> StatsOut:
    """The tenant's documents, chunks, cache entries, cache hit rate and quota usage."""
    tenant = principal.tenant_id
    cache = container.cache.stats(tenant)
    quotas = {
        name: QuotaOut(used=used, limit=limit)
        for name, (used, limit) in quota_usage(container, tenant).items()
    }
    return StatsOut(
        documents=container.documents.count(tenant),
        chunks=container.corpus.count(tenant),
        cache_entries=cache.entries,
        cache_hits=cache.hits,
        cache_misses=cache.misses,
        cache_hit_rate=cache.hit_rate,
        quotas=QuotasOut(**quotas),
    )
