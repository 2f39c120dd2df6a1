"""Webhooks of a tenant: admins register endpoints; document and collection events are queued
for them.

An event is queued once per subscribed webhook of the same tenant, as the exact JSON body that
will be signed and sent (Standard Webhooks shape: `{"type", "timestamp", "data"}`). The body
carries ids, the document's name, collection, status and error code, never its text. Sending
is app/services/blocks/webhook_delivery.py's, from the database, by whichever process runs jobs.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from app.domain import ListedPage
from app.errors import InvalidInput, NotFound, or_not_found
from app.services.audit import Actor
from app.services.blocks.webhook_delivery import new_secret
from app.services.blocks.webhook_urls import UrlRules, check_url
from app.services.collection_access import AccessResolver, reads_everything_ever
from app.storage.collections import AccessStore
from app.storage.users import UserStore
from app.storage.webhooks import (
    DeliveryRecord,
    NewDelivery,
    WebhookChange,
    WebhookRecord,
    WebhookStore,
)

log = logging.getLogger(__name__)

EventType = Literal[
    "document.indexed",
    "document.failed",
    "document.deleted",
    "collection.created",
    "collection.changed",
    "collection.deleted",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
MAX_WEBHOOKS_PER_TENANT = 20


@dataclass(frozen=True)
class WebhookDeps:
    """What managing webhooks needs, built by the container."""

    store: WebhookStore
    rules: UrlRules


def _events(events: list[str]) -> list[str]:
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown or not events:
        raise InvalidInput(f"events must be some of {', '.join(EVENT_TYPES)}; got {unknown or []}")
    return sorted(set(events))


def create_webhook(
    deps: WebhookDeps, *, actor: Actor, url: str, events: list[str], description: str | None
) -> WebhookRecord:
    """Register an endpoint of the actor's tenant (its URL checked now); the record holds the
    secret, which the caller shows this once."""
    check_url(url, deps.rules)
    chosen = _events(events)
    tenant = actor.tenant_id
    if len(deps.store.of_tenant(tenant)) >= MAX_WEBHOOKS_PER_TENANT:
        raise InvalidInput(f"a tenant has at most {MAX_WEBHOOKS_PER_TENANT} webhooks")
    webhook_id = "wh_" + secrets.token_hex(12)
    audit = actor.entry("webhook.created", target_id=webhook_id, url=url, events=chosen)
    return deps.store.create(
        tenant, webhook_id, url, chosen, description, new_secret(), actor.user_id, audit
    )


def list_webhooks(deps: WebhookDeps, *, tenant_id: str) -> list[WebhookRecord]:
    """The tenant's webhooks."""
    return deps.store.of_tenant(tenant_id)


def get_webhook(deps: WebhookDeps, *, tenant_id: str, webhook_id: str) -> WebhookRecord:
    """The tenant's webhook; NotFound whether missing or another tenant's."""
    return or_not_found(deps.store.get(tenant_id, webhook_id), "webhook not found")


def update_webhook(
    deps: WebhookDeps, *, actor: Actor, webhook_id: str, change: WebhookChange
) -> WebhookRecord:
    """Change a webhook (a new URL is checked like a new webhook's); NotFound when missing."""
    if change.url is not None:
        check_url(change.url, deps.rules)
    if change.events is not None:
        change = replace(change, events=_events(change.events))
    audit = actor.entry(
        "webhook.changed",
        target_id=webhook_id,
        url=change.url,
        events=change.events,
        enabled=change.enabled,
    )
    changed = deps.store.update(actor.tenant_id, webhook_id, change, audit)
    return or_not_found(changed, "webhook not found")


def delete_webhook(deps: WebhookDeps, *, actor: Actor, webhook_id: str) -> None:
    """Remove a webhook and its delivery log; NotFound when missing."""
    audit = actor.entry("webhook.deleted", target_id=webhook_id)
    if not deps.store.delete(actor.tenant_id, webhook_id, audit):
        raise NotFound("webhook not found")


def list_deliveries(
    deps: WebhookDeps, *, tenant_id: str, webhook_id: str, limit: int, offset: int
) -> ListedPage[DeliveryRecord]:
    """One page of a webhook's delivery log, newest first; NotFound when missing."""
    get_webhook(deps, tenant_id=tenant_id, webhook_id=webhook_id)
    return deps.store.deliveries(tenant_id, webhook_id, limit, offset)


