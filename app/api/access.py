"""Who may call which route: the one table of the minimum role per (method, path template).

`admin` manages the tenant's users and keys, deletes any document and reads the audit log;
`member` also uploads and deletes their own uploads; `reader` searches, asks, chats and manages
their own keys. PUBLIC routes need no credential. The app refuses to start with a route in
neither table (`check_route_table`), and tests/api/test_api_roles.py calls every route with
every role and expects what this table says.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.routing import iter_route_contexts
from starlette.routing import Route

from app.api.deps import Principal
from app.api.errors import ApiError
from app.domain import Role, role_at_least
from app.services.auth import Identity

ROUTE_ROLES: dict[tuple[str, str], Role] = {
    # documents and ingestion
    ("POST", "/documents"): "member",
    ("GET", "/jobs"): "member",
    ("GET", "/jobs/{job_id}"): "member",
    ("GET", "/documents"): "reader",
    ("GET", "/documents/{document_id}"): "reader",
    ("DELETE", "/documents/{document_id}"): "member",  # members: only their own uploads
    ("GET", "/documents/{document_id}/pages/{page}.png"): "reader",
    ("GET", "/documents/{document_id}/pages/{page}/text"): "reader",
    # retrieval, answers, conversations, the OpenAI-compatible API
    ("POST", "/search"): "reader",
    ("POST", "/query"): "reader",
    ("POST", "/query/stream"): "reader",
    ("POST", "/conversations"): "reader",
    ("GET", "/conversations"): "reader",
    ("GET", "/conversations/{conversation_id}"): "reader",
    ("DELETE", "/conversations/{conversation_id}"): "reader",
    ("POST", "/conversations/{conversation_id}/messages"): "reader",
    ("GET", "/v1/models"): "reader",
    ("GET", "/v1/models/{model_id}"): "reader",
    ("POST", "/v1/chat/completions"): "reader",
    ("GET", "/stats"): "reader",
    # the caller's own account and keys (GET /auth/keys?all=true: admin, checked by the service)
    ("GET", "/auth/me"): "reader",
    ("POST", "/auth/logout"): "reader",
    ("POST", "/auth/password"): "reader",
    ("POST", "/auth/keys"): "reader",
    ("GET", "/auth/keys"): "reader",
    ("DELETE", "/auth/keys/{key_id}"): "reader",  # others' keys: admin, checked by the service
    # tenant administration
    ("POST", "/users"): "admin",
    ("GET", "/users"): "admin",
    ("PATCH", "/users/{user_id}"): "admin",
    ("DELETE", "/users/{user_id}"): "admin",
    ("GET", "/audit"): "admin",
    # answer quality: the answer record, feedback (a person's own answers), evaluation
    ("GET", "/answers"): "reader",  # an admin's all=true: checked by the service
    ("GET", "/answers/{answer_id}"): "reader",
    ("POST", "/answers/{answer_id}/feedback"): "reader",
    ("GET", "/answers/{answer_id}/feedback"): "reader",
    ("GET", "/answers/export"): "admin",
    ("DELETE", "/answers"): "admin",
    ("GET", "/feedback"): "admin",
    ("POST", "/evaluations/sets"): "member",
    ("POST", "/evaluations/sets/upload"): "member",
    ("POST", "/evaluations/sets/from-feedback"): "admin",  # feedback is the admins' to read
    ("GET", "/evaluations/sets"): "member",
    ("GET", "/evaluations/sets/{set_id}"): "member",
    ("DELETE", "/evaluations/sets/{set_id}"): "member",
    ("POST", "/evaluations/runs"): "member",
    ("GET", "/evaluations/runs"): "member",
    ("GET", "/evaluations/runs/{run_id}"): "member",
    ("GET", "/evaluations/runs/{run_id}/compare"): "member",
    ("PUT", "/sso"): "admin",
    ("GET", "/sso"): "admin",
    ("DELETE", "/sso"): "admin",
    ("POST", "/webhooks"): "admin",
    ("GET", "/webhooks"): "admin",
    ("GET", "/webhooks/{webhook_id}"): "admin",
    ("PATCH", "/webhooks/{webhook_id}"): "admin",
    ("DELETE", "/webhooks/{webhook_id}"): "admin",
    ("GET", "/webhooks/{webhook_id}/deliveries"): "admin",
    # collections (reading one: its readers; changing one and its grants: who manages it, which
    # the service checks), groups (admins), a document's collection and metadata (its writers)
    ("POST", "/collections"): "admin",
    ("GET", "/collections"): "reader",
    ("GET", "/collections/{collection_id}"): "reader",
    ("PATCH", "/collections/{collection_id}"): "member",
    ("DELETE", "/collections/{collection_id}"): "member",
    ("GET", "/collections/{collection_id}/access"): "member",
    ("PUT", "/collections/{collection_id}/access"): "member",
    ("POST", "/groups"): "admin",
    ("GET", "/groups"): "admin",
    ("GET", "/groups/{group_id}"): "admin",
    ("PATCH", "/groups/{group_id}"): "admin",
    ("DELETE", "/groups/{group_id}"): "admin",
    ("PUT", "/groups/{group_id}/members/{user_id}"): "admin",
    ("DELETE", "/groups/{group_id}/members/{user_id}"): "admin",
    ("PATCH", "/documents/{document_id}"): "member",
}

# Routes an API key limited to some collections may not call, whatever its role: the audit log
# names documents and collections of the whole tenant, and a webhook reports on every collection
# its creator (a user, not a key) reads, so registering one, or pointing another at a new URL,
# would carry the names of documents the key cannot read to wherever it chose.
WHOLE_TENANT: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/audit"),
        ("POST", "/webhooks"),
        ("PATCH", "/webhooks/{webhook_id}"),
    }
)

PUBLIC: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/health"),
        ("GET", "/ready"),
        ("GET", "/metrics"),  # its own bearer token, RAG_METRICS_TOKEN (or 404)
        ("POST", "/auth/token"),
        # single sign-on: the sign-in page's offer, the Authorization Code flow, the exchange
        ("GET", "/auth/sso/options"),
        ("GET", "/auth/sso/{tenant}/start"),
        ("GET", "/auth/sso/callback"),
        ("POST", "/auth/sso/exchange"),
        # the web app and the API documentation (the pages hold no tenant data)
        ("GET", "/"),
        ("GET", "/docs"),
        ("GET", "/redoc"),
        ("GET", "/openapi.json"),
        ("GET", "/docs-offline/redoc.standalone.js"),
    }
)


def route_keys(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path template) of every route of the app, included routers' too (HEAD is
    GET's shadow; mounts such as /static serve files, not routes)."""
    return {
        (method, context.path)
        for context in iter_route_contexts(app.routes)
        if context.path is not None
        for method in context.methods or ()
        if method != "HEAD"
    }


