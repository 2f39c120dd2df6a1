"""Passwords (bcrypt, 72-byte limit) and access tokens (JWT attacks), without a database."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import security
from app.config import Settings, load_settings
from app.errors import AuthenticationFailed, ConfigurationError, InvalidInput
from tests.bcrypt_cost import bcrypt_cost

pytestmark = pytest.mark.unit

SECRET = "k3Jd9vQ2mZx7Lp4Rt8Wn1Ys6Bc5Hf0Ga-secure-enough-for-HS512-as-well-0042"
OTHER_SECRET = "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4-another-one"
ISSUER, AUDIENCE, TTL = "rag-service", "rag-api", 600


def codec(secret: str = SECRET, issuer: str = ISSUER, audience: str = AUDIENCE) -> Any:
    return security.TokenCodec(secret, issuer, audience, TTL)


def b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(segment: str) -> dict[str, Any]:
    padded = segment + "=" * (-len(segment) % 4)
    result: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return result


def valid_claims(**changes: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": "usr_1",
        "tenant_id": "acme",
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(seconds=TTL),
        "iss": ISSUER,
        "aud": AUDIENCE,
        "jti": "abc123",
        "sv": 0,
    }
    claims.update(changes)
    return claims


# --- tokens -------------------------------------------------------------------------------------


def test_issued_token_verifies_to_the_same_user_and_tenant() -> None:
    issued = codec().issue("usr_1", "acme")
    claims = codec().verify(issued.access_token)
    assert (claims.user_id, claims.tenant_id) == ("usr_1", "acme")
    assert issued.expires_in == TTL
    header = unb64(issued.access_token.split(".")[0])
    assert header["alg"] == "HS256"
    payload = unb64(issued.access_token.split(".")[1])
    assert set(security.REQUIRED_CLAIMS) <= set(payload)
    assert payload["exp"] - payload["iat"] == TTL


def test_every_token_has_its_own_id() -> None:
    first, second = codec().issue("usr_1", "acme"), codec().issue("usr_1", "acme")
    assert (
        codec().verify(first.access_token).token_id != codec().verify(second.access_token).token_id
    )


def _alg_none() -> str:
    claims = {
        k: int(v.timestamp()) if isinstance(v, datetime) else v for k, v in valid_claims().items()
    }
    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}."


def _other_key() -> str:
    return jwt.encode(valid_claims(), OTHER_SECRET, algorithm="HS256")


def _changed_tenant() -> str:
    header, payload, signature = codec().issue("usr_1", "acme").access_token.split(".")
    claims = unb64(payload)
    claims["tenant_id"] = "victim"
    return f"{header}.{b64(claims)}.{signature}"


def _wrong_audience() -> str:
    return codec(audience="another-api").issue("usr_1", "acme").access_token


def _wrong_issuer() -> str:
    return codec(issuer="someone-else").issue("usr_1", "acme").access_token


def _expired() -> str:
    long_ago = datetime.now(UTC) - timedelta(seconds=TTL + 60)
    return codec().issue("usr_1", "acme", now=long_ago).access_token


def _not_yet_valid() -> str:
    return codec().issue("usr_1", "acme", now=datetime.now(UTC) + timedelta(hours=1)).access_token


def _other_hmac_algorithm() -> str:
    return jwt.encode(valid_claims(), SECRET, algorithm="HS512")


def _ten_year_lifetime() -> str:
    # Signed with the real secret (a leaked one): every check but the lifetime passes.
    now = datetime.now(UTC)
    return jwt.encode(valid_claims(exp=now + timedelta(days=3650)), SECRET, algorithm="HS256")


def _garbage() -> str:
    return "not.a.token"


ATTACKS: dict[str, Callable[[], str]] = {
    "alg_none": _alg_none,
    "other_key": _other_key,
    "changed_tenant": _changed_tenant,
    "wrong_audience": _wrong_audience,
    "wrong_issuer": _wrong_issuer,
    "expired": _expired,
    "nbf_in_future": _not_yet_valid,
    "hs512_same_key": _other_hmac_algorithm,
    "ten_year_lifetime": _ten_year_lifetime,
    "garbage": _garbage,
}


@pytest.mark.parametrize("attack", ATTACKS, ids=list(ATTACKS))
def test_forged_or_invalid_tokens_are_rejected_with_one_error(attack: str) -> None:
    token = ATTACKS[attack]()
    with pytest.raises(AuthenticationFailed) as caught:
        codec().verify(token)
    assert caught.value.message == security.INVALID_TOKEN_MESSAGE
    assert caught.value.http_status == 401


@pytest.mark.parametrize(
    ("lifetime_s", "accepted"),
    [(TTL, True), (TTL + 60, True), (TTL + 61, False), (TTL * 2, False)],
)
def test_a_token_may_live_the_configured_lifetime_and_a_minute_more(
    lifetime_s: int, accepted: bool
) -> None:
    now = datetime.now(UTC)
    token = jwt.encode(
        valid_claims(iat=now, exp=now + timedelta(seconds=lifetime_s)), SECRET, algorithm="HS256"
    )
    if accepted:
        assert codec().verify(token).user_id == "usr_1"
    else:
        with pytest.raises(AuthenticationFailed):
            codec().verify(token)


@pytest.mark.parametrize("missing", security.REQUIRED_CLAIMS)
def test_a_token_missing_any_required_claim_is_rejected(missing: str) -> None:
    claims = valid_claims()
    del claims[missing]
    token = jwt.encode(claims, SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed):
        codec().verify(token)


@pytest.mark.parametrize("claim", ["sub", "tenant_id", "jti"])
def test_empty_identity_claims_are_rejected(claim: str) -> None:
    token = jwt.encode(valid_claims(**{claim: ""}), SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed):
        codec().verify(token)


@pytest.mark.parametrize("version", ["0", None, True, 1.5])
def test_a_session_version_that_is_not_an_integer_is_rejected(version: Any) -> None:
    token = jwt.encode(valid_claims(sv=version), SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationFailed):
        codec().verify(token)


def test_the_session_version_travels_in_the_token() -> None:
    issued = codec().issue("usr_1", "acme", session_version=7)
    assert codec().verify(issued.access_token).session_version == 7


# --- API keys ------------------------------------------------------------------------------------


def test_api_keys_carry_the_prefix_and_256_random_bits() -> None:
    keys = {security.new_api_key() for _ in range(200)}
    assert len(keys) == 200
    for key in keys:
        assert security.API_KEY_PATTERN.fullmatch(key), key
        assert security.is_api_key(key)
        body = key.removeprefix(security.API_KEY_PREFIX)
        assert len(base64.urlsafe_b64decode(body + "=")) * 8 >= 256


def test_a_key_hash_depends_on_the_server_secret_and_hides_the_key() -> None:
    key = security.new_api_key()
    first, second = security.ApiKeyHasher(b"one" * 11), security.ApiKeyHasher(b"two" * 11)
    assert first.hash(key) == first.hash(key)
    assert first.hash(key) != second.hash(key)
    assert key not in first.hash(key) and len(first.hash(key)) == 64


def test_the_key_secret_is_derived_from_the_jwt_secret_unless_set() -> None:
    base = {"_env_file": None, "env": "production", "jwt_secret": SECRET}
    derived = security.resolve_api_key_secret(load_settings(**base))
    assert derived != SECRET.encode() and len(derived) == 32
    own = "another-strong-secret-for-api-keys-7Hq2Lm9Vx4Bn8Pc3"
    assert security.resolve_api_key_secret(load_settings(**base, api_key_secret=own)) == (
        own.encode()
    )
    with pytest.raises(ConfigurationError, match="RAG_API_KEY_SECRET"):
        security.resolve_api_key_secret(load_settings(**base, api_key_secret="changeme"))


# --- the signing key ----------------------------------------------------------------------------


def production(secret: str) -> Settings:
    return load_settings(_env_file=None, env="production", jwt_secret=secret)


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "   ",
        "secret",
        "change-me",
        "changeme",
        "CHANGE_ME_BEFORE_DEPLOYING_THIS_SERVICE_0123456789",
        "an-example-secret-that-is-long-enough-to-pass",
        "placeholder-placeholder-placeholder-1234",
        "tooShort-but-random-9f8e7d",
        "a" * 64,
    ],
)
def test_production_refuses_a_weak_secret_naming_the_variable(secret: str) -> None:
    with pytest.raises(ConfigurationError, match="RAG_JWT_SECRET"):
        security.resolve_jwt_secret(production(secret))
    with pytest.raises(ConfigurationError):
        security.build_token_codec(production(secret))


def test_production_uses_a_strong_secret_as_given() -> None:
    assert security.resolve_jwt_secret(production(SECRET)) == SECRET


def test_development_replaces_a_weak_secret_with_a_random_one_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dev = load_settings(_env_file=None, env="development", jwt_secret="change-me")
    with caplog.at_level(logging.WARNING, logger="app.security"):
        first = security.resolve_jwt_secret(dev)
    assert "RAG_JWT_SECRET" in caplog.text
    assert first != "change-me" and len(first.encode()) >= security.MIN_SECRET_BYTES
    # Per process, not per call: tokens issued by one request verify in the next.
    assert security.resolve_jwt_secret(dev) == first
    token = security.build_token_codec(dev).issue("usr_1", "acme").access_token
    assert security.build_token_codec(dev).verify(token).tenant_id == "acme"


# --- passwords ----------------------------------------------------------------------------------


def test_hash_records_the_configured_cost_of_at_least_12() -> None:
    rounds = load_settings(_env_file=None).bcrypt_rounds
    assert rounds >= 12
    password_hash = security.hash_password("correct horse battery", rounds)
    assert bcrypt_cost(password_hash) == rounds
    assert security.verify_password("correct horse battery", password_hash)
    assert not security.verify_password("correct horse battery!", password_hash)


def test_configuration_refuses_a_bcrypt_cost_below_12() -> None:
    with pytest.raises(ConfigurationError, match="RAG_BCRYPT_ROUNDS"):
        load_settings(_env_file=None, bcrypt_rounds=11)


def test_a_password_of_exactly_72_bytes_is_accepted() -> None:
    password = "p" * 72
    assert security.verify_password(password, security.hash_password(password, 4))


@pytest.mark.parametrize("password", ["p" * 73, "é" * 37, "🔑" * 19])
def test_a_password_over_72_utf8_bytes_is_rejected_with_the_reason(password: str) -> None:
    with pytest.raises(InvalidInput, match="72"):
        security.hash_password(password, 4)


def test_bytes_after_the_72nd_are_never_silently_ignored() -> None:
    stored = security.hash_password("x" * 72, 4)
    # bcrypt itself would compare only the first 72 bytes, so this would match if truncated.
    assert not security.verify_password("x" * 72 + "anything", stored)


@pytest.mark.parametrize("bad_hash", ["", "plain-text", "$2b$12$short", "ünïcode"])
def test_a_malformed_stored_hash_never_verifies(bad_hash: str) -> None:
    assert not security.verify_password("whatever password", bad_hash)


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda p: len(p.encode()) <= 71))
def test_only_the_exact_password_verifies(password: str) -> None:
    stored = security.hash_password(password, 4)
    assert security.verify_password(password, stored)
    assert not security.verify_password(password + "x", stored)


def test_the_dummy_hash_costs_the_same_as_real_ones() -> None:
    assert bcrypt_cost(security.dummy_hash(12)) == 12
    assert security.dummy_hash(12) == security.dummy_hash(12)
