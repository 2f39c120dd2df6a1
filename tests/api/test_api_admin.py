"""Tenant administration over HTTP: users, own password, API keys, sign-out and the audit log,
with bad input refused in the error envelope and nothing half-written."""

from __future__ import annotations

import itertools
import logging
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from app.services.audit import PRUNE_EVERY_S
from app.storage.db import utc_now
from app.storage.tables import AuditRow
from app.timing import AtMostEvery
from tests.api.harness import DEFAULT_PASSWORD, ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

_tenants = itertools.count(1)


def _tenant() -> str:
    return f"admin-t{next(_tenants)}"


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def _me(api: ApiHarness, headers: dict[str, str]) -> int:
    return int(api.client.get("/auth/me", headers=headers).status_code)


def _new_key(api: ApiHarness, user: ApiUser, **body: Any) -> dict[str, Any]:
    response = api.client.post("/auth/keys", json={"name": "script", **body}, headers=user.headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _users(api: ApiHarness, admin: ApiUser) -> list[dict[str, Any]]:
    response = api.client.get("/users", params={"limit": 100}, headers=admin.headers)
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


# --- users ---------------------------------------------------------------------------------


def test_an_admin_manages_the_users_of_its_tenant(api: ApiHarness) -> None:
    tenant = _tenant()
    admin = api.add_user(tenant)
    created = api.client.post(
        "/users",
        json={"username": "Grace@Example.org", "password": DEFAULT_PASSWORD, "role": "reader"},
        headers=admin.headers,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == {"user_id", "username", "role", "disabled", "created_at"}
    assert (body["username"], body["role"], body["disabled"]) == (
        "grace@example.org",
        "reader",
        False,
    )
    grace = api.login("grace@example.org", DEFAULT_PASSWORD)
    assert api.client.get("/documents", headers=_bearer(grace)).status_code == 200

    page = api.client.get("/users", params={"limit": 1, "offset": 1}, headers=admin.headers)
    assert page.json()["count"] == 2 and len(page.json()["data"]) == 1
    assert {u["username"] for u in _users(api, admin)} == {admin.username, "grace@example.org"}

    promoted = api.client.patch(
        f"/users/{body['user_id']}", json={"role": "member"}, headers=admin.headers
    )
    assert promoted.status_code == 200 and promoted.json()["role"] == "member"
    assert _me(api, _bearer(grace)) == 200  # a role change keeps the session
    gone = api.client.delete(f"/users/{body['user_id']}", headers=admin.headers)
    assert gone.status_code == 204
    assert_error_body(api.client.get("/auth/me", headers=_bearer(grace)), 401, "unauthorized")
    again = api.client.delete(f"/users/{body['user_id']}", headers=admin.headers)
    assert_error_body(again, 404, "not_found")


def test_another_tenants_users_are_not_found(api: ApiHarness) -> None:
    mine, theirs = api.add_user(_tenant()), api.add_user(_tenant())
    for method, body in (("PATCH", {"role": "reader"}), ("DELETE", None)):
        response = api.client.request(
            method, f"/users/{theirs.user_id}", json=body, headers=mine.headers
        )
        assert_error_body(response, 404, "not_found")
    assert theirs.username not in {u["username"] for u in _users(api, mine)}
    assert _me(api, theirs.headers) == 200


def test_the_last_enabled_admin_cannot_be_demoted_disabled_or_deleted(api: ApiHarness) -> None:
    tenant = _tenant()
    admin = api.add_user(tenant)
    url = f"/users/{admin.user_id}"
    for method, body in (
        ("PATCH", {"role": "member"}),
        ("PATCH", {"disabled": True}),
        ("DELETE", None),
    ):
        refused = api.client.request(method, url, json=body, headers=admin.headers)
        error = assert_error_body(refused, 409, "conflict")
        assert "at least one enabled admin" in error["message"]
    [only] = _users(api, admin)
    assert (only["role"], only["disabled"]) == ("admin", False)
    second = api.add_user(tenant, role="admin")
    demoted = api.client.patch(url, json={"role": "member"}, headers=second.headers)
    assert demoted.status_code == 200
    refused = api.client.patch(
        f"/users/{second.user_id}", json={"disabled": True}, headers=second.headers
    )
    assert_error_body(refused, 409, "conflict")


def test_disabling_a_user_ends_its_sessions_and_keys_at_once(api: ApiHarness) -> None:
    tenant = _tenant()
    admin, member = api.add_user(tenant), api.add_user(tenant)
    key = _new_key(api, member)["key"]
    assert _me(api, _bearer(key)) == 200
    off = api.client.patch(
        f"/users/{member.user_id}", json={"disabled": True}, headers=admin.headers
    )
    assert off.status_code == 200 and off.json()["disabled"] is True
    assert _me(api, member.headers) == 401 and _me(api, _bearer(key)) == 401
    refused = api.client.post(
        "/auth/token", data={"username": member.username, "password": DEFAULT_PASSWORD}
    )
    assert_error_body(refused, 401, "unauthorized")
    on = api.client.patch(
        f"/users/{member.user_id}", json={"disabled": False}, headers=admin.headers
    )
    assert on.status_code == 200
    assert _me(api, member.headers) == 401  # the old session stays ended
    assert _me(api, _bearer(api.login(member.username, DEFAULT_PASSWORD))) == 200


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"username": "newbie", "password": DEFAULT_PASSWORD, "role": "owner"}, 422, "role"),
        ({"username": "newbie", "password": "short"}, 422, "at least 12"),
        ({"username": "newbie", "password": "é" * 40}, 422, "72 bytes"),
        ({"username": "x" * 65, "password": DEFAULT_PASSWORD}, 422, "username"),
        ({"username": "no spaces allowed", "password": DEFAULT_PASSWORD}, 422, "user name"),
        ({"username": "newbie", "password": DEFAULT_PASSWORD, "tenant_id": "x"}, 422, "tenant"),
    ],
    ids=["unknown-role", "weak-password", "bcrypt-limit", "oversized-name", "bad-name", "tenant"],
)
def test_bad_new_users_are_refused_and_nothing_is_written(
    api: ApiHarness, body: dict[str, Any], status: int, words: str
) -> None:
    admin = api.add_user(_tenant())
    before = _users(api, admin)
    response = api.client.post("/users", json=body, headers=admin.headers)
    error = assert_error_body(response, status)
    assert words in error["message"], error
    assert _users(api, admin) == before


