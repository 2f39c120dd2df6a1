"""Every route x every kind of caller gives the status the role table (app/api/access.py) says.

Callers: an admin, a member and a reader of tenant A (access tokens), an admin's key limited to
reader (refused what only a signed-in person may do: SIGNED_IN_ONLY), nobody, a signed-out
token, a revoked key, an expired key, a disabled user's key, and tenant B's admin (whose view of
A's ids is the 404 of a missing one). Each allowed call gets its own fresh object (document,
user, key, token), so a DELETE or a sign-out cannot spoil the next.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from glewlwyd import Glewlwyd, running_glewlwyd
from sqlalchemy import update

from app.api.access import PUBLIC, ROUTE_ROLES, authorize, check_route_table, route_keys
from app.domain import role_at_least
from app.errors import NotFound
from app.services.audit import Actor
from app.services.sso.config import SsoSettingsIn
from app.storage.audit import AuditEntry
from app.storage.collections import Grant
from app.storage.db import utc_now
from app.storage.documents import insert_missing_document
from app.storage.tables import ApiKeyRow
from testkit.builders import pdf_document
from tests.api.harness import DEFAULT_PASSWORD, ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

A, B = "roles-a", "roles-b"
CHAT = {"model": "rag", "messages": [{"role": "user", "content": "tide tables"}]}
_fresh = itertools.count(1)

# The status of each route's call when the caller may make it.
SUCCESS: dict[tuple[str, str], int] = {
    ("POST", "/documents"): 202,
    ("GET", "/jobs"): 200,
    ("GET", "/jobs/{job_id}"): 200,
    ("GET", "/documents"): 200,
    ("GET", "/documents/{document_id}"): 200,
    ("DELETE", "/documents/{document_id}"): 204,
    ("GET", "/documents/{document_id}/pages/{page}.png"): 200,
    ("GET", "/documents/{document_id}/pages/{page}/text"): 200,
    ("POST", "/search"): 200,
    ("POST", "/query"): 200,
    ("POST", "/query/stream"): 200,
    ("POST", "/conversations"): 201,
    ("GET", "/conversations"): 200,
    ("GET", "/conversations/{conversation_id}"): 200,
    ("DELETE", "/conversations/{conversation_id}"): 204,
    ("POST", "/conversations/{conversation_id}/messages"): 200,
    ("GET", "/v1/models"): 200,
    ("GET", "/v1/models/{model_id}"): 200,
    ("POST", "/v1/chat/completions"): 200,
    ("GET", "/stats"): 200,
    ("GET", "/auth/me"): 200,
    ("POST", "/auth/logout"): 204,
    ("POST", "/auth/password"): 204,
    ("POST", "/auth/keys"): 201,
    ("GET", "/auth/keys"): 200,
    ("DELETE", "/auth/keys/{key_id}"): 204,
    ("POST", "/users"): 201,
    ("GET", "/users"): 200,
    ("PATCH", "/users/{user_id}"): 200,
    ("DELETE", "/users/{user_id}"): 204,
    ("GET", "/audit"): 200,
    ("GET", "/answers"): 200,
    ("GET", "/answers/{answer_id}"): 200,
    ("POST", "/answers/{answer_id}/feedback"): 200,
    ("GET", "/answers/{answer_id}/feedback"): 200,
    ("GET", "/answers/export"): 200,
    ("DELETE", "/answers"): 200,
    ("GET", "/feedback"): 200,
    ("POST", "/evaluations/sets"): 201,
    ("POST", "/evaluations/sets/upload"): 201,
    ("POST", "/evaluations/sets/from-feedback"): 201,
    ("GET", "/evaluations/sets"): 200,
    ("GET", "/evaluations/sets/{set_id}"): 200,
    ("DELETE", "/evaluations/sets/{set_id}"): 204,
    ("POST", "/evaluations/runs"): 202,
    ("GET", "/evaluations/runs"): 200,
    ("GET", "/evaluations/runs/{run_id}"): 200,
    ("GET", "/evaluations/runs/{run_id}/compare"): 200,
    ("PUT", "/sso"): 200,
    ("GET", "/sso"): 200,
    ("DELETE", "/sso"): 204,
    ("POST", "/webhooks"): 201,
    ("GET", "/webhooks"): 200,
    ("GET", "/webhooks/{webhook_id}"): 200,
    ("PATCH", "/webhooks/{webhook_id}"): 200,
    ("DELETE", "/webhooks/{webhook_id}"): 204,
    ("GET", "/webhooks/{webhook_id}/deliveries"): 200,
    ("POST", "/collections"): 201,
    ("GET", "/collections"): 200,
    ("GET", "/collections/{collection_id}"): 200,
    ("PATCH", "/collections/{collection_id}"): 200,
    ("DELETE", "/collections/{collection_id}"): 204,
    ("GET", "/collections/{collection_id}/access"): 200,
    ("PUT", "/collections/{collection_id}/access"): 200,
    ("POST", "/groups"): 201,
    ("GET", "/groups"): 200,
    ("GET", "/groups/{group_id}"): 200,
    ("PATCH", "/groups/{group_id}"): 200,
    ("DELETE", "/groups/{group_id}"): 204,
    ("PUT", "/groups/{group_id}/members/{user_id}"): 204,
    ("DELETE", "/groups/{group_id}/members/{user_id}"): 204,
    ("PATCH", "/documents/{document_id}"): 200,
}
# Tenant B's admin naming tenant A's objects in a body (not a path): A's file is not B's
# document (422), A's set is not B's (404); B has no feedback to make a set from (422). The
# model `rag` in a path is every tenant's own (200).
OTHER_TENANT: dict[tuple[str, str], int] = {
    ("GET", "/v1/models/{model_id}"): 200,
    ("POST", "/evaluations/sets"): 422,
    ("POST", "/evaluations/sets/upload"): 422,
    ("POST", "/evaluations/sets/from-feedback"): 422,
    ("POST", "/evaluations/runs"): 404,
}
EVALUATION_ITEM = {"question": "tide tables", "expected": [{"source": "tides.pdf", "page": 1}]}
# A public address (no lookup); the webhooks listen to failures, which no call here makes.
WEBHOOK = {"url": "http://93.184.215.14/hook", "events": ["document.failed"]}
# What only a signed-in person may do: an API key (without the keys:manage scope, for the keys)
# gets 403 `api_key_not_allowed` even where its role would do.
SIGNED_IN_ONLY = {
    ("POST", "/auth/password"),
    ("POST", "/auth/keys"),
    ("DELETE", "/auth/keys/{key_id}"),
    ("POST", "/users"),
    ("PATCH", "/users/{user_id}"),
    ("DELETE", "/users/{user_id}"),
    ("PUT", "/sso"),
    ("DELETE", "/sso"),
}
ROLE_CALLERS = ("admin", "member", "reader", "reader-key")
UNAUTHENTICATED = ("nobody", "signed-out-token", "revoked-key", "expired-key", "disabled-key")
CALLERS = (*ROLE_CALLERS, *UNAUTHENTICATED, "other-tenant-admin")


@dataclass
class Setup:
    """Tenant A's people and shared objects, and credentials of every kind."""

    api: ApiHarness
    users: dict[str, ApiUser]  # admin, member, reader of A; admin of B
    job_id: str
    document_id: str  # an indexed PDF of A (pages can be shown)
    bearer: dict[str, str]  # caller -> a credential that no call can spoil
    issuer: str  # the OpenID provider's, for the single sign-on routes
    run_id: str = ""  # a finished evaluation run of A (read, never changed)

    def token(self, who: str) -> str:
        """A new token of one of the users (a sign-out or password change ends only it)."""
        record = self.api.container.users.get(self.users[who].user_id)
        assert record is not None
        codec = self.api.container.token_codec
        issued = codec.issue(record.id, record.tenant_id, session_version=record.session_version)
        return issued.access_token

    def headers(self, who: str) -> dict[str, str]:
        """Authorization with a new token of the user."""
        return {"Authorization": f"Bearer {self.token(who)}"}

    def new_key(self, who: str, role: str | None = None, **extra: Any) -> dict[str, Any]:
        """A new key of one of the users, through the API."""
        body = {"name": f"key {next(_fresh)}", **({"role": role} if role else {}), **extra}
        response = self.api.client.post("/auth/keys", json=body, headers=self.headers(who))
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Glewlwyd]:
    """A real OpenID provider, for the single sign-on routes."""
    with running_glewlwyd(tmp_path_factory.mktemp("glewlwyd-roles")) as glewlwyd:
        yield glewlwyd


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    """The module's app; it accepts the local provider's http:// issuer."""
    return api_factory(sso_allow_http=True)


