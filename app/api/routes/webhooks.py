"""Webhooks of the caller's tenant (admins): register, list, change, delete, delivery log."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.access import Authorized
from app.api.deps import ClientIp, PageOffset, PageSize, Webhooks
from app.api.errors import error_responses
from app.api.records import Page
from app.api.webhook_schemas import (
    DeliveryOut,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookUpdate,
)
from app.services import webhooks as service
from app.storage.webhooks import WebhookChange

router = APIRouter(tags=["webhooks"], responses=error_responses(403, 422))


@router.post("/webhooks", status_code=201, response_model=WebhookCreated)
def create_webhook(
    body: WebhookCreate, deps: Webhooks, caller: Authorized, ip: ClientIp
) -> WebhookCreated:
    """Register an endpoint for the tenant's document events. The answer holds the signing
    `secret`, shown this once. A URL that resolves to a private or loopback address is 422."""
    hook = service.create_webhook(
        deps,
        actor=caller.actor(ip),
        url=body.url,
        events=list(body.events),
        description=body.description,
    )
    return WebhookCreated.model_validate(hook)


@router.get("/webhooks", response_model=Page[WebhookOut])
def list_webhooks(deps: Webhooks, caller: Authorized) -> Page[WebhookOut]:
    """The tenant's webhooks (without their secrets)."""
    found = service.list_webhooks(deps, tenant_id=caller.tenant_id)
    return Page[WebhookOut].of(found, len(found))


@router.get("/webhooks/{webhook_id}", response_model=WebhookOut, responses=error_responses(404))
def get_webhook(webhook_id: str, deps: Webhooks, caller: Authorized) -> WebhookOut:
    """One webhook of the tenant (without its secret)."""
    return WebhookOut.model_validate(
        service.get_webhook(deps, tenant_id=caller.tenant_id, webhook_id=webhook_id)
    )


@router.patch("/webhooks/{webhook_id}", response_model=WebhookOut, responses=error_responses(404))
def update_webhook(
    webhook_id: str,
    body: WebhookUpdate,
    deps: Webhooks,
    caller: Authorized,
    ip: ClientIp,
) -> WebhookOut:
    """Change a webhook's URL, events, description, or enable it again (`"enabled": true`
    clears its failure count)."""
    change = WebhookChange(
        url=body.url,
        events=None if body.events is None else list(body.events),
        description=body.description,
        enabled=body.enabled,
    )
    changed = service.update_webhook(
        deps, actor=caller.actor(ip), webhook_id=webhook_id, change=change
    )
    return WebhookOut.model_validate(changed)


@router.delete("/webhooks/{webhook_id}", status_code=204, responses=error_responses(404))
def delete_webhook(webhook_id: str, deps: Webhooks, caller: Authorized, ip: ClientIp) -> Response:
    """Delete a webhook and its delivery log; nothing more is sent to it."""
    service.delete_webhook(deps, actor=caller.actor(ip), webhook_id=webhook_id)
    return Response(status_code=204)


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    response_model=Page[DeliveryOut],
    responses=error_responses(404),
)
def list_deliveries(
    webhook_id: str,
    deps: Webhooks,
    caller: Authorized,
    size: PageSize,
    offset: PageOffset = 0,
) -> Page[DeliveryOut]:
    """The webhook's delivery log, newest first: each event, its attempts and last outcome."""
    found = service.list_deliveries(
        deps, tenant_id=caller.tenant_id, webhook_id=webhook_id, limit=size, offset=offset
    )
    return Page[DeliveryOut].of(found.records, found.total)
