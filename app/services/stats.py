"""Per-tenant statistics: documents, chunks, answer-cache figures and quota usage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.storage.cache import CacheStats

if TYPE_CHECKING:
    from app.jobs.store import JobStore, StorageQuota
    from app.storage.cache import AnswerCache
    from app.storage.conversations import ConversationStore
    from app.storage.documents import DocumentStore


@dataclass(frozen=True)
class QuotaUse:
    """How much of one per-tenant quota is used."""

    used: int
    limit: int


@dataclass(frozen=True)
class TenantStats:
    """A tenant's figures; `quotas` is keyed documents, stored_bytes, chunks, ocr_pages,
    queued_jobs, and conversations, conversation_messages (the asking user's) and
    conversation_bytes."""

    documents: int
    chunks: int
    cache: CacheStats | None  # None for a caller who does not read every collection
    quotas: dict[str, QuotaUse]


@dataclass(frozen=True)
class StatsDeps:
    """What the statistics read, built once per process by the container."""

    documents: DocumentStore
    jobs: JobStore
    cache: AnswerCache
    count_chunks: Callable[[str], int]  # the tenant's chunks in the vector store
    storage_quota: StorageQuota
    queued_jobs_limit: int
    conversations: ConversationStore  # with its quota
    ocr_pages_limit: int = 0  # RAG_QUOTA_OCR_PAGES


def tenant_stats(deps: StatsDeps, *, tenant_id: str, user_id: str) -> TenantStats:
    """The tenant's documents, chunks, cache entries and hit rate, and each quota's use (the
    per-user conversation quotas as `user_id` uses them)."""
    cache = deps.cache.stats(tenant_id)
    stored = deps.documents.usage(tenant_id)
    quota = deps.storage_quota
    quotas = {
        "documents": QuotaUse(stored.documents, quota.documents),
        "stored_bytes": QuotaUse(stored.stored_bytes, quota.stored_bytes),
        "chunks": QuotaUse(stored.chunks, quota.chunks),
        "ocr_pages": QuotaUse(stored.ocr_pages, deps.ocr_pages_limit),
        "queued_jobs": QuotaUse(deps.jobs.count_active(tenant_id), deps.queued_jobs_limit),
        **_conversation_quotas(deps.conversations, tenant_id, user_id),
    }
    return TenantStats(
        documents=deps.documents.count(tenant_id),
        chunks=deps.count_chunks(tenant_id),
        cache=cache,
        quotas=quotas,
    )


def _conversation_quotas(
    store: ConversationStore, tenant_id: str, user_id: str
) -> dict[str, QuotaUse]:
    used, quota = store.usage(tenant_id, user_id), store.quota
    return {
        "conversations": QuotaUse(used.conversations, quota.conversations_per_user),
        "conversation_messages": QuotaUse(
            used.fullest_conversation_messages, quota.messages_per_conversation
        ),
        "conversation_bytes": QuotaUse(used.stored_bytes, quota.stored_bytes_per_tenant),
    }