@pytest.fixture(scope="module")
def setup(api: ApiHarness, provider: Glewlwyd) -> Setup:
    users = {
        "admin": api.add_user(A),  # a tenant's first user is its admin
        "member": api.add_user(A),
        "reader": api.add_user(A, role="reader"),
        "other-tenant-admin": api.add_user(B),
    }
    job = api.upload_and_wait(
        users["admin"], "tides.pdf", pdf_document("Tide tables for the harbour of Wick.")
    )
    assert job["status"] == "done", job
    setup = Setup(api, users, job["job_id"], job["document_id"], {}, provider.issuer)

    signed_out = setup.headers("member")
    assert api.client.post("/auth/logout", headers=signed_out).status_code == 204
    setup.bearer["signed-out-token"] = signed_out["Authorization"].removeprefix("Bearer ")

    revoked = setup.new_key("member")
    gone = api.client.delete(f"/auth/keys/{revoked['key_id']}", headers=setup.headers("member"))
    assert gone.status_code == 204
    setup.bearer["revoked-key"] = revoked["key"]

    expired = setup.new_key("member", expires_in_days=1)
    with api.container.database.session() as session:
        session.execute(
            update(ApiKeyRow)
            .where(ApiKeyRow.key_id == expired["key_id"])
            .values(expires_at=utc_now() - timedelta(seconds=1))
        )
    setup.bearer["expired-key"] = expired["key"]

    setup.users["leaver"] = leaver = api.add_user(A)
    leavers_key = setup.new_key("leaver")
    off = api.client.patch(
        f"/users/{leaver.user_id}", json={"disabled": True}, headers=setup.headers("admin")
    )
    assert off.status_code == 200 and off.json()["disabled"] is True
    setup.bearer["disabled-key"] = leavers_key["key"]
    set_id = _evaluation_set(setup)
    run = api.client.post(
        "/evaluations/runs", json={"set_id": set_id}, headers=setup.headers("admin")
    )
    assert run.status_code == 202, run.text
    setup.run_id = run.json()["run_id"]
    for _ in range(600):
        shown = api.client.get(f"/evaluations/runs/{setup.run_id}", headers=setup.headers("admin"))
        if shown.json()["status"] == "done":
            break
        time.sleep(0.1)
    assert shown.json()["status"] == "done", shown.text
    return setup