def check_route_table(app: FastAPI) -> None:
    """RuntimeError at start-up for a route in neither ROUTE_ROLES nor PUBLIC (fail closed)."""
    missing = sorted(route_keys(app) - set(ROUTE_ROLES) - PUBLIC)
    if missing:
        raise RuntimeError(f"routes without a minimum role in app/api/access.py: {missing}")


async def authorize(request: Request, caller: Principal) -> Identity:
    """The caller, when its role may call this route, and its API key is not limited to some
    collections on a WHOLE_TENANT route; 403 otherwise (on the event loop: it reads only the
    route tables)."""
    route = request.scope.get("route")
    path = route.path if isinstance(route, Route) else request.url.path
    minimum = ROUTE_ROLES.get((request.method, path))
    if minimum is None:  # a protected route missing from the table: refuse, never allow
        raise ApiError(403, "forbidden", "this route is not open to any role")
    if not role_at_least(caller.role, minimum):
        raise ApiError(
            403, "forbidden", f"this needs the {minimum} role or higher; you are {caller.role}"
        )
    if caller.collections is not None and (request.method, path) in WHOLE_TENANT:
        raise ApiError(
            403,
            "api_key_not_allowed",
            "an API key limited to some collections cannot read the audit log or register or "
            "change webhooks (they name documents of every collection); use an unlimited key or "
            "sign in",
        )
    return caller


Authorized = Annotated[Identity, Depends(authorize)]