def event_body(event_type: str, data: dict[str, Any], at: datetime | None = None) -> str:
    """The JSON body of an event (Standard Webhooks shape)."""
    moment = (at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    return json.dumps({"type": event_type, "timestamp": moment, "data": data}, sort_keys=True)


class DocumentEvents:
    """Queues document events for the tenant's webhooks; never fails the change it reports."""

    def __init__(
        self,
        store: WebhookStore,
        wake: Callable[[], None] | None = None,
        collections: AccessStore | None = None,
    ) -> None:
        self._store = store
        self._wake = wake
        self._collections = collections

    def _collection(
        self, tenant_id: str, document_id: str, collection_id: str | None
    ) -> dict[str, str] | None:
        """The document's collection as an event names it: `{"id", "name"}`."""
        if self._collections is None:
            return None
        found_id = collection_id or self._collections.collection_of(tenant_id, document_id)
        if found_id is None:
            return None
        found = self._collections.find_collection(tenant_id, found_id)
        return {"id": found_id, "name": found.name if found is not None else found_id}

    def _publish(
        self, tenant_id: str, event_type: EventType, data_of: Callable[[], dict[str, Any] | None]
    ) -> None:
        """Queue one delivery per subscribed webhook of the tenant (none: nothing written), with
        the event's data built only when a webhook listens (None: the data could not be built,
        and was logged)."""
        try:
            hooks = self._store.subscribed(tenant_id, event_type)
            if not hooks:
                return
            data = data_of()
            if data is None:
                return
            body = event_body(event_type, data)
            self._store.add_deliveries(
                tenant_id,
                [
                    NewDelivery("msg_" + secrets.token_hex(16), hook.webhook_id, event_type, body)
                    for hook in hooks
                ],
            )
        except Exception:
            log.exception("could not queue a webhook event", extra={"event": event_type})
            return
        if self._wake is not None:
            self._wake()

    def document(
        self,
        *,
        tenant_id: str,
        event_type: EventType,
        document_id: str,
        source: str,
        status: str,
        job_id: str | None = None,
        error_code: str | None = None,
        collection_id: str | None = None,
    ) -> None:
        """Queue a document event: its ids, name, collection (`{"id", "name"}`; looked up when
        not given, and only when a webhook listens), status and error code."""

        def data() -> dict[str, Any] | None:
            try:
                collection = self._collection(tenant_id, document_id, collection_id)
            except Exception:
                log.exception("could not read a document's collection for a webhook event")
                return None
            return {
                "document_id": document_id,
                "source": source,
                "collection": collection,
                "status": status,
                "job_id": job_id,
                "error_code": error_code,
            }

        self._publish(tenant_id, event_type, data)

    def collection(
        self,
        *,
        tenant_id: str,
        event_type: EventType,
        collection_id: str,
        name: str,
        **fields: Any,
    ) -> None:
        """Queue a collection event: its id and name (`{"id", "name"}`, as document events name
        it) and the given fields (what changed, how many documents went with it)."""
        data = {"collection": {"id": collection_id, "name": name}, **fields}
        self._publish(tenant_id, event_type, lambda: data)


def event_collection(body: str) -> str | None:
    """The id of the collection a queued event is about (None: it names none)."""
    try:
        found = json.loads(body).get("data", {}).get("collection")
    except (ValueError, AttributeError):
        return None
    return found.get("id") if isinstance(found, dict) else None


class CreatorReads:
    """Whether a webhook's creator reads, now, the collection an event is about: an admin
    reads every one, deleted ones too; anyone else only those that still exist and they read;
    a creator gone, disabled or of another tenant reads none."""

    def __init__(self, users: UserStore, access: AccessResolver) -> None:
        self._users = users
        self._access = access

    def __call__(self, webhook: WebhookRecord, delivery: DeliveryRecord) -> bool:
        user = self._users.get(webhook.created_by) if webhook.created_by else None
        if user is None or user.disabled or user.tenant_id != webhook.tenant_id:
            return False
        access = self._access.resolve(tenant_id=user.tenant_id, user_id=user.id, role=user.role)
        if reads_everything_ever(user.role, access):
            return True
        collection_id = event_collection(delivery.body)
        return collection_id is not None and access.permission(collection_id) is not None