def _evaluation_set(setup: Setup) -> str:
    response = setup.api.client.post(
        "/evaluations/sets",
        json={"name": f"set {next(_fresh)}", "items": [EVALUATION_ITEM]},
        headers=setup.headers("admin"),
    )
    assert response.status_code == 201, response.text
    set_id: str = response.json()["set_id"]
    return set_id


def _answer(setup: Setup, who: str, rated: bool = False) -> str:
    """A fresh answer of `who` (rated down, naming tides.pdf page 1, when `rated`)."""
    response = setup.api.client.post(
        "/query", json={"question": "tide tables"}, headers=setup.headers(who)
    )
    assert response.status_code == 200, response.text
    answer_id: str = response.json()["answer_id"]
    if rated:
        body = {"rating": "down", "expected": [{"source": "tides.pdf", "page": 1}]}
        rating = setup.api.client.post(
            f"/answers/{answer_id}/feedback", json=body, headers=setup.headers(who)
        )
        assert rating.status_code == 200, rating.text
    return answer_id


def _credential(setup: Setup, caller: str) -> str | None:
    """A bearer credential of the caller, new for each call when a call could end it."""
    if caller in ("admin", "member", "reader", "other-tenant-admin"):
        return setup.token(caller)
    if caller == "reader-key":  # the admin's key, limited to reader
        return str(setup.new_key("admin", "reader")["key"])
    if caller == "nobody":
        return None
    return setup.bearer[caller]


