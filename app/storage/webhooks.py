"""Webhooks and their deliveries in the service database.

Every webhook method takes the tenant; another tenant's webhook behaves like a missing one. A
delivery is claimed by moving its `next_attempt_at` forward (a lease) only if nobody moved it
first, so two processes never send the same attempt at once; a process that dies while sending
leaves it to be claimed again once the lease runs out (at least once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Row

from app.domain import ListedPage
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import listed_page, record_of
from app.storage.tables import WebhookDeliveryRow, WebhookRow, table_of


@dataclass(frozen=True)
class WebhookRecord:
    """A registered endpoint (detached from any session)."""

    webhook_id: str
    tenant_id: str
    url: str
    events: tuple[str, ...]
    description: str | None
    secret: str
    created_by: str | None
    enabled: bool
    consecutive_failures: int
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WebhookChange:
    """What to change on a webhook; None leaves a field as it is."""

    url: str | None = None
    events: list[str] | None = None
    description: str | None = None
    enabled: bool | None = None  # true again clears the failure count


@dataclass(frozen=True)
class DeliveryRecord:
    """One event for one webhook and how its delivery went so far."""

    delivery_id: str
    webhook_id: str
    tenant_id: str
    event_type: str
    body: str
    status: str  # pending, delivered, failed
    attempts: int
    next_attempt_at: datetime
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime


_ENABLED_OF_TENANT = select(*table_of(WebhookRow).columns).where(
    WebhookRow.tenant_id == bindparam("tenant_id"), WebhookRow.enabled.is_(True)
)


def _webhook(row: WebhookRow | Row[Any]) -> WebhookRecord:
    return record_of(WebhookRecord, row, events=tuple(json.loads(row.events)))


def _delivery(row: WebhookDeliveryRow) -> DeliveryRecord:
    return record_of(DeliveryRecord, row)


@dataclass(frozen=True)
class NewDelivery:
    """An event to deliver to one webhook."""

    delivery_id: str
    webhook_id: str
    event_type: str
    body: str


class WebhookStore(DatabaseStore):
    """Tenant-scoped webhooks and their delivery log."""

    # --- webhooks ------------------------------------------------------------------------

    def create(
        self,
        tenant_id: str,
        webhook_id: str,
        url: str,
        events: list[str],
        description: str | None,
        secret: str,
        created_by: str | None,
        audit: AuditEntry | None = None,
    ) -> WebhookRecord:
        """Register a webhook (with its audit entry, in one transaction)."""
        now = utc_now()
        row = WebhookRow(
            webhook_id=webhook_id,
            tenant_id=tenant_id,
            url=url,
            events=json.dumps(events),
            description=description,
            secret=secret,
            created_by=created_by,
            enabled=True,
            consecutive_failures=0,
            disabled_reason=None,
            created_at=now,
            updated_at=now,
        )
        with self._db.session() as session:
            session.add(row)
            if audit is not None:
                write_entry(session, audit)
            session.flush()
            return _webhook(row)

    def get(self, tenant_id: str, webhook_id: str) -> WebhookRecord | None:
        """The tenant's webhook, or None when missing or another tenant's."""
        with self._db.session() as session:
            row = session.get(WebhookRow, webhook_id)
            return _webhook(row) if row is not None and row.tenant_id == tenant_id else None

    def of_tenant(self, tenant_id: str) -> list[WebhookRecord]:
        """The tenant's webhooks, oldest first."""
        query = (
            select(WebhookRow)
            .where(WebhookRow.tenant_id == tenant_id)
            .order_by(WebhookRow.created_at, WebhookRow.webhook_id)
        )
        with self._db.session() as session:
            return [_webhook(row) for row in session.scalars(query)]

    def update(
        self,
        tenant_id: str,
        webhook_id: str,
        change: WebhookChange,
        audit: AuditEntry | None = None,
    ) -> WebhookRecord | None:
        """Change the given fields (enabling again clears the failure count); None when the
        tenant has no such webhook."""
        values: dict[str, object] = {"updated_at": utc_now()}
        if change.url is not None:
            values["url"] = change.url
        if change.events is not None:
            values["events"] = json.dumps(change.events)
        if change.description is not None:
            values["description"] = change.description
        if change.enabled is not None:
            values["enabled"] = change.enabled
            if change.enabled:
                values.update(consecutive_failures=0, disabled_reason=None)
        with self._db.session() as session:
            matched = affected_rows(
                session,
                update(WebhookRow)
                .where(WebhookRow.tenant_id == tenant_id, WebhookRow.webhook_id == webhook_id)
                .values(**values),
            )
            if not matched:
                return None
            if audit is not None:
                write_entry(session, audit)
            row = session.get(WebhookRow, webhook_id, populate_existing=True)
            assert row is not None
            return _webhook(row)

    def delete(self, tenant_id: str, webhook_id: str, audit: AuditEntry | None = None) -> bool:
        """Remove the webhook and its delivery log; whether it existed."""
        with self._db.session() as session:
            statement = delete(WebhookRow).where(
                WebhookRow.tenant_id == tenant_id, WebhookRow.webhook_id == webhook_id
            )
            existed = bool(affected_rows(session, statement))
            if existed:
                session.execute(
                    delete(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id == webhook_id)
                )
                if audit is not None:
                    write_entry(session, audit)
            return existed

    def subscribed(self, tenant_id: str, event_type: str) -> list[WebhookRecord]:
        """The tenant's enabled webhooks that listen to `event_type`."""
        # Asked at every job's end: a plain connection and a statement built once.
        with self._db.engine.connect() as connection:
            rows = connection.execute(_ENABLED_OF_TENANT, {"tenant_id": tenant_id}).all()
        hooks = [_webhook(row) for row in rows]
        return [hook for hook in hooks if event_type in hook.events]

    # --- deliveries ----------------------------------------------------------------------

    def add_deliveries(self, tenant_id: str, deliveries: list[NewDelivery]) -> None:
        """Queue events for delivery now."""
        now = utc_now()
        with self._db.session() as session:
            for new in deliveries:
                session.add(
                    WebhookDeliveryRow(
                        delivery_id=new.delivery_id,
                        webhook_id=new.webhook_id,
                        tenant_id=tenant_id,
                        event_type=new.event_type,
                        body=new.body,
                        status="pending",
                        attempts=0,
                        next_attempt_at=now,
                        created_at=now,
                        updated_at=now,
                    )
                )

    def deliveries(
        self, tenant_id: str, webhook_id: str, limit: int, offset: int
    ) -> ListedPage[DeliveryRecord]:
        """One page of a webhook's deliveries, newest first, and how many it has."""
        where = (
            WebhookDeliveryRow.tenant_id == tenant_id,
            WebhookDeliveryRow.webhook_id == webhook_id,
        )
        query = select(WebhookDeliveryRow).order_by(
            WebhookDeliveryRow.created_at.desc(), WebhookDeliveryRow.delivery_id
        )
        with self._db.session() as session:
            return listed_page(session, query, where, WebhookDeliveryRow, limit, offset, _delivery)

    def claim_due(self, limit: int, lease: timedelta) -> list[DeliveryRecord]:
        """Pending deliveries whose time has come, each claimed for `lease` (its next attempt
        moved past the lease, so no other process takes it meanwhile)."""
        now = utc_now()
        query = (
            select(WebhookDeliveryRow.delivery_id, WebhookDeliveryRow.next_attempt_at)
            .where(
                WebhookDeliveryRow.status == "pending",
                WebhookDeliveryRow.next_attempt_at <= now,
            )
            .order_by(WebhookDeliveryRow.next_attempt_at)
            .limit(limit)
        )
        claimed: list[DeliveryRecord] = []
        with self._db.session() as session:
            due = session.execute(query).all()
        for delivery_id, seen_at in due:
            with self._db.session() as session:
                matched = affected_rows(
                    session,
                    update(WebhookDeliveryRow)
                    .where(
                        WebhookDeliveryRow.delivery_id == delivery_id,
                        WebhookDeliveryRow.status == "pending",
                        WebhookDeliveryRow.next_attempt_at == seen_at,
                    )
                    .values(next_attempt_at=now + lease),
                )
                if not matched:
                    continue  # another process claimed it first
                row = session.get(WebhookDeliveryRow, delivery_id, populate_existing=True)
                if row is not None:
                    claimed.append(_delivery(row))
        return claimed

    def webhook_of(self, delivery: DeliveryRecord) -> WebhookRecord | None:
        """The webhook a delivery is for (None once deleted)."""
        return self.get(delivery.tenant_id, delivery.webhook_id)

    def delivered(self, delivery: DeliveryRecord, status_code: int) -> None:
        """Record a successful attempt; the webhook's failure count starts again."""
        now = utc_now()
        with self._db.session() as session:
            session.execute(
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.delivery_id == delivery.delivery_id)
                .values(
                    status="delivered",
                    attempts=WebhookDeliveryRow.attempts + 1,
                    last_status_code=status_code,
                    last_error=None,
                    updated_at=now,
                )
            )
            session.execute(
                update(WebhookRow)
                .where(WebhookRow.webhook_id == delivery.webhook_id)
                .values(consecutive_failures=0)
            )

    def attempt_failed(
        self,
        delivery: DeliveryRecord,
        status_code: int | None,
        error: str,
        retry_at: datetime | None,
        disable_after: int,
        disabled_audit: AuditEntry,
    ) -> bool:
        """Record a failed attempt: retried at `retry_at`, or failed for good (None). The
        webhook is disabled (with `disabled_audit`) at `disable_after` failures in a row;
        returns whether this attempt disabled it."""
        now = utc_now()
        values: dict[str, object] = {
            "attempts": WebhookDeliveryRow.attempts + 1,
            "last_status_code": status_code,
            "last_error": error[:500],
            "updated_at": now,
        }
        if retry_at is None:
            values["status"] = "failed"
        else:
            values["next_attempt_at"] = retry_at
        with self._db.session() as session:
            session.execute(
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.delivery_id == delivery.delivery_id)
                .values(**values)
            )
            session.execute(
                update(WebhookRow)
                .where(WebhookRow.webhook_id == delivery.webhook_id)
                .values(consecutive_failures=WebhookRow.consecutive_failures + 1)
            )
            disabled = affected_rows(
                session,
                update(WebhookRow)
                .where(
                    WebhookRow.webhook_id == delivery.webhook_id,
                    WebhookRow.enabled.is_(True),
                    WebhookRow.consecutive_failures >= disable_after,
                )
                .values(
                    enabled=False,
                    disabled_reason=f"{disable_after} deliveries in a row failed",
                    updated_at=now,
                ),
            )
            if disabled:
                write_entry(session, disabled_audit)
                return True
            return False

    def abandon(self, delivery: DeliveryRecord, error: str) -> None:
        """Fail a delivery for good without an attempt (its webhook is gone or disabled)."""
        with self._db.session() as session:
            session.execute(
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.delivery_id == delivery.delivery_id)
                .values(status="failed", last_error=error[:500], updated_at=utc_now())
            )
