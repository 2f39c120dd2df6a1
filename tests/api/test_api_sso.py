"""Single sign-on against a real OpenID provider (Debian's Glewlwyd, tests/api/glewlwyd.py):
the Authorization Code flow with PKCE through the service's routes, just-in-time users and the
role mapping on every sign-in, the provider's access tokens on the API, one tenant's tokens
never acting in another, every refusal a person can meet, and the secret never in clear."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.fernet import Fernet
from glewlwyd import Glewlwyd, running_glewlwyd

from app.storage.sso import PendingSignIn
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

CALLBACK = "http://testserver/auth/sso/callback"
SECRET_A = "glewlwyd-client-secret-A-" + secrets.token_hex(8)
SECRET_B = "glewlwyd-client-secret-B-" + secrets.token_hex(8)
PEOPLE = {
    # name: (password, email, provider groups)
    "ada": ("ada-Password-1", "ada@acme.example", ["rag-admins"]),
    "bob": ("bob-Password-1", "bob@acme.example", ["rag-members"]),
    "eve": ("eve-Password-1", "eve@acme.example", ["sales"]),
    "dan": ("dan-Password-1", "dan@elsewhere.example", ["rag-members"]),
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Glewlwyd]:
    with running_glewlwyd(tmp_path_factory.mktemp("glewlwyd")) as glewlwyd:
        glewlwyd.add_client("rag-a", SECRET_A, CALLBACK, scope="rag-api")
        glewlwyd.add_client("rag-b", SECRET_B, CALLBACK, scope="rag-b-api")
        for name, (password, email, groups) in PEOPLE.items():
            glewlwyd.add_user(name, password, email=email, groups=groups)
            for client in ("rag-a", "rag-b"):
                glewlwyd.grant(name, client, ["openid", "profile", "email"])
        print(f"glewlwyd started and answered in {glewlwyd.started_in_s:.2f} s")
        yield glewlwyd


def join_acme(provider: Glewlwyd, name: str, group: str) -> None:
    """A new person of acme.example in one provider group, who may sign in to rag-a."""
    password, email = f"{name}-Password-1", f"{name}@acme.example"
    provider.add_user(name, password, email=email, groups=[group])
    provider.grant(name, "rag-a", ["openid", "profile", "email"])
    PEOPLE[name] = (password, email, [group])


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(
        start_workers=False,
        sso_allow_http=True,
        secrets_key=Fernet.generate_key().decode(),
    )


def acme_settings(provider: Glewlwyd, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "issuer": provider.issuer,
        "client_id": "rag-a",
        "client_secret": SECRET_A,
        "display_name": "Acme Login",
        "role_groups": {"admin": ["rag-admins"], "member": ["rag-members"]},
        "default_role": None,
        "group_map": {"rag-members": "staff"},
        "accept_access_tokens": True,
        "audience": "rag-api",
    }
    body.update(changes)
    return body


@pytest.fixture(scope="module")
def acme(api: ApiHarness, provider: Glewlwyd) -> ApiUser:
    """Tenant acme's local admin, after setting acme's provider."""
    admin = api.add_user("acme", role="admin")
    answer = api.client.put("/sso", json=acme_settings(provider), headers=admin.headers)
    assert answer.status_code == 200, answer.text
    return admin


@pytest.fixture(scope="module")
def beta(api: ApiHarness, provider: Glewlwyd) -> ApiUser:
    """Tenant beta's local admin: the same provider, another client and audience, everyone a
    reader, password sign-in off."""
    admin = api.add_user("beta", role="admin")
    body = {
        "issuer": provider.issuer,
        "client_id": "rag-b",
        "client_secret": SECRET_B,
        "default_role": "reader",
        "accept_access_tokens": True,
        "audience": "rag-b-api",
        "password_login": False,
    }
    answer = api.client.put("/sso", json=body, headers=admin.headers)
    assert answer.status_code == 200, answer.text
    return admin


def start(api: ApiHarness, tenant: str, next_path: str = "/") -> str:
    """The provider URL the service sends the browser to."""
    answer = api.client.get(
        f"/auth/sso/{tenant}/start", params={"next": next_path}, follow_redirects=False
    )
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


def callback(api: ApiHarness, provider_redirect: str) -> Any:
    """Follow the provider's redirect back to the service (without following further)."""
    parts = urlsplit(provider_redirect)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == CALLBACK
    return api.client.get(f"{parts.path}?{parts.query}", follow_redirects=False)