def _own_document(setup: Setup, who: str) -> str:
    """A fresh document row of tenant A uploaded by `who` (so a member may delete it)."""
    document_id = f"doc_roles_{next(_fresh)}"
    with setup.api.container.database.session() as session:
        insert_missing_document(
            session, A, document_id, f"{document_id}.txt", 5, "0" * 64, setup.users[who].user_id
        )
    return document_id


def _webhook(setup: Setup) -> str:
    """A fresh webhook of tenant A, made by its admin."""
    made = setup.api.client.post("/webhooks", json=WEBHOOK, headers=setup.headers("admin"))
    assert made.status_code == 201, made.text
    webhook_id: str = made.json()["webhook_id"]
    return webhook_id


def _managed_collection(setup: Setup, who: str) -> str:
    """A fresh collection of tenant A that every user reads and `who` manages."""
    store = setup.api.container.access_store
    made = store.create_collection(
        A, f"roles {next(_fresh)}", "", "tenant", AuditEntry(A, "collection.created")
    )
    grant = Grant("user", setup.users[who].user_id, "manage")
    store.replace_grants(A, made.collection_id, [grant], AuditEntry(A, "collection.access"))
    return made.collection_id


def _group(setup: Setup) -> str:
    """A fresh group of tenant A."""
    store = setup.api.container.access_store
    return store.create_group(
        A, f"group {next(_fresh)}", "", AuditEntry(A, "group.created")
    ).group_id


def _conversation(setup: Setup, who: str) -> str:
    response = setup.api.client.post("/conversations", headers=setup.headers(who))
    assert response.status_code == 201, response.text
    conversation_id: str = response.json()["conversation_id"]
    return conversation_id


