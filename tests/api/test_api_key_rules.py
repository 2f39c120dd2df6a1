"""What an API key may not do, and the caps on keys and users, through the real HTTP app.

What an audit found: a key made with `expires_in_days: 1` made a key that never expired and still
worked after its maker was revoked; an admin's key could add users; a reader made 300 keys in a row;
a deleted user's conversations stayed, counting against the tenant's quota.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.storage.db import utc_now
from app.storage.tables import ApiKeyRow, ConversationRow
from tests.api.harness import DEFAULT_PASSWORD, ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

_tenants = itertools.count(1)
NEW_PASSWORD = "a different long passphrase"


def _tenant() -> str:
    return f"keyrules-t{next(_tenants)}"


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def _make_key(api: ApiHarness, headers: dict[str, str], **body: Any) -> Any:
    return api.client.post("/auth/keys", json={"name": "script", **body}, headers=headers)


def _new_key(api: ApiHarness, user: ApiUser, **body: Any) -> dict[str, Any]:
    response = _make_key(api, user.headers, **body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _works(api: ApiHarness, key: str) -> bool:
    return api.client.get("/auth/me", headers=_bearer(key)).status_code == 200


def _key_ids(api: ApiHarness, user: ApiUser) -> set[str]:
    listed = api.client.get("/auth/keys", headers=user.headers).json()["data"]
    return {k["key_id"] for k in listed}


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(start_workers=False)


# --- keys are made and revoked by a signed-in person ----------------------------------------


def test_a_key_cannot_make_or_revoke_keys_without_the_manage_scope(api: ApiHarness) -> None:
    admin = api.add_user(_tenant())
    first = _new_key(api, admin, expires_in_days=1)
    other = _new_key(api, admin)
    made = _make_key(api, _bearer(first["key"]), expires_in_days=1)
    error = assert_error_body(made, 403, "api_key_not_allowed")
    assert "keys:manage" in error["message"] and first["scopes"] == []
    revoke = api.client.delete(f"/auth/keys/{other['key_id']}", headers=_bearer(first["key"]))
    assert_error_body(revoke, 403, "api_key_not_allowed")
    assert _works(api, other["key"])
    assert _key_ids(api, admin) == {first["key_id"], other["key_id"]}  # nothing was made


def test_only_a_signed_in_admin_gives_the_manage_scope(api: ApiHarness) -> None:
    tenant = _tenant()
    admin, member = api.add_user(tenant), api.add_user(tenant)
    refused = _make_key(api, member.headers, scopes=["keys:manage"])
    error = assert_error_body(refused, 403, "forbidden")
    assert "only an admin" in error["message"]
    assert _key_ids(api, member) == set()
    unknown = _make_key(api, admin.headers, scopes=["users:manage"])
    assert_error_body(unknown, 422, "validation_error")
    granted = _new_key(api, admin, scopes=["keys:manage"], expires_in_days=7)
    assert granted["scopes"] == ["keys:manage"]
    me = api.client.get("/auth/me", headers=_bearer(granted["key"])).json()
    assert me["scopes"] == ["keys:manage"]
    [listed] = api.client.get("/auth/keys", headers=admin.headers).json()["data"]
    assert (listed["scopes"], listed["parent_key_id"]) == (["keys:manage"], None)
    # A key with the scope still cannot pass it on.
    passed = _make_key(api, _bearer(granted["key"]), scopes=["keys:manage"], expires_in_days=1)
    assert_error_body(passed, 403, "api_key_not_allowed")


def test_a_key_never_makes_a_key_that_outlives_it(api: ApiHarness) -> None:
    admin = api.add_user(_tenant())
    maker = _new_key(api, admin, scopes=["keys:manage"], expires_in_days=1)
    as_maker = _bearer(maker["key"])
    maker_expiry = datetime.fromisoformat(maker["expires_at"])

    forever = _make_key(api, as_maker)  # the audit's request: no expiry from a 1-day key
    error = assert_error_body(forever, 422, "invalid_input")
    assert "cannot outlive it" in error["message"]
    longer = _make_key(api, as_maker, expires_in_days=30)
    assert longer.status_code == 201, longer.text
    child = longer.json()
    assert datetime.fromisoformat(child["expires_at"]) <= maker_expiry
    assert child["scopes"] == []
    assert _works(api, child["key"])
    listed = {
        k["key_id"]: k for k in api.client.get("/auth/keys", headers=admin.headers).json()["data"]
    }
    assert listed[child["key_id"]]["parent_key_id"] == maker["key_id"]

    # Revoking the maker revokes what it made: the child stops working at once.
    gone = api.client.delete(f"/auth/keys/{maker['key_id']}", headers=admin.headers)
    assert gone.status_code == 204
    assert not _works(api, maker["key"])
    assert not _works(api, child["key"])
    assert _key_ids(api, admin) == set()


def test_a_key_limited_to_some_collections_makes_keys_limited_to_them(api: ApiHarness) -> None:
    """Before, a `keys:manage` key limited to general made a key with no limit at all, which
    then opened the restricted collection its maker was kept out of."""
    admin = api.add_user(_tenant())
    made = api.client.post(
        "/collections", json={"name": "payroll", "visibility": "restricted"}, headers=admin.headers
    )
    assert made.status_code == 201, made.text
    maker = _new_key(api, admin, scopes=["keys:manage"], collections=["general"])
    as_maker = _bearer(maker["key"])
    assert_error_body(api.client.get("/collections/payroll", headers=as_maker), 404, "not_found")

    wider = _make_key(api, as_maker, collections=["payroll"])
    assert_error_body(wider, 404, "not_found")
    child = _make_key(api, as_maker)
    assert child.status_code == 201, child.text
    assert child.json()["collections"] == ["general"]
    as_child = _bearer(child.json()["key"])
    assert_error_body(api.client.get("/collections/payroll", headers=as_child), 404, "not_found")
    listed = api.client.get("/collections", headers=as_child).json()["data"]
    assert [c["name"] for c in listed] == ["general"]


def test_a_key_limited_to_some_collections_lists_only_its_owners_keys(api: ApiHarness) -> None:
    """Every key of the tenant names the collections each is limited to, and its own name
    ("payroll-export"): a limited admin key listed them all."""
    admin = api.add_user(_tenant())
    made = api.client.post(
        "/collections", json={"name": "payroll", "visibility": "restricted"}, headers=admin.headers
    )
    assert made.status_code == 201, made.text
    _new_key(api, admin, collections=[made.json()["collection_id"]])
    limited = _bearer(_new_key(api, admin, collections=["general"])["key"])
    everyone = api.client.get("/auth/keys?all=true", headers=limited)
    assert_error_body(everyone, 403, "api_key_not_allowed")
    assert made.json()["collection_id"] not in everyone.text
    assert api.client.get("/auth/keys?all=true", headers=admin.headers).status_code == 200


def test_a_manage_key_made_without_expiry_revokes_and_its_children_die_with_it(
    api: ApiHarness,
) -> None:
    admin = api.add_user(_tenant())
    maker = _new_key(api, admin, scopes=["keys:manage"])
    child = _make_key(api, _bearer(maker["key"]), role="reader").json()
    grandchild_maker = _bearer(child["key"])
    assert_error_body(_make_key(api, grandchild_maker), 403, "api_key_not_allowed")
    sibling = _new_key(api, admin)
    # With the scope, a key revokes keys like its owner would.
    revoked = api.client.delete(f"/auth/keys/{sibling['key_id']}", headers=_bearer(maker["key"]))
    assert revoked.status_code == 204
    assert not _works(api, sibling["key"])
    assert child["role"] == "reader" and child["expires_at"] is None  # its maker never expires
    assert (
        api.client.delete(f"/auth/keys/{maker['key_id']}", headers=admin.headers).status_code == 204
    )
    assert not _works(api, child["key"])


# --- keys never administer users ------------------------------------------------------------


def test_an_admins_key_cannot_administer_users_or_passwords(api: ApiHarness) -> None:
    tenant = _tenant()
    admin, member = api.add_user(tenant), api.add_user(tenant)
    for scopes in ([], ["keys:manage"]):
        key = _bearer(_new_key(api, admin, role="admin", scopes=scopes)["key"])
        attempts = {
            "create": api.client.post(
                "/users",
                json={"username": f"intruder-{tenant}", "password": NEW_PASSWORD},
                headers=key,
            ),
            "promote": api.client.patch(
                f"/users/{member.user_id}", json={"role": "admin"}, headers=key
            ),
            "reset": api.client.patch(
                f"/users/{member.user_id}", json={"password": NEW_PASSWORD}, headers=key
            ),
            "disable": api.client.patch(
                f"/users/{member.user_id}", json={"disabled": True}, headers=key
            ),
            "delete": api.client.delete(f"/users/{member.user_id}", headers=key),
            "own password": api.client.post(
                "/auth/password",
                json={"current_password": DEFAULT_PASSWORD, "new_password": NEW_PASSWORD},
                headers=key,
            ),
        }
        for what, response in attempts.items():
            error = assert_error_body(response, 403, "api_key_not_allowed")
            assert "sign in" in error["message"], what
        assert (
            api.client.get("/users", headers=key).status_code == 200
        )  # reading is not administering
    users = api.client.get("/users", headers=admin.headers).json()["data"]
    assert {(u["user_id"], u["role"], u["disabled"]) for u in users} == {
        (admin.user_id, "admin", False),
        (member.user_id, "member", False),
    }
    api.login(member.username, DEFAULT_PASSWORD)  # no password was changed
    api.login(admin.username, DEFAULT_PASSWORD)


# --- caps -----------------------------------------------------------------------------------


def test_a_user_holds_at_most_the_configured_working_keys(api_factory: ApiFactory) -> None:
    capped = api_factory(start_workers=False, max_keys_per_user=3)
    reader = capped.add_user(_tenant(), role="reader")
    keys = [_new_key(capped, reader) for _ in range(3)]
    over = _make_key(capped, reader.headers)
    error = assert_error_body(over, 413, "quota_exceeded")
    assert "API keys" in error["message"] and "3" in error["message"]
    assert len(_key_ids(capped, reader)) == 3
    # Another user has their own allowance.
    assert _make_key(capped, capped.add_user(_tenant()).headers).status_code == 201
    # A revoked key and an expired key free their places.
    gone = capped.client.delete(f"/auth/keys/{keys[0]['key_id']}", headers=reader.headers)
    assert gone.status_code == 204
    assert _make_key(capped, reader.headers).status_code == 201
    with capped.container.database.session() as session:
        session.execute(
            update(ApiKeyRow)
            .where(ApiKeyRow.key_id == keys[1]["key_id"])
            .values(expires_at=utc_now() - timedelta(seconds=1))
        )
    assert _make_key(capped, reader.headers).status_code == 201
    assert_error_body(_make_key(capped, reader.headers), 413, "quota_exceeded")


def test_making_keys_is_rate_limited_per_user(api_factory: ApiFactory) -> None:
    limited = api_factory(start_workers=False, rate_limit_keys_per_minute=2)
    tenant = _tenant()
    reader, other = limited.add_user(tenant, role="reader"), limited.add_user(tenant)
    assert [_make_key(limited, reader.headers).status_code for _ in range(2)] == [201, 201]
    refused = _make_key(limited, reader.headers)
    assert_error_body(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) >= 1
    assert len(_key_ids(limited, reader)) == 2
    assert _make_key(limited, other.headers).status_code == 201  # per user


def test_a_tenant_holds_at_most_the_configured_users(api_factory: ApiFactory) -> None:
    small = api_factory(start_workers=False, quota_users=2)
    tenant = _tenant()
    admin = small.add_user(tenant)
    added = small.client.post(
        "/users",
        json={"username": f"second-{tenant}", "password": NEW_PASSWORD},
        headers=admin.headers,
    )
    assert added.status_code == 201, added.text
    over = small.client.post(
        "/users",
        json={"username": f"third-{tenant}", "password": NEW_PASSWORD},
        headers=admin.headers,
    )
    error = assert_error_body(over, 413, "quota_exceeded")
    assert "users" in error["message"] and "2" in error["message"]
    assert small.client.get("/users", headers=admin.headers).json()["count"] == 2
    small.add_user(_tenant())  # another tenant has its own quota
    gone = small.client.delete(f"/users/{added.json()['user_id']}", headers=admin.headers)
    assert gone.status_code == 204
    again = small.client.post(
        "/users",
        json={"username": f"third-{tenant}", "password": NEW_PASSWORD},
        headers=admin.headers,
    )
    assert again.status_code == 201, again.text


# --- a deleted user's conversations ---------------------------------------------------------


def _conversation_bytes(api: ApiHarness, user: ApiUser) -> int:
    stats = api.client.get("/stats", headers=user.headers)
    assert stats.status_code == 200, stats.text
    used: int = stats.json()["quotas"]["conversation_bytes"]["used"]
    return used


def _conversations_of(api: ApiHarness, user_id: str) -> int:
    with api.container.database.session() as session:
        counted = session.scalar(
            select(func.count())
            .select_from(ConversationRow)
            .where(ConversationRow.user_id == user_id)
        )
        return int(counted or 0)


def _say(api: ApiHarness, user: ApiUser, conversation_id: str) -> None:
    said = api.client.post(
        f"/conversations/{conversation_id}/messages",
        json={"content": "What are the tide times at Wick?"},
        headers=user.headers,
    )
    assert said.status_code == 200, said.text


def _start(api: ApiHarness, user: ApiUser) -> str:
    started = api.client.post("/conversations", headers=user.headers)
    assert started.status_code == 201, started.text
    conversation_id: str = started.json()["conversation_id"]
    return conversation_id


def test_deleting_a_user_deletes_their_conversations(api: ApiHarness) -> None:
    tenant = _tenant()
    admin, leaver = api.add_user(tenant), api.add_user(tenant)
    kept = _start(api, admin)
    _say(api, admin, kept)
    for _ in range(2):
        _say(api, leaver, _start(api, leaver))
    before = _conversation_bytes(api, admin)
    assert _conversations_of(api, leaver.user_id) == 2

    gone = api.client.delete(f"/users/{leaver.user_id}", headers=admin.headers)
    assert gone.status_code == 204
    after = _conversation_bytes(api, admin)
    assert 0 < after < before  # the leaver's turns no longer count against the tenant
    assert _conversations_of(api, leaver.user_id) == 0
    listed = api.client.get("/conversations", headers=admin.headers).json()["data"]
    assert [c["conversation_id"] for c in listed] == [kept]  # the admin's own stay