def sign_in(api: ApiHarness, provider: Glewlwyd, tenant: str, name: str) -> Any:
    """A whole sign-in by `name` at the provider: the service's last answer (the redirect to
    the web app, or a failure page)."""
    return callback(api, provider.authorize(start(api, tenant), name, PEOPLE[name][0]))


def exchange(api: ApiHarness, answer: Any) -> Any:
    """POST /auth/sso/exchange with the code the redirect carries in its fragment."""
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["location"])
    assert location.query == "" and location.fragment.startswith("sso_code=")
    return api.client.post("/auth/sso/exchange", json={"code": location.fragment[9:]})


def token_of(api: ApiHarness, provider: Glewlwyd, tenant: str, name: str) -> str:
    answer = exchange(api, sign_in(api, provider, tenant, name))
    assert answer.status_code == 200, answer.text
    assert answer.json()["token_type"] == "bearer"
    return str(answer.json()["access_token"])


def me(api: ApiHarness, bearer: str) -> Any:
    return api.client.get("/auth/me", headers={"Authorization": f"Bearer {bearer}"})


def usernames(api: ApiHarness, admin: ApiUser) -> set[str]:
    answer = api.client.get("/users", headers=admin.headers)
    assert answer.status_code == 200, answer.text
    return {user["username"] for user in answer.json()["data"]}


def audit_actions(api: ApiHarness, admin: ApiUser) -> list[dict[str, Any]]:
    answer = api.client.get("/audit", params={"limit": 100}, headers=admin.headers)
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["data"]
    return entries


# --- configuration ---------------------------------------------------------------------------


