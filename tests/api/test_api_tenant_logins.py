"""User names per tenant over HTTP: two organisations may each have a "sara"; a login names
its tenant when the name is shared, and nobody without a password learns whether it is; an
admin's 409 says nothing about other tenants; a day of failures locks new clients out of an
account and shows in /audit; common passwords and passwords holding the user name are refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.harness import DEFAULT_PASSWORD, ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.bcrypt_cost import record_password_checks

pytestmark = pytest.mark.integration

SARA_A = "violet kettle on the stairs"
SARA_B = "orange lantern by the door"
NOOR_A = "seven quiet herons flying"
NOOR_B = "amber tiles and cold tea"


@pytest.fixture(scope="module")
def admins(api: ApiHarness) -> tuple[ApiUser, ApiUser]:
    return api.add_user("names-a"), api.add_user("names-b")


def _token(api: ApiHarness, **form: str) -> Any:
    return api.client.post("/auth/token", data=form)


def _me(api: ApiHarness, response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    me = api.client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
    body: dict[str, Any] = me.json()
    return body


def test_two_tenants_each_have_a_sara_and_sign_in_with_their_tenant(
    api: ApiHarness, admins: tuple[ApiUser, ApiUser]
) -> None:
    first, second = admins
    for admin, password in ((first, SARA_A), (second, SARA_B)):
        created = api.client.post(
            "/users", json={"username": "sara", "password": password}, headers=admin.headers
        )
        assert created.status_code == 201, created.text
    # Taken in one's own tenant: 409, and the message names nothing beyond that tenant.
    again = api.client.post(
        "/users", json={"username": "Sara", "password": SARA_A}, headers=first.headers
    )
    error = assert_error_body(again, 409, "conflict")
    assert "names-b" not in error["message"] and "this tenant" in error["message"]

    for tenant, password in (("names-a", SARA_A), ("names-b", SARA_B)):
        me = _me(api, _token(api, username="sara", password=password, tenant=tenant))
        assert (me["tenant_id"], me["username"]) == (tenant, "sara")
    # The other tenant's password for this tenant's sara is just wrong.
    wrong = _token(api, username="sara", password=SARA_B, tenant="names-a")
    assert_error_body(wrong, 401, "unauthorized")


def test_a_shared_name_without_a_tenant_is_told_only_to_the_right_password(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # noor of names-a had the name first; names-b's came later.
    api.container.users.create_user(tenant_id="names-a", username="noor", password=NOOR_A)
    api.container.users.create_user(tenant_id="names-b", username="noor", password=NOOR_B)
    lonely = api.add_user("names-c", login=False)

    checks = record_password_checks(monkeypatch)
    answers: dict[str, tuple[int, Any]] = {}
    costs: dict[str, int] = {}
    for case, form in {
        "shared name, wrong password": {"username": "noor", "password": "not her password!"},
        "name nobody has": {"username": "nobody-at-all", "password": "not her password!"},
        "one tenant's name, wrong password": {
            "username": lonely.username,
            "password": "not her password!",
        },
        "shared name, right password": {"username": "noor", "password": NOOR_A},
        "shared name, the other one's password": {"username": "noor", "password": NOOR_B},
    }.items():
        checks.clear()
        response = _token(api, **form)
        answers[case] = (response.status_code, response.json())
        costs[case] = len(checks)
    # A guesser gets the same 401 for a shared name as for any wrong password...
    failed = answers["name nobody has"]
    assert failed[0] == 401
    assert answers["shared name, wrong password"] == failed
    assert answers["one tenant's name, wrong password"] == failed
    # ...and every attempt costs one bcrypt check, so time tells nothing either.
    assert set(costs.values()) == {1}, costs
    # Only noor's right password learns that she must name her tenant.
    status, body = answers["shared name, right password"]
    assert status == 400 and body["error"]["code"] == "tenant_required", body
    assert "names-b" not in body["error"]["message"]
    # The check is against the name's first holder: the other noor's password says nothing.
    assert answers["shared name, the other one's password"] == failed
    # A name only one tenant has needs no tenant, as before names were per tenant.
    me = _me(api, _token(api, username=lonely.username, password=DEFAULT_PASSWORD))
    assert me["tenant_id"] == "names-c"
    # An empty tenant field (a form left blank) is no tenant.
    me = _me(api, _token(api, username=lonely.username, password=DEFAULT_PASSWORD, tenant=""))
    assert me["tenant_id"] == "names-c"
    # Named, each noor signs in.
    me = _me(api, _token(api, username="noor", password=NOOR_B, tenant="names-b"))
    assert me["tenant_id"] == "names-b"


def test_a_day_of_failures_locks_new_clients_out_and_is_in_the_audit_log(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(start_workers=False, login_daily_failures_per_account=3)
    admin = api.add_user("locks-a")
    victim = api.add_user("locks-a", login=False)  # never signed in from this client
    for _ in range(3):
        wrong = _token(api, username=victim.username, password="a wrong guess here")
        assert_error_body(wrong, 401, "unauthorized")
    locked = _token(api, username=victim.username, password=DEFAULT_PASSWORD)
    error = assert_error_body(locked, 429, "account_locked")
    assert "recently" in error["message"]
    assert 23 * 3600 < int(locked.headers["Retry-After"]) <= 24 * 3600
    entries = api.client.get(
        "/audit", params={"action": "login.locked"}, headers=admin.headers
    ).json()["data"]
    assert len(entries) == 1, entries
    assert entries[0]["target_id"] == victim.user_id
    assert entries[0]["detail"]["username"] == victim.username
    # Refusals while locked add nothing: one entry per lock.
    _token(api, username=victim.username, password=DEFAULT_PASSWORD)
    again = api.client.get("/audit", params={"action": "login.locked"}, headers=admin.headers)
    assert len(again.json()["data"]) == 1


# --- passwords ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("password", "code"),
    [
        ("qazwsxedcrfv", "password_too_common"),  # on the shipped list as it is
        ("Sunshine2024!!", "password_too_common"),  # a common one, padded to 12
        ("PASSWORD123456", "password_too_common"),
        ("my name is Zed-Walker!", "password_contains_username"),
    ],
)
def test_weak_passwords_are_refused_when_set(
    api: ApiHarness, admins: tuple[ApiUser, ApiUser], password: str, code: str
) -> None:
    admin, _ = admins
    created = api.client.post(
        "/users", json={"username": "zed-walker", "password": password}, headers=admin.headers
    )
    assert_error_body(created, 422, code)

    member = api.add_user("names-a")
    # Changed by an admin: the user's own name counts there too.
    own_name = password.replace("Zed-Walker", member.username)
    changed = api.client.patch(
        f"/users/{member.user_id}", json={"password": own_name}, headers=admin.headers
    )
    assert_error_body(changed, 422, code)
    mine = api.client.post(
        "/auth/password",
        json={"current_password": DEFAULT_PASSWORD, "new_password": own_name},
        headers=member.headers,
    )
    assert_error_body(mine, 422, code)
    # Nothing changed: the old password still works.
    assert api.login(member.username, DEFAULT_PASSWORD)