def _request(setup: Setup, method: str, path: str, who: str) -> tuple[str, dict[str, Any]]:
    """The URL and request arguments of a call that succeeds for a caller allowed to make it,
    acting on fresh objects of `who` (a user of tenant A)."""
    ids: dict[str, Any] = {"job_id": setup.job_id, "document_id": setup.document_id, "page": 1}
    kwargs: dict[str, Any] = {}
    if (method, path) in (
        ("DELETE", "/documents/{document_id}"),
        ("PATCH", "/documents/{document_id}"),
    ):
        ids["document_id"] = _own_document(setup, who)
    if "{collection_id}" in path:
        ids["collection_id"] = _managed_collection(setup, who)
    if "{group_id}" in path:
        ids["group_id"] = _group(setup)
    if "{model_id}" in path:
        ids["model_id"] = "rag"
    if "{conversation_id}" in path:
        ids["conversation_id"] = _conversation(setup, who)
    if "{key_id}" in path:
        ids["key_id"] = setup.new_key(who)["key_id"]
    if "{user_id}" in path:
        ids["user_id"] = setup.api.add_user(A, login=False).user_id
    if "{answer_id}" in path:
        ids["answer_id"] = _answer(setup, who, rated=method == "GET")
    if "{set_id}" in path:
        ids["set_id"] = _evaluation_set(setup)
    if "{run_id}" in path:
        ids["run_id"] = setup.run_id
    if "{webhook_id}" in path:  # a fresh one to delete, else the tenant's first (20 at most)
        listed = setup.api.client.get("/webhooks", headers=setup.headers("admin")).json()
        fresh = method == "DELETE" or not listed["data"]
        ids["webhook_id"] = _webhook(setup) if fresh else listed["data"][0]["webhook_id"]
    if (method, path) == ("POST", "/documents"):
        kwargs["files"] = {"file": (f"note{next(_fresh)}.txt", b"Low tide at Wick is at noon.")}
    elif path == "/search":
        kwargs["json"] = {"query": "tide tables"}
    elif path in ("/query", "/query/stream"):
        kwargs["json"] = {"question": "tide tables"}
    elif path.endswith("/messages"):
        kwargs["json"] = {"content": "tide tables"}
    elif path == "/v1/chat/completions":
        kwargs["json"] = CHAT
    elif path == "/auth/password":
        kwargs["json"] = {"current_password": DEFAULT_PASSWORD, "new_password": DEFAULT_PASSWORD}
    elif path == "/auth/keys" and method == "POST":
        kwargs["json"] = {"name": "from the role table test", "role": "reader"}
    elif path == "/users" and method == "POST":
        kwargs["json"] = {"username": f"fresh{next(_fresh)}", "password": DEFAULT_PASSWORD}
    elif path == "/webhooks" and method == "POST":
        kwargs["json"] = WEBHOOK
    elif path == "/webhooks/{webhook_id}" and method == "PATCH":
        kwargs["json"] = {"description": "tide alerts"}
    elif path in ("/collections", "/groups") and method == "POST":
        kwargs["json"] = {"name": f"fresh {next(_fresh)}"}
    elif path == "/collections/{collection_id}/access" and method == "PUT":
        kwargs["json"] = {"grants": []}
    elif path in ("/collections/{collection_id}", "/groups/{group_id}") and method == "PATCH":
        kwargs["json"] = {"description": "changed by the role table test"}
    elif path == "/documents/{document_id}" and method == "PATCH":
        kwargs["json"] = {"metadata": {"team": "roles"}}
    elif method == "PATCH":
        kwargs["json"] = {"role": "reader"}
    elif path.endswith("/feedback") and method == "POST":
        kwargs["json"] = {"rating": "up"}
    elif path == "/evaluations/sets":
        kwargs["json"] = {"name": "from the role table test", "items": [EVALUATION_ITEM]}
    elif path == "/evaluations/sets/upload":
        kwargs["params"] = {"name": "uploaded by the role table test"}
        kwargs["content"] = json.dumps(EVALUATION_ITEM).encode()
    elif path == "/evaluations/sets/from-feedback":
        _answer(setup, "admin", rated=True)  # the record may have been deleted meanwhile
        kwargs["json"] = {"name": "made from feedback"}
    elif path == "/evaluations/runs" and method == "POST":
        kwargs["json"] = {"set_id": _evaluation_set(setup)}
    elif path.endswith("/compare"):
        kwargs["params"] = {"before": setup.run_id}
    if path == "/auth/logout":  # without a provider: the plain 204 (an end-session URL is 200)
        for tenant in (A, B):
            if _has_sso(setup, tenant):
                setup.api.container.single_sign_on.remove(
                    tenant_id=tenant, actor=Actor(tenant, None, None)
                )
    if path == "/sso":
        sso = {"issuer": setup.issuer, "client_id": "rag-roles", "client_secret": "roles secret"}
        for tenant in (A, B):  # set for both: tenant B's admin acts on B's own
            setup.api.container.single_sign_on.configure(
                tenant_id=tenant,
                body=SsoSettingsIn.model_validate(sso),
                actor=Actor(tenant, None, None),
            )
        if method == "PUT":
            kwargs["json"] = sso
    return path.format(**ids), kwargs


def _has_sso(setup: Setup, tenant: str) -> bool:
    try:
        setup.api.container.single_sign_on.describe(tenant)
    except NotFound:
        return False
    return True


def _expected(caller: str, method: str, path: str) -> int:
    if caller in UNAUTHENTICATED:
        return 401
    if caller == "other-tenant-admin":
        # Tenant A's ids do not exist for tenant B; a route without one acts on B's own data.
        if (method, path) in OTHER_TENANT:
            return OTHER_TENANT[(method, path)]
        return 404 if "{" in path else SUCCESS[(method, path)]
    if (caller, method, path) == ("reader-key", "POST", "/auth/logout"):
        return 409  # a key is no session: it is revoked with DELETE /auth/keys/{key_id}
    role = "reader" if caller == "reader-key" else caller
    allowed = role_at_least(role, ROUTE_ROLES[(method, path)])
    if allowed and caller == "reader-key" and (method, path) in SIGNED_IN_ONLY:
        return 403
    return SUCCESS[(method, path)] if allowed else 403


def test_every_route_is_in_the_role_table_and_in_this_test(api: ApiHarness) -> None:
    routes = route_keys(api.app)
    protected = routes - PUBLIC
    assert protected == set(ROUTE_ROLES), "app/api/access.py misses or keeps a stale route"
    assert set(SUCCESS) == set(ROUTE_ROLES), "add the new route's call to SUCCESS and _request"