def test_the_configuration_is_shown_without_its_secret(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    shown = api.client.get("/sso", headers=acme.headers)
    assert shown.status_code == 200
    body = shown.json()
    assert body["issuer"] == provider.issuer and body["client_id"] == "rag-a"
    assert body["client_secret_set"] is True and "client_secret" not in body
    assert SECRET_A not in shown.text
    assert body["scopes"] == ["openid", "profile", "email"] and body["groups_claim"] == "groups"
    option = api.client.get("/auth/sso/options", params={"organisation": "acme"})
    assert option.json() == {
        "tenant_id": "acme",
        "provider_name": "Acme Login",
        "start_url": "/auth/sso/acme/start?next=/",
        "password_login": True,
    }


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"issuer": "http://127.0.0.1:9/nothing-here"}, "cannot use this issuer"),
        ({"scopes": ["profile"]}, "openid"),
        ({"role_groups": {"owner": ["x"]}}, "role_groups"),
        ({"allowed_domains": ["not a domain"]}, "domain"),
        ({"audience": None}, "audience"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_bad_configuration_is_refused_with_what_is_wrong(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser, changes: dict[str, Any], fragment: str
) -> None:
    answer = api.client.put("/sso", json=acme_settings(provider, **changes), headers=acme.headers)
    body = assert_error_body(answer, 422)
    assert fragment in answer.text, body


def test_only_admins_configure_and_only_people(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    member = api.add_user("acme", role="member")
    answer = api.client.put("/sso", json=acme_settings(provider), headers=member.headers)
    assert_error_body(answer, 403, "forbidden")
    key = api.client.post("/auth/keys", json={"name": "ci", "role": "admin"}, headers=acme.headers)
    assert key.status_code == 201, key.text
    with_key = {"Authorization": f"Bearer {key.json()['key']}"}
    answer = api.client.put("/sso", json=acme_settings(provider), headers=with_key)
    assert_error_body(answer, 403, "api_key_not_allowed")


def test_a_second_tenant_cannot_take_the_same_issuer_and_audience(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    gamma = api.add_user("gamma", role="admin")
    body = acme_settings(provider, client_id="rag-b", client_secret=SECRET_B)
    answer = api.client.put("/sso", json=body, headers=gamma.headers)
    assert_error_body(answer, 409, "conflict")
    assert "audience" in answer.json()["error"]["message"]


# --- the Authorization Code flow -------------------------------------------------------------


def test_a_person_signs_in_through_the_provider_and_is_provisioned(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    location = start(api, "acme")
    query = parse_qs(urlsplit(location).query)
    assert location.startswith(f"{provider.issuer}/auth?")
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["redirect_uri"] == [CALLBACK] and query["client_id"] == ["rag-a"]
    assert query["state"][0] and query["nonce"][0] and query["state"] != query["nonce"]
    answer = callback(api, provider.authorize(location, "ada", PEOPLE["ada"][0]))
    assert answer.headers["location"].startswith("/#sso_code=")
    issued = exchange(api, answer)
    assert issued.status_code == 200 and issued.json()["expires_in"] == api.settings.jwt_ttl_s
    who = me(api, issued.json()["access_token"]).json()
    assert (who["username"], who["role"], who["tenant_id"]) == ("ada@acme.example", "admin", "acme")
    assert "ada@acme.example" in usernames(api, acme)
    actions = [entry["action"] for entry in audit_actions(api, acme)]
    assert (
        "sso.provisioned" in actions and "sso.signed_in" in actions and "sso.configured" in actions
    )


def test_the_exchange_code_works_once(api: ApiHarness, provider: Glewlwyd, acme: ApiUser) -> None:
    answer = sign_in(api, provider, "acme", "bob")
    assert exchange(api, answer).status_code == 200
    again = exchange(api, answer)
    assert_error_body(again, 401, "unauthorized")
    assert "already used" in again.json()["error"]["message"]


def test_a_replayed_state_is_refused(api: ApiHarness, provider: Glewlwyd, acme: ApiUser) -> None:
    back = provider.authorize(start(api, "acme"), "bob", PEOPLE["bob"][0])
    assert callback(api, back).status_code == 302
    replay = callback(api, back)
    assert replay.status_code == 400
    assert "expired or was already used" in replay.text and "Traceback" not in replay.text
    forged = api.client.get("/auth/sso/callback", params={"state": "made-up", "code": "x"})
    assert forged.status_code == 400 and "Start again" in forged.text


def test_a_code_the_provider_already_redeemed_is_refused(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    first = provider.authorize(start(api, "acme"), "bob", PEOPLE["bob"][0])
    used_code = parse_qs(urlsplit(first).query)["code"][0]
    assert callback(api, first).status_code == 302
    fresh_state = parse_qs(urlsplit(start(api, "acme")).query)["state"][0]
    answer = api.client.get("/auth/sso/callback", params={"state": fresh_state, "code": used_code})
    assert answer.status_code == 400
    assert "expired or was already used" in answer.text


def test_a_denied_consent_is_a_page_that_says_so(api: ApiHarness, acme: ApiUser) -> None:
    state = parse_qs(urlsplit(start(api, "acme")).query)["state"][0]
    answer = api.client.get("/auth/sso/callback", params={"state": state, "error": "access_denied"})
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("text/html")
    assert "cancelled at Acme Login" in answer.text


def test_next_may_not_lead_to_another_origin(api: ApiHarness, acme: ApiUser) -> None:
    for target in ("//evil.example/", "https://evil.example/steal"):
        answer = api.client.get(
            "/auth/sso/acme/start", params={"next": target}, follow_redirects=False
        )
        assert answer.status_code == 400 and "location" not in answer.headers
        assert "must be a page of this site" in answer.text


def test_next_is_where_the_person_lands(api: ApiHarness, provider: Glewlwyd, acme: ApiUser) -> None:
    back = provider.authorize(start(api, "acme", "/?from=mail"), "bob", PEOPLE["bob"][0])
    assert callback(api, back).headers["location"].startswith("/?from=mail#sso_code=")


def test_a_person_with_no_mapped_role_is_refused_and_not_created(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    answer = sign_in(api, provider, "acme", "eve")
    assert answer.status_code == 403
    assert "none of the groups" in answer.text
    assert "eve@acme.example" not in usernames(api, acme)
    refused = [e for e in audit_actions(api, acme) if e["action"] == "sso.refused"]
    assert any(entry["detail"].get("reason") == "no_role" for entry in refused)


def test_leaving_a_provider_group_takes_the_role_away_at_the_next_sign_in(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    join_acme(provider, "fay", "rag-admins")
    assert me(api, token_of(api, provider, "acme", "fay")).json()["role"] == "admin"
    provider.set_groups("fay", ["rag-members"])
    assert me(api, token_of(api, provider, "acme", "fay")).json()["role"] == "member"
    changed = [e for e in audit_actions(api, acme) if e["action"] == "sso.role_changed"]
    assert changed and changed[0]["detail"]["role"] == ["admin", "member"]
    provider.set_groups("fay", [])
    assert sign_in(api, provider, "acme", "fay").status_code == 403  # no role left: refused


def test_leaving_a_provider_group_leaves_the_mapped_tenant_group_at_the_next_sign_in(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    made = api.client.post("/groups", json={"name": "staff"}, headers=acme.headers)
    assert made.status_code == 201, made.text
    join_acme(provider, "hal", "rag-members")
    hal = me(api, token_of(api, provider, "acme", "hal")).json()["user_id"]

    def staff() -> list[str]:
        found = api.client.get(f"/groups/{made.json()['group_id']}", headers=acme.headers)
        assert found.status_code == 200, found.text
        members: list[str] = found.json()["members"]
        return members

    assert hal in staff()  # group_map: rag-members -> staff
    provider.set_groups("hal", ["rag-admins"])
    assert me(api, token_of(api, provider, "acme", "hal")).json()["role"] == "admin"
    assert hal not in staff()
    removed = [e for e in audit_actions(api, acme) if e["action"] == "group.member_removed"]
    assert removed and removed[0]["detail"]["user_id"] == hal


def test_a_disabled_local_user_is_refused(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    join_acme(provider, "gus", "rag-members")
    who = me(api, token_of(api, provider, "acme", "gus")).json()
    patched = api.client.patch(
        f"/users/{who['user_id']}", json={"disabled": True}, headers=acme.headers
    )
    assert patched.status_code == 200, patched.text
    answer = sign_in(api, provider, "acme", "gus")
    assert answer.status_code == 403 and "disabled" in answer.text


def test_allowed_domains_refuse_other_addresses(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    body = acme_settings(provider, allowed_domains=["acme.example"])
    body.pop("client_secret")  # kept from before
    assert api.client.put("/sso", json=body, headers=acme.headers).status_code == 200
    try:
        answer = sign_in(api, provider, "acme", "dan")
        assert answer.status_code == 403 and "domain" in answer.text
        option = api.client.get("/auth/sso/options", params={"email": "someone@acme.example"})
        assert option.status_code == 200 and option.json()["tenant_id"] == "acme"
    finally:
        body["allowed_domains"] = []
        assert api.client.put("/sso", json=body, headers=acme.headers).status_code == 200


def test_an_unreachable_provider_is_a_503_page(api: ApiHarness, acme: ApiUser) -> None:
    store = api.container.single_sign_on._store  # set up what PUT /sso refuses to store
    stored = store.config("acme")
    assert stored is not None
    from app.services.audit import Actor

    store.put_config(
        "delta",
        "http://127.0.0.1:9/gone",
        "rag-d",
        stored.client_secret_encrypted,
        {"scopes": ["openid"]},
        Actor("delta", None, None).entry("sso.configured"),
    )
    answer = api.client.get("/auth/sso/delta/start", follow_redirects=False)
    assert answer.status_code == 503
    assert "cannot be reached" in answer.text and "Traceback" not in answer.text
    # the same after the person comes back while the provider went away
    store.add_pending(
        "state-of-delta",
        PendingSignIn("delta", "n", "v" * 43, CALLBACK, "/", stored.updated_at.replace(year=2999)),
    )
    answer = api.client.get("/auth/sso/callback", params={"state": "state-of-delta", "code": "c"})
    assert answer.status_code == 503 and "cannot be reached" in answer.text


# --- password sign-in and break-glass admins -------------------------------------------------


def test_password_sign_in_off_leaves_only_break_glass_admins(
    api: ApiHarness, provider: Glewlwyd, beta: ApiUser
) -> None:
    from app.cli import _set_break_glass

    member = api.add_user("beta", login=False, role="member")
    refused = api.client.post(
        "/auth/token", data={"username": member.username, "password": member.password}
    )
    assert_error_body(refused, 401, "unauthorized")
    assert "identity provider" in refused.json()["error"]["message"]
    _set_break_glass(api.container, "beta", beta.username, True)
    assert api.login(beta.username, beta.password)
    option = api.client.get("/auth/sso/options", params={"organisation": "beta"}).json()
    assert option["password_login"] is False


# --- the provider's access tokens on the API -------------------------------------------------


def test_a_password_grant_access_token_acts_with_its_mapped_role(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    bearer = provider.password_token("rag-a", SECRET_A, "bob", PEOPLE["bob"][0], "rag-api")
    who = me(api, bearer)
    assert who.status_code == 200, who.text
    assert (who.json()["tenant_id"], who.json()["role"]) == ("acme", "member")
    assert (
        api.client.get("/documents", headers={"Authorization": f"Bearer {bearer}"}).status_code
        == 200
    )
    assert (
        api.client.get("/users", headers={"Authorization": f"Bearer {bearer}"}).status_code == 403
    )


def test_a_client_credentials_token_gets_the_default_role(
    api: ApiHarness, provider: Glewlwyd, beta: ApiUser
) -> None:
    bearer = provider.client_credentials_token("rag-b", SECRET_B, "rag-b-api")
    who = me(api, bearer)
    assert who.status_code == 200, who.text
    assert (who.json()["tenant_id"], who.json()["role"]) == ("beta", "reader")


def test_a_token_of_one_tenants_provider_never_acts_in_another(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser, beta: ApiUser
) -> None:
    for_acme = provider.password_token("rag-a", SECRET_A, "bob", PEOPLE["bob"][0], "rag-api")
    for_beta = provider.password_token("rag-b", SECRET_B, "bob", PEOPLE["bob"][0], "rag-b-api")
    assert me(api, for_acme).json()["tenant_id"] == "acme"
    assert me(api, for_beta).json()["tenant_id"] == "beta"
    acme_id = me(api, for_acme).json()["user_id"]
    beta_id = me(api, for_beta).json()["user_id"]
    assert acme_id != beta_id, "the same person is a different user in each tenant"
    # tenant beta's admin cannot reach acme's user, whatever the token says
    assert (
        api.client.patch(
            f"/users/{acme_id}", json={"role": "reader"}, headers=beta.headers
        ).status_code
        == 404
    )


def test_a_provider_token_for_another_audience_is_refused(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    # A token meant for the provider's own userinfo (aud: its scopes) is not one for this API.
    bearer = provider.password_token("rag-a", SECRET_A, "bob", PEOPLE["bob"][0], "openid")
    assert_error_body(me(api, bearer), 401, "unauthorized")


def test_a_token_signed_by_someone_else_is_refused(
    api: ApiHarness, provider: Glewlwyd, acme: ApiUser
) -> None:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    genuine = provider.password_token("rag-a", SECRET_A, "bob", PEOPLE["bob"][0], "rag-api")
    claims = jwt.decode(genuine, options={"verify_signature": False})
    header = jwt.get_unverified_header(genuine)
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(
        {**claims, "sub": "someone-else"}, attacker, "RS256", headers={"kid": header["kid"]}
    )
    assert_error_body(me(api, forged), 401, "unauthorized")


# --- secrets ---------------------------------------------------------------------------------


def test_the_secret_and_tokens_never_reach_the_database_logs_or_audit(
    api: ApiHarness,
    provider: Glewlwyd,
    acme: ApiUser,
    beta: ApiUser,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    answer = sign_in(api, provider, "acme", "bob")
    code = urlsplit(answer.headers["location"]).fragment[9:]
    bearer = exchange(api, answer).json()["access_token"]
    provider_token = provider.password_token("rag-a", SECRET_A, "bob", PEOPLE["bob"][0], "rag-api")
    assert me(api, provider_token).status_code == 200
    body = acme_settings(provider)
    assert api.client.put("/sso", json=body, headers=acme.headers).status_code == 200
    database = Path(api.settings.data_dir).glob("*.db*")
    stored = b"".join(path.read_bytes() for path in database)
    assert stored, "the SQLite database files were not found"
    audit = str(audit_actions(api, acme)) + str(audit_actions(api, beta))
    for secret in (SECRET_A, SECRET_B, code, bearer, provider_token):
        assert secret.encode() not in stored
        assert secret not in caplog.text
        assert secret not in audit


def test_without_a_secrets_key_production_refuses_to_store_the_secret(
    api_factory: ApiFactory, provider: Glewlwyd
) -> None:
    production = api_factory(start_workers=False, sso_allow_http=True, env="production")
    admin = production.add_user("acme")
    answer = production.client.put("/sso", json=acme_settings(provider), headers=admin.headers)
    body = assert_error_body(answer, 500, "secrets_key_missing")
    assert "RAG_SECRETS_KEY is not set" in body["message"] and SECRET_A not in answer.text
    assert production.client.get("/sso", headers=admin.headers).status_code == 404


def test_starting_sign_ins_counts_against_the_clients_login_budget(
    api_factory: ApiFactory, provider: Glewlwyd
) -> None:
    limited = api_factory(
        start_workers=False,
        sso_allow_http=True,
        secrets_key=Fernet.generate_key().decode(),
        rate_limit_auth_per_minute=2,
    )
    admin = limited.add_user("acme", login=False)
    assert (
        limited.client.put("/sso", json=acme_settings(provider), headers=admin.headers).status_code
        == 200
    )
    assert [start(limited, "acme") for _ in range(2)]
    flood = limited.client.get("/auth/sso/acme/start", follow_redirects=False)
    assert flood.status_code == 429 and int(flood.headers["retry-after"]) >= 1
    assert "Wait a minute" in flood.text