def test_a_taken_user_name_is_a_conflict_in_its_own_tenant_only(api: ApiHarness) -> None:
    admin, elsewhere = api.add_user(_tenant()), api.add_user(_tenant())
    colleague = api.add_user(admin.tenant)
    before = _users(api, admin)
    response = api.client.post(
        "/users",
        json={"username": colleague.username.upper(), "password": DEFAULT_PASSWORD},
        headers=admin.headers,
    )
    error = assert_error_body(response, 409, "conflict")
    assert "already taken" in error["message"]
    assert _users(api, admin) == before
    # Another tenant's name is free here: the answer says nothing about who exists elsewhere.
    response = api.client.post(
        "/users",
        json={"username": elsewhere.username, "password": DEFAULT_PASSWORD},
        headers=admin.headers,
    )
    assert response.status_code == 201, response.text


def test_an_empty_or_unknown_change_is_refused(api: ApiHarness) -> None:
    admin = api.add_user(_tenant())
    url = f"/users/{admin.user_id}"
    assert_error_body(api.client.patch(url, json={}, headers=admin.headers), 422)
    assert_error_body(api.client.patch(url, json={"tenant_id": "x"}, headers=admin.headers), 422)
    weak = api.client.patch(url, json={"password": "short"}, headers=admin.headers)
    assert "at least 12" in assert_error_body(weak, 422)["message"]
    assert _me(api, admin.headers) == 200  # nothing changed, the session lives


