"""Audit entries: who acts (the caller and its client IP), and reading a tenant's log.

Actions are a fixed vocabulary (`ACTIONS`), so GET /audit can filter on them and a typo in a
caller fails a test rather than writing an action nobody searches for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from app.domain import ListedPage
from app.storage.audit import AuditEntry, AuditRecord, AuditStore
from app.timing import AtMostEvery

AuditAction = Literal[
    "login.succeeded",
    "login.failed",
    "login.locked",
    "logout",
    "logout.everywhere",
    "password.changed",
    "key.created",
    "key.revoked",
    "user.created",
    "user.changed",
    "user.deleted",
    "document.uploaded",
    "document.deleted",
    "document.moved",
    "document.metadata",
    "collection.created",
    "collection.changed",
    "collection.deleted",
    "collection.access",
    "group.created",
    "group.changed",
    "group.deleted",
    "group.member_added",
    "group.member_removed",
    "quota.refused",
    "answer.rated",
    "answers.exported",
    "answers.deleted",
    "evaluation.set_created",
    "evaluation.set_deleted",
    "evaluation.run_started",
    "sso.configured",
    "sso.removed",
    "sso.signed_in",
    "sso.provisioned",
    "sso.role_changed",
    "sso.refused",
    "sso.password_refused",
    "webhook.created",
    "webhook.changed",
    "webhook.deleted",
    "webhook.disabled",
]
ACTIONS: tuple[str, ...] = get_args(AuditAction)
# Old entries are deleted at most this often per process (a DELETE on an indexed column).
PRUNE_EVERY_S = 3600.0


@dataclass(frozen=True)
class Actor:
    """Who is acting: a user of a tenant (None before login succeeds) from a client IP."""

    tenant_id: str
    user_id: str | None
    client_ip: str | None
    key_id: str | None = None  # when acting with an API key (its id, never the key)

    def entry(self, action: str, *, target_id: str | None = None, **detail: Any) -> AuditEntry:
        """An audit entry of this actor doing `action` (one of ACTIONS)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown audit action {action!r}")
        if self.key_id is not None:
            detail = {"key_id": self.key_id, **detail}
        return AuditEntry(
            tenant_id=self.tenant_id,
            action=action,
            user_id=self.user_id,
            target_id=target_id,
            client_ip=self.client_ip,
            detail=detail,
        )


class AuditLog:
    """The audit store plus its retention: entries older than RAG_AUDIT_RETENTION_DAYS go."""

    def __init__(self, store: AuditStore, retention_days: int) -> None:
        self.store = store
        self._retention_days = retention_days
        self.pruning = AtMostEvery(PRUNE_EVERY_S)

    def record(self, entry: AuditEntry) -> None:
        """Write an entry that goes with no other change (a login, a refusal)."""
        self.store.add(entry)
        self.prune_now_and_then()

    def prune_now_and_then(self) -> int:
        """Delete expired entries if this process has not done so within PRUNE_EVERY_S."""
        return self.store.prune(self._retention_days) if self.pruning.due() else 0

    def page(
        self,
        *,
        tenant_id: str,
        limit: int,
        offset: int,
        action: str | None = None,
        user_id: str | None = None,
    ) -> ListedPage[AuditRecord]:
        """One page of the tenant's entries, newest first, and how many match."""
        return self.store.list(tenant_id, limit, offset, action=action, user_id=user_id)
