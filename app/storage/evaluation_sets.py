"""A tenant's evaluation sets: its own questions with the documents and pages that answer them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select

from app.domain import ListedPage
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import listed_page, record_of
from app.storage.tables import EvaluationSetRow


@dataclass(frozen=True)
class EvaluationSet:
    """A named list of items: {question, expected: [{document_id, source, page}], answerable}."""

    set_id: str
    tenant_id: str
    name: str
    item_count: int
    created_at: datetime
    created_by: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)


class EvaluationSetStore(DatabaseStore):
    """Creates, lists, reads and deletes a tenant's sets."""

    def create(
        self, tenant_id: str, name: str, items: list[dict[str, Any]], created_by: str | None
    ) -> EvaluationSet:
        """Store a new set; its record."""
        row = EvaluationSetRow(
            set_id=secrets.token_hex(16),
            tenant_id=tenant_id,
            name=name,
            items=json.dumps(items, ensure_ascii=False),
            item_count=len(items),
            created_by=created_by,
            created_at=utc_now(),
        )
        with self._db.session() as session:
            session.add(row)
        return record_of(EvaluationSet, row, items=items)

    def get(self, tenant_id: str, set_id: str) -> EvaluationSet | None:
        """The tenant's set with its items, or None."""
        query = select(EvaluationSetRow).where(
            EvaluationSetRow.tenant_id == tenant_id, EvaluationSetRow.set_id == set_id
        )
        with self._db.session() as session:
            row = session.scalars(query).first()
            return None if row is None else _with_items(row)

    def page(
        self,
        tenant_id: str,
        limit: int,
        offset: int = 0,
        visible: Callable[[EvaluationSet], bool] | None = None,
    ) -> ListedPage[EvaluationSet]:
        """The tenant's sets (only those `visible` keeps, judged with their items), without
        their items, newest first, and how many in all."""
        where = [EvaluationSetRow.tenant_id == tenant_id]
        query = select(EvaluationSetRow).order_by(EvaluationSetRow.created_at.desc())
        with self._db.session() as session:
            if visible is not None:  # judged per set: paged after
                rows = session.scalars(query.where(*where))
                kept = [_listed(row) for row in rows if visible(_with_items(row))]
                return ListedPage(kept[offset : offset + limit], len(kept))
            return listed_page(session, query, where, EvaluationSetRow, limit, offset, _listed)

    def delete(self, tenant_id: str, set_id: str) -> bool:
        """Delete the tenant's set; whether it existed."""
        with self._db.session() as session:
            statement = delete(EvaluationSetRow).where(
                EvaluationSetRow.tenant_id == tenant_id, EvaluationSetRow.set_id == set_id
            )
            return bool(affected_rows(session, statement))


def _with_items(row: EvaluationSetRow) -> EvaluationSet:
    """The set with its items."""
    return record_of(EvaluationSet, row, items=json.loads(row.items))


def _listed(row: EvaluationSetRow) -> EvaluationSet:
    """The set as listings show it: without its items."""
    return record_of(EvaluationSet, row, items=[])