# --- own password ---------------------------------------------------------------------------


def test_changing_ones_password_ends_every_session_and_key(api: ApiHarness) -> None:
    user = api.add_user(_tenant())
    key = _new_key(api, user)["key"]
    other_session = _bearer(api.login(user.username, DEFAULT_PASSWORD))
    wrong = api.client.post(
        "/auth/password",
        json={"current_password": "not the password", "new_password": "a brand new password"},
        headers=user.headers,
    )
    assert_error_body(wrong, 401, "unauthorized")
    weak = api.client.post(
        "/auth/password",
        json={"current_password": DEFAULT_PASSWORD, "new_password": "short"},
        headers=user.headers,
    )
    assert "at least 12" in assert_error_body(weak, 422)["message"]
    assert _me(api, user.headers) == 200 and _me(api, _bearer(key)) == 200

    changed = api.client.post(
        "/auth/password",
        json={"current_password": DEFAULT_PASSWORD, "new_password": "a brand new password"},
        headers=user.headers,
    )
    assert changed.status_code == 204
    for headers in (user.headers, other_session, _bearer(key)):
        assert _me(api, headers) == 401
    old = api.client.post(
        "/auth/token", data={"username": user.username, "password": DEFAULT_PASSWORD}
    )
    assert_error_body(old, 401, "unauthorized")
    assert _me(api, _bearer(api.login(user.username, "a brand new password"))) == 200


def test_guessing_ones_current_password_is_limited_like_a_login(api_factory: ApiFactory) -> None:
    # A stolen token or key must not become an unthrottled oracle for its user's password.
    limited = api_factory(login_failures_per_minute=3)
    user = limited.add_user(_tenant())
    guesses = [
        limited.client.post(
            "/auth/password",
            json={"current_password": f"guess number {n}", "new_password": "a brand new password"},
            headers=user.headers,
        )
        for n in range(4)
    ]
    assert [g.status_code for g in guesses] == [401, 401, 401, 429]
    assert "try again later" in assert_error_body(guesses[-1], 429, "rate_limited")["message"]
    assert int(guesses[-1].headers["Retry-After"]) >= 1
    assert _me(limited, user.headers) == 200  # refused, not signed out; the password is unchanged


# --- API keys -------------------------------------------------------------------------------


def test_a_key_works_like_a_token_and_is_shown_only_once(api: ApiHarness) -> None:
    tenant = _tenant()
    admin, member = api.add_user(tenant), api.add_user(tenant)
    created = _new_key(api, member, name="nightly sync", expires_in_days=30)
    assert set(created) == {
        "key_id", "name", "role", "prefix", "key", "created_at", "expires_at", "scopes",
        "collections",
    }  # fmt: skip
    assert created["scopes"] == []
    assert created["collections"] is None  # not limited: every collection its owner reads
    key = created["key"]
    assert key.startswith("rag_") and len(key) == 47 and key.startswith(created["prefix"])
    assert created["role"] == "member" and created["expires_at"] is not None
    listed = api.client.get("/auth/keys", headers=member.headers).json()["data"]
    assert [k["key_id"] for k in listed] == [created["key_id"]]
    assert listed[0]["last_used_at"] is None and key not in str(listed)

    assert api.upload(member, "a.txt", b"uploaded with a key").status_code == 202
    used = api.client.get("/auth/keys", headers=_bearer(key)).json()["data"]
    assert used[0]["last_used_at"] is not None
    me = api.client.get("/auth/me", headers=_bearer(key)).json()
    assert (me["credential"], me["key_id"], me["role"]) == ("key", created["key_id"], "member")

    everyone = api.client.get("/auth/keys", params={"all": "true"}, headers=member.headers)
    assert_error_body(everyone, 403, "forbidden")
    admins_view = api.client.get("/auth/keys", params={"all": "true"}, headers=admin.headers)
    assert created["key_id"] in {k["key_id"] for k in admins_view.json()["data"]}


