"""The audit log: who did what in a tenant, written in the transaction of the change it records.

Entries hold ids, roles, file names and client IPs: never a password, a key, a token or a
question's text (the callers build entries from those fields only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.domain import ListedPage
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import columns_of, listed_page, record_of
from app.storage.tables import AuditRow, table_of

# A login attempt for a name nobody has belongs to no tenant: no tenant's admin sees it.
NO_TENANT = ""


@dataclass(frozen=True)
class AuditEntry:
    """One thing that happened (not yet written)."""

    tenant_id: str
    action: str
    user_id: str | None = None
    target_id: str | None = None
    client_ip: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditRecord:
    """A written entry, as GET /audit shows it."""

    id: int
    tenant_id: str
    at: datetime
    action: str
    user_id: str | None
    target_id: str | None
    client_ip: str | None
    detail: dict[str, Any]


# Built once: an entry is one INSERT with its values as parameters (no unit-of-work flush, and no
# statement built anew for each upload).
_INSERT_ENTRY = insert(table_of(AuditRow))


def write_entry(session: Session, entry: AuditEntry) -> None:
    """Add the entry in `session`'s transaction (committed, or rolled back, with the change)."""
    detail = json.dumps(entry.detail, sort_keys=True)
    session.execute(_INSERT_ENTRY, columns_of(entry, at=utc_now(), detail=detail))


def _record(row: AuditRow) -> AuditRecord:
    return record_of(AuditRecord, row, detail=json.loads(row.detail or "{}"))


class AuditStore(DatabaseStore):
    """Writes entries that record no other change, reads a tenant's, drops old ones."""

    def add(self, entry: AuditEntry) -> None:
        """Write one entry on its own (a login, a refusal: nothing else changes)."""
        with self._db.session() as session:
            write_entry(session, entry)

    def list(
        self,
        tenant_id: str,
        limit: int,
        offset: int = 0,
        action: str | None = None,
        user_id: str | None = None,
    ) -> ListedPage[AuditRecord]:
        """One page of the tenant's entries, newest first, and how many match in all."""
        where = [AuditRow.tenant_id == tenant_id]
        if action is not None:
            where.append(AuditRow.action == action)
        if user_id is not None:
            where.append(AuditRow.user_id == user_id)
        query = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.id.desc())
        with self._db.session() as session:
            return listed_page(session, query, where, AuditRow, limit, offset, _record)

    def prune(self, retention_days: int, now: datetime | None = None) -> int:
        """Delete entries older than the retention; how many went."""
        cutoff = (now or utc_now()) - timedelta(days=retention_days)
        with self._db.session() as session:
            return affected_rows(session, delete(AuditRow).where(AuditRow.at < cutoff))