def test_an_app_with_a_route_missing_from_the_table_refuses_to_start() -> None:
    app = FastAPI()

    @app.get("/backdoor")
    def backdoor() -> dict[str, str]:
        return {}

    with pytest.raises(RuntimeError, match="/backdoor"):
        check_route_table(app)
    assert authorize  # the dependency every protected router mounts


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize(("method", "path"), sorted(ROUTE_ROLES))
def test_each_caller_gets_what_the_role_table_says(
    setup: Setup, caller: str, method: str, path: str
) -> None:
    bearer = _credential(setup, caller)
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    who = caller if caller in ("member", "reader") else "admin"
    url, kwargs = _request(setup, method, path, who)
    response = setup.api.client.request(method, url, headers=headers, **kwargs)
    expected = _expected(caller, method, path)
    if expected >= 400:
        codes = {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict"}
        codes[422] = "invalid_input"
        by_role = caller != "reader-key" or not role_at_least("reader", ROUTE_ROLES[(method, path)])
        if expected == 403 and not by_role:
            assert_error_body(response, 403, "api_key_not_allowed")
            return
        error = assert_error_body(response, expected, codes[expected])
        if expected == 403:
            assert f"needs the {ROUTE_ROLES[(method, path)]} role" in error["message"]
    else:
        assert response.status_code == expected, (caller, method, path, response.text)


def test_a_member_deletes_only_their_own_uploads_and_an_admin_any(setup: Setup) -> None:
    client, users = setup.api.client, setup.users
    admins = _own_document(setup, "admin")
    refused = client.delete(f"/documents/{admins}", headers=setup.headers("member"))
    error = assert_error_body(refused, 403, "forbidden")
    assert "only documents you uploaded" in error["message"]
    assert client.get(f"/documents/{admins}", headers=setup.headers("member")).status_code == 200
    members = _own_document(setup, "member")
    listed = client.get("/documents", headers=setup.headers("reader")).json()["data"]
    shown = {d["document_id"]: d for d in listed}
    assert shown[members]["uploaded_by"] == users["member"].user_id
    assert shown[members]["uploaded_by_name"] == users["member"].username
    for document_id in (members, admins):
        deleted = client.delete(f"/documents/{document_id}", headers=setup.headers("admin"))
        assert deleted.status_code == 204


def test_an_upload_records_its_uploader_and_a_member_cannot_replace_anothers(
    setup: Setup,
) -> None:
    client, users = setup.api.client, setup.users
    member = setup.headers("member")
    upload = client.post(
        "/documents", files={"file": ("moorings.txt", b"Moorings cost 12 pounds.")}, headers=member
    )
    assert upload.status_code == 202, upload.text
    users["member"].token = setup.token("member")  # its login token ended with the matrix
    job = setup.api.wait_for_job(users["member"], upload.json()["job_id"])
    assert job["status"] == "done", job
    shown = client.get(f"/documents/{job['document_id']}", headers=setup.headers("reader"))
    assert shown.json()["uploaded_by_name"] == users["member"].username
    other = setup.api.add_user(A)
    replaced = setup.api.upload(other, "moorings.txt", b"Moorings are free now.")
    assert_error_body(replaced, 403, "forbidden")
    assert setup.api.uploads_left() == []  # the refused file is not kept
    again = client.get(f"/documents/{job['document_id']}", headers=setup.headers("reader"))
    assert again.json()["uploaded_by"] == users["member"].user_id


def test_a_keys_role_is_capped_by_its_owners_current_role(setup: Setup) -> None:
    client = setup.api.client
    setup.users["moved"] = moved = setup.api.add_user(A)  # a member
    member_key = {"Authorization": f"Bearer {setup.new_key('moved')['key']}"}
    assert client.get(f"/jobs/{setup.job_id}", headers=member_key).status_code == 200
    demoted = client.patch(
        f"/users/{moved.user_id}", json={"role": "reader"}, headers=setup.headers("admin")
    )
    assert demoted.status_code == 200
    # The key was made as member; its owner is a reader now, so the key acts as a reader.
    assert_error_body(client.get(f"/jobs/{setup.job_id}", headers=member_key), 403, "forbidden")
    me = client.get("/auth/me", headers=member_key).json()
    assert (me["role"], me["credential"]) == ("reader", "key")