def test_a_revoked_key_is_refused_and_only_its_owner_or_an_admin_revokes(
    api: ApiHarness,
) -> None:
    tenant = _tenant()
    admin, member, other = api.add_user(tenant), api.add_user(tenant), api.add_user(tenant)
    key = _new_key(api, member)
    url = f"/auth/keys/{key['key_id']}"
    assert_error_body(api.client.delete(url, headers=other.headers), 404, "not_found")
    outsider = api.add_user(_tenant())
    assert_error_body(api.client.delete(url, headers=outsider.headers), 404, "not_found")
    assert _me(api, _bearer(key["key"])) == 200
    assert api.client.delete(url, headers=admin.headers).status_code == 204
    refused = api.client.get("/auth/me", headers=_bearer(key["key"]))
    assert_error_body(refused, 401, "unauthorized")
    assert key["key"] not in refused.text
    assert_error_body(api.client.delete(url, headers=member.headers), 404, "not_found")


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"name": "x", "role": "admin"}, 403, "cannot be above its owner's"),
        ({"name": "x", "role": "root"}, 422, "role"),
        ({"name": "x" * 101}, 422, "name"),
        ({"name": "   "}, 422, "must not be empty"),
        ({"name": "tab\there"}, 422, "control characters"),
        ({"name": "x", "expires_in_days": 0}, 422, "expires_in_days"),
        ({"name": "x", "user_id": "usr_someone"}, 422, "user_id"),
    ],
    ids=["above-owner", "unknown-role", "oversized-name", "blank", "control", "days", "extra"],
)
def test_bad_keys_are_refused_and_nothing_is_written(
    api: ApiHarness, body: dict[str, Any], status: int, words: str
) -> None:
    member = api.add_user(_tenant(), role="member")
    response = api.client.post("/auth/keys", json=body, headers=member.headers)
    error = assert_error_body(response, status)
    assert words in error["message"], error
    assert api.client.get("/auth/keys", headers=member.headers).json()["data"] == []


@pytest.mark.parametrize(
    "credential",
    ["rag_", "rag_short", "rag_" + "A" * 43, "rag_" + "A" * 42 + "!", "rag_" + "B" * 500],
    ids=["prefix-only", "short", "unknown", "bad-char", "long"],
)
def test_a_malformed_or_unknown_key_gets_one_generic_401(api: ApiHarness, credential: str) -> None:
    response = api.client.get("/auth/me", headers=_bearer(credential))
    error = assert_error_body(response, 401, "unauthorized")
    assert error["message"] == "invalid, expired or revoked API key"
    assert credential not in response.text


# --- sign-out ------------------------------------------------------------------------------


def test_logout_ends_only_the_presented_token(api: ApiHarness) -> None:
    user = api.add_user(_tenant())
    other = _bearer(api.login(user.username, DEFAULT_PASSWORD))
    assert api.client.post("/auth/logout", headers=user.headers).status_code == 204
    assert_error_body(api.client.get("/auth/me", headers=user.headers), 401, "unauthorized")
    assert_error_body(api.client.post("/auth/logout", headers=user.headers), 401)
    assert _me(api, other) == 200


def test_logout_everywhere_ends_every_token_but_not_the_keys(api: ApiHarness) -> None:
    user = api.add_user(_tenant())
    other = _bearer(api.login(user.username, DEFAULT_PASSWORD))
    key = _bearer(_new_key(api, user)["key"])
    assert_error_body(api.client.post("/auth/logout", headers=key), 409, "conflict")
    everywhere = api.client.post("/auth/logout", params={"all": "true"}, headers=user.headers)
    assert everywhere.status_code == 204
    assert _me(api, user.headers) == 401 and _me(api, other) == 401
    assert _me(api, key) == 200
    assert _me(api, _bearer(api.login(user.username, DEFAULT_PASSWORD))) == 200


