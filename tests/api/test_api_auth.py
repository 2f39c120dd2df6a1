"""Tokens and logins: forged, tampered and expired tokens are 401; a failed login says nothing."""

from __future__ import annotations

import base64
import json
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest

from app import security
from tests.api.harness import TEST_JWT_SECRET, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

INVALID_TOKEN = {"error": {"code": "unauthorized", "message": "invalid or expired token"}}


@pytest.fixture(scope="module")
def alice(api: ApiHarness) -> ApiUser:
    return api.add_user("auth-a")


@pytest.fixture(scope="module")
def bob(api: ApiHarness) -> ApiUser:
    return api.add_user("auth-b")


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(segment: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _claims(api: ApiHarness, user: ApiUser, **changes: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": user.user_id,
        "tenant_id": user.tenant,
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(minutes=5),
        "iss": api.settings.jwt_issuer,
        "aud": api.settings.jwt_audience,
        "jti": "a1b2c3",
        "sv": 0,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _sign(claims: dict[str, Any], key: str = TEST_JWT_SECRET, alg: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=alg)


def _stats(api: ApiHarness, token: str) -> Any:
    return api.client.get("/stats", headers={"Authorization": f"Bearer {token}"})


def test_a_token_signed_with_the_service_key_works(api: ApiHarness, alice: ApiUser) -> None:
    # The control for every attack below: only the one change makes them fail.
    assert _stats(api, _sign(_claims(api, alice))).status_code == 200
    assert _stats(api, alice.token).status_code == 200


@pytest.fixture(scope="module")
def attacks(api: ApiHarness, alice: ApiUser, bob: ApiUser) -> dict[str, str]:
    valid = _sign(_claims(api, alice))
    with warnings.catch_warnings():  # PyJWT warns that the key is short for HS512: the point
        warnings.simplefilter("ignore")
        hs512 = _sign(_claims(api, alice), alg="HS512")
    header, payload, signature = valid.split(".")
    tampered = _unb64(payload) | {"tenant_id": bob.tenant}
    past = datetime.now(UTC) - timedelta(hours=2)
    return {
        "alg-none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{payload}.",
        "alg-none-with-signature": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{payload}.{signature}",
        "another-key": _sign(_claims(api, alice), key="another-key-that-is-also-32-bytes-long!"),
        "hs512-with-service-key": hs512,
        "tenant-claim-changed": f"{header}.{_b64(tampered)}.{signature}",
        "tenant-claim-resigned": _sign(_claims(api, alice, tenant_id=bob.tenant)),
        "user-of-other-tenant": _sign(_claims(api, bob, tenant_id=alice.tenant)),
        "wrong-audience": _sign(_claims(api, alice, aud="another-api")),
        "wrong-issuer": _sign(_claims(api, alice, iss="someone-else")),
        "expired": _sign(_claims(api, alice, iat=past, nbf=past, exp=past + timedelta(hours=1))),
        "not-yet-valid": _sign(_claims(api, alice, nbf=datetime.now(UTC) + timedelta(hours=1))),
        "no-jti": _sign(_claims(api, alice, jti=None)),
        "no-exp": _sign(_claims(api, alice, exp=None)),
        "no-tenant": _sign(_claims(api, alice, tenant_id=None)),
        "unknown-user": _sign(_claims(api, alice, sub="usr_doesnotexist")),
        "empty-tenant": _sign(_claims(api, alice, tenant_id="")),
        "truncated-signature": valid[:-4],
    }


ATTACKS = [
    "alg-none",
    "alg-none-with-signature",
    "another-key",
    "hs512-with-service-key",
    "tenant-claim-changed",
    "tenant-claim-resigned",
    "user-of-other-tenant",
    "wrong-audience",
    "wrong-issuer",
    "expired",
    "not-yet-valid",
    "no-jti",
    "no-exp",
    "no-tenant",
    "unknown-user",
    "empty-tenant",
    "truncated-signature",
]


def test_every_attack_is_tested(attacks: dict[str, str]) -> None:
    assert sorted(attacks) == sorted(ATTACKS)


@pytest.mark.parametrize("attack", ATTACKS)
def test_forged_or_tampered_tokens_get_one_generic_401(
    api: ApiHarness, attacks: dict[str, str], attack: str
) -> None:
    token = attacks[attack]
    for response in (
        _stats(api, token),
        api.client.post(
            "/search", json={"query": "x"}, headers={"Authorization": f"Bearer {token}"}
        ),
    ):
        assert_error_body(response, 401, "unauthorized")
        assert response.json() == INVALID_TOKEN
        assert response.headers["www-authenticate"] == "Bearer"


def test_a_deleted_users_token_stops_working(api: ApiHarness) -> None:
    carol = api.add_user("auth-c")
    assert _stats(api, carol.token).status_code == 200
    assert api.container.users.delete_user(carol.username)
    assert _stats(api, carol.token).json() == INVALID_TOKEN


def test_unknown_user_and_wrong_password_give_the_identical_401(
    api: ApiHarness, alice: ApiUser
) -> None:
    attempts = {
        "wrong-password": {"username": alice.username, "password": "wrong password here"},
        "unknown-user": {"username": "nobody-here", "password": "wrong password here"},
        "over-72-bytes": {"username": alice.username, "password": "é" * 40},
        "case-and-space": {"username": f"  {alice.username.upper()} ", "password": "nope"},
    }
    bodies = {}
    for name, form in attempts.items():
        response = api.client.post("/auth/token", data=form)
        assert_error_body(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
        bodies[name] = response.json()
    assert len({json.dumps(body) for body in bodies.values()}) == 1, bodies
    assert "access_token" not in json.dumps(bodies)


def test_login_is_case_insensitive_on_the_user_name(api: ApiHarness, alice: ApiUser) -> None:
    token = api.login(f" {alice.username.upper()} ", alice.password)
    assert _stats(api, token).status_code == 200


def test_unknown_user_costs_a_password_check_too(
    api: ApiHarness, alice: ApiUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same work, so the same time: one bcrypt check at the configured cost whether the user
    # exists or not (a missing dummy hash would make unknown users ~100x faster).
    costs: list[str] = []
    real_checkpw = security.bcrypt.checkpw

    def counted(password: bytes, hashed: bytes) -> bool:
        costs.append(hashed.decode("ascii").split("$")[2])  # "$2b$12$...": the cost
        return bool(real_checkpw(password, hashed))

    monkeypatch.setattr(security.bcrypt, "checkpw", counted)
    cost = f"{api.settings.bcrypt_rounds:02d}"
    for username in (alice.username, "nobody-at-all", "no such name!"):
        costs.clear()
        response = api.client.post(
            "/auth/token", data={"username": username, "password": "wrong password here"}
        )
        assert_error_body(response, 401)
        assert costs == [cost], (username, costs)


def test_issued_token_has_every_required_claim(api: ApiHarness, alice: ApiUser) -> None:
    claims = jwt.decode(
        alice.token, TEST_JWT_SECRET, algorithms=["HS256"], audience=api.settings.jwt_audience
    )
    assert {"sub", "tenant_id", "exp", "iat", "nbf", "iss", "aud", "jti"} <= set(claims)
    assert claims["tenant_id"] == alice.tenant and claims["sub"] == alice.user_id
    assert claims["exp"] - claims["iat"] == api.settings.jwt_ttl_s
    assert jwt.get_unverified_header(alice.token)["alg"] == "HS256"
