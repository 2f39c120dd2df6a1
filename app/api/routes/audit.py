"""The tenant's audit log (admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.access import Authorized
from app.api.admin_schemas import AuditEntryOut
from app.api.deps import Audit, PageOffset, PageSize
from app.api.errors import error_responses
from app.api.records import Page
from app.services.audit import AuditAction

router = APIRouter(tags=["users"], responses=error_responses(403, 422))


@router.get("/audit", response_model=Page[AuditEntryOut])
def audit_log(
    caller: Authorized,
    audit: Audit,
    size: PageSize,
    offset: PageOffset = 0,
    action: AuditAction | None = None,
    user_id: Annotated[str | None, Query(max_length=40, description="who acted")] = None,
) -> Page[AuditEntryOut]:
    """Who did what in your tenant, newest first: logins (with client IP), logouts, keys,
    users, uploads, deletions and quota refusals. Never a secret or a question's text."""
    found = audit.page(
        tenant_id=caller.tenant_id, limit=size, offset=offset, action=action, user_id=user_id
    )
    return Page[AuditEntryOut].of(found.records, found.total)