def test_logout_with_a_body_field_is_refused_and_ends_no_session(api: ApiHarness) -> None:
    """`all` is a query parameter: `{"all": true}` in the body once got a 204 that had ended
    only the presented token, while its sender believed every session was over."""
    user = api.add_user(_tenant())
    other = _bearer(api.login(user.username, DEFAULT_PASSWORD))
    refused = api.client.post("/auth/logout", json={"all": True}, headers=user.headers)
    error = assert_error_body(refused, 422, "validation_error")
    assert "all" in error["message"] and "?all=true" in error["message"]
    assert _me(api, user.headers) == 200 and _me(api, other) == 200
    empty = api.client.post("/auth/logout", json={}, headers=user.headers)
    assert empty.status_code == 204
    assert _me(api, user.headers) == 401 and _me(api, other) == 200


# --- audit log -----------------------------------------------------------------------------


def _audit(api: ApiHarness, admin: ApiUser, **params: Any) -> list[dict[str, Any]]:
    response = api.client.get("/audit", params={"limit": 100, **params}, headers=admin.headers)
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["data"]
    return entries


def test_the_audit_log_records_who_did_what_without_secrets(
    api: ApiHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tenant = _tenant()
    admin = api.add_user(tenant)
    wrong = api.client.post(
        "/auth/token", data={"username": admin.username, "password": "Wrong-Password-123"}
    )
    assert wrong.status_code == 401
    created = api.client.post(
        "/users",
        json={"username": f"audited-{tenant}", "password": "Secret-Password-456"},
        headers=admin.headers,
    ).json()
    api.client.patch(f"/users/{created['user_id']}", json={"role": "reader"}, headers=admin.headers)
    key = _new_key(api, admin)
    api.client.delete(f"/auth/keys/{key['key_id']}", headers=admin.headers)
    job = api.upload_and_wait(admin, "audited.txt", b"The audit trail keeps every step.")
    api.query(admin, "What does the audit trail keep?")
    api.client.delete(f"/documents/{job['document_id']}", headers=admin.headers)
    api.client.delete(f"/users/{created['user_id']}", headers=admin.headers)
    session = _bearer(api.login(admin.username, DEFAULT_PASSWORD))
    api.client.post("/auth/logout", headers=session)

    entries = _audit(api, admin)
    actions = [e["action"] for e in reversed(entries)]
    assert actions == [
        "login.succeeded",  # add_user logs in
        "login.failed",
        "user.created",
        "user.changed",
        "key.created",
        "key.revoked",
        "document.uploaded",
        "document.deleted",
        "user.deleted",
        "login.succeeded",
        "logout",
    ]
    by_action = {e["action"]: e for e in entries}
    assert by_action["login.failed"]["client_ip"] == "testclient"
    assert by_action["login.failed"]["detail"]["reason"] == "credentials"
    assert by_action["user.changed"]["target_id"] == created["user_id"]
    assert by_action["user.changed"]["detail"]["role"] == ["member", "reader"]
    assert by_action["key.created"]["detail"]["prefix"] == key["prefix"]
    assert by_action["key.revoked"]["detail"]["prefix"] == key["prefix"]
    assert by_action["key.revoked"]["target_id"] == key["key_id"]
    assert by_action["document.deleted"]["detail"]["source"] == "audited.txt"
    assert all(e["user_id"] == admin.user_id for e in entries)
    text = str(entries)
    for secret in ("Wrong-Password-123", "Secret-Password-456", key["key"], "audit trail keeps"):
        assert secret not in text
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert key["key"] not in logged and "Secret-Password-456" not in logged

    filtered = _audit(api, admin, action="user.created", user_id=admin.user_id)
    assert [e["action"] for e in filtered] == ["user.created"]
    assert _audit(api, admin, user_id="usr_nobody") == []
    unknown = api.client.get("/audit", params={"action": "coffee"}, headers=admin.headers)
    assert_error_body(unknown, 422, "validation_error")
    outsider = api.add_user(_tenant())
    assert {e["action"] for e in _audit(api, outsider)} == {"login.succeeded"}


def test_quota_refusals_are_audited(api_factory: ApiFactory) -> None:
    small = api_factory(quota_documents=1)
    admin = small.add_user("quota-audit")
    assert small.upload_and_wait(admin, "one.txt", b"The first document.")["status"] == "done"
    refused = small.upload(admin, "two.txt", b"The second document.")
    assert_error_body(refused, 413, "quota_exceeded")
    [entry] = _audit(small, admin, action="quota.refused")
    assert entry["detail"]["quota"] == "documents" and entry["user_id"] == admin.user_id
    assert [e["action"] for e in _audit(small, admin, action="document.uploaded")] == [
        "document.uploaded"
    ]  # the refused upload left no entry of its own


def test_entries_older_than_the_retention_are_pruned(api: ApiHarness) -> None:
    admin = api.add_user(_tenant())
    container = api.container
    with container.database.session() as session:
        session.execute(
            update(AuditRow)
            .where(AuditRow.tenant_id == admin.tenant)
            .values(at=utc_now() - timedelta(days=api.settings.audit_retention_days + 1))
        )
    assert len(_audit(api, admin)) == 1
    log = container.audit_log
    log.pruning = AtMostEvery(PRUNE_EVERY_S)  # as in a process that has not pruned yet
    assert log.prune_now_and_then() >= 1
    assert _audit(api, admin) == []
    assert log.prune_now_and_then() == 0  # not again within the hour


def test_the_sqlite_database_holds_no_key_in_clear_text(api: ApiHarness) -> None:
    user = api.add_user(_tenant())
    key = _new_key(api, user, name="scanned")
    assert _me(api, _bearer(key["key"])) == 200  # used once: last_used_at written too
    files = [p for p in api.settings.data_dir.rglob("*") if p.is_file()]
    database = [p for p in files if p.name.startswith("rag.db")]
    assert database, files  # the SQLite file (and its WAL) are scanned, with everything else
    blob = b"".join(p.read_bytes() for p in files)
    assert key["key_id"].encode() in blob  # the row is on disk...
    assert key["key"].encode() not in blob  # ...without the key
    assert key["key"].removeprefix("rag_").encode() not in blob


def test_behind_a_trusted_proxy_the_audit_names_the_client_and_a_key_shares_its_users_limit(
    api_factory: ApiFactory,
) -> None:
    proxied = api_factory(
        start_workers=False,
        client_host="10.1.2.3",
        trusted_proxies="10.0.0.0/8",
        rate_limit_query_per_minute=2,
    )
    admin = proxied.add_user("proxied")
    forwarded = {"X-Forwarded-For": "203.0.113.7"}
    failed = proxied.client.post(
        "/auth/token",
        data={"username": admin.username, "password": "Not-The-Password-1"},
        headers=forwarded,
    )
    assert failed.status_code == 401
    [entry] = _audit(proxied, admin, action="login.failed")
    assert entry["client_ip"] == "203.0.113.7"  # the client, not the proxy
    [login] = _audit(proxied, admin, action="login.succeeded")
    assert login["client_ip"] == "10.1.2.3"  # no forwarded header: the peer itself

    key = _bearer(_new_key(proxied, admin)["key"])
    search = {"query": "anything"}
    assert proxied.client.post("/search", json=search, headers=admin.headers).status_code == 200
    assert proxied.client.post("/search", json=search, headers=key).status_code == 200
    limited = proxied.client.post("/search", json=search, headers=key)
    assert_error_body(limited, 429, "rate_limited")  # the key spent its user's budget
    assert_error_body(
        proxied.client.post("/search", json=search, headers=admin.headers), 429, "rate_limited"
    )
