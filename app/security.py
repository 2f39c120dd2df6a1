"""Password hashing (bcrypt), access tokens (JWT, HS256) and API keys (HMAC-SHA256 hashes).

Passwords longer than bcrypt's 72-byte input limit are rejected when set, with a message, rather
than silently truncated (bcrypt would otherwise ignore everything after byte 72) or pre-hashed
(which would make the stored hashes depend on a non-standard wrapper). At login such a password
cannot match any stored hash, so it is verified against a dummy hash and fails in the same time.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import bcrypt
import jwt

from app.config import Settings
from app.errors import AuthenticationFailed, ConfigurationError, InvalidInput

log = logging.getLogger(__name__)

BCRYPT_MAX_BYTES = 72
MIN_SECRET_BYTES = 32
JWT_ALGORITHM = "HS256"
# `sv`: the user's session version when the token was issued; a later bump ends the token.
REQUIRED_CLAIMS = ("sub", "tenant_id", "exp", "iat", "nbf", "iss", "aud", "jti", "sv")
INVALID_TOKEN_MESSAGE = "invalid or expired token"
# A token may live RAG_JWT_TTL_S (exp - iat) and this much more, for a clock or rounding
# difference; anything longer was not issued by this service, whatever its signature says.
JWT_LIFETIME_SKEW_S = 60

# Secrets copied from examples or left as placeholders; matched case-insensitively.
_PLACEHOLDER_WORDS = ("change", "example", "placeholder", "replace", "dummy", "default")
_WEAK_SECRETS = {"secret", "password", "jwt-secret", "jwtsecret", "test", "dev", "development"}


# --- passwords -------------------------------------------------------------------------------


def check_password_length(password: str) -> bytes:
    """The password as UTF-8, or InvalidInput when bcrypt could not use all of it."""
    encoded = password.encode("utf-8")
    if len(encoded) > BCRYPT_MAX_BYTES:
        raise InvalidInput(
            f"password is {len(encoded)} bytes in UTF-8; the maximum is {BCRYPT_MAX_BYTES} "
            "bytes (a bcrypt limit). Use a shorter password or fewer non-ASCII characters"
        )
    return encoded


def hash_password(password: str, rounds: int) -> str:
    """A bcrypt hash of the password at the given cost (log2 rounds)."""
    encoded = check_password_length(password)
    return bcrypt.hashpw(encoded, bcrypt.gensalt(rounds=rounds)).decode("ascii")


def verify_password(password: str, password_hash: str) -> bool:
    """Whether the password matches the hash; False (not an error) for any malformed input."""
    encoded = password.encode("utf-8")
    # A longer password cannot have been stored (rejected at creation); still pay for one check
    # so the response time does not tell an attacker anything.
    storable = len(encoded) <= BCRYPT_MAX_BYTES
    try:
        matched = bcrypt.checkpw(encoded if storable else b"", password_hash.encode("ascii"))
    except ValueError:
        return False
    return matched and storable


@lru_cache(maxsize=4)
def dummy_hash(rounds: int) -> str:
    """A hash of a random password at the same cost, checked when a user does not exist."""
    return hash_password(secrets.token_urlsafe(16), rounds)


# --- the signing key -------------------------------------------------------------------------


def secret_problem(secret: str) -> str | None:
    """Why a JWT secret is unacceptable in production, or None when it is fine."""
    stripped = secret.strip()
    if not stripped:
        return "it is empty"
    lowered = stripped.lower()
    if lowered in _WEAK_SECRETS or any(word in lowered for word in _PLACEHOLDER_WORDS):
        return "it looks like a placeholder"
    if len(stripped.encode("utf-8")) < MIN_SECRET_BYTES:
        return f"it is shorter than {MIN_SECRET_BYTES} bytes"
    if len(set(stripped)) < 8:
        return "it has too few distinct characters"
    return None


@lru_cache(maxsize=1)
def _process_secret() -> str:
    return secrets.token_urlsafe(48)


def resolve_jwt_secret(settings: Settings) -> str:
    """The signing key from RAG_JWT_SECRET; refuses a weak one outside development."""
    problem = secret_problem(settings.jwt_secret)
    if problem is None:
        return settings.jwt_secret
    if settings.env == "development":
        log.warning(
            "RAG_JWT_SECRET is unusable (%s); using a random secret for this process only. "
            "Tokens will not survive a restart or work across processes",
            problem,
        )
        return _process_secret()
    raise ConfigurationError(
        f"RAG_JWT_SECRET is unusable: {problem}. Generate one with "
        "`python -c 'import secrets; print(secrets.token_urlsafe(48))'` "
        "(or set RAG_ENV=development for a throwaway per-process secret)"
    )


# --- tokens ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuedToken:
    """A signed access token and its lifetime in seconds."""

    access_token: str
    expires_in: int


@dataclass(frozen=True)
class TokenClaims:
    """The verified identity a request acts as."""

    user_id: str
    tenant_id: str
    token_id: str
    expires_at: datetime
    session_version: int = 0


class TokenCodec:
    """Issues and verifies HS256 access tokens with a fixed issuer, audience and lifetime."""

    def __init__(self, secret: str, issuer: str, audience: str, ttl_s: int) -> None:
        self._secret = secret
        self._issuer = issuer
        self._audience = audience
        self._ttl_s = ttl_s

    def issue(
        self,
        user_id: str,
        tenant_id: str,
        now: datetime | None = None,
        session_version: int = 0,
    ) -> IssuedToken:
        """A token for the user of a tenant, valid from now for the configured lifetime."""
        issued = now or datetime.now(UTC)
        claims: dict[str, Any] = {
            "sub": user_id,
            "tenant_id": tenant_id,
            "iat": issued,
            "nbf": issued,
            "exp": issued + timedelta(seconds=self._ttl_s),
            "iss": self._issuer,
            "aud": self._audience,
            "jti": secrets.token_hex(16),
            "sv": session_version,
        }
        token = jwt.encode(claims, self._secret, algorithm=JWT_ALGORITHM)
        return IssuedToken(access_token=token, expires_in=self._ttl_s)

    def verify(self, token: str) -> TokenClaims:
        """The claims of a valid token; AuthenticationFailed (one message) for any defect."""
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[JWT_ALGORITHM],  # pinned: never let the header choose
                audience=self._audience,
                issuer=self._issuer,
                options={"require": list(REQUIRED_CLAIMS)},
            )
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE) from exc
        if claims["exp"] - claims["iat"] > self._ttl_s + JWT_LIFETIME_SKEW_S:
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)  # a long-lived forgery
        subject, tenant, token_id = claims["sub"], claims["tenant_id"], claims["jti"]
        if not all(isinstance(v, str) and v for v in (subject, tenant, token_id)):
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        version = claims["sv"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        return TokenClaims(
            user_id=subject,
            tenant_id=tenant,
            token_id=token_id,
            expires_at=datetime.fromtimestamp(claims["exp"], UTC),
            session_version=version,
        )


def build_token_codec(settings: Settings) -> TokenCodec:
    """The codec configured by settings (raises ConfigurationError for a weak secret)."""
    return TokenCodec(
        secret=resolve_jwt_secret(settings),
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        ttl_s=settings.jwt_ttl_s,
    )


# --- API keys --------------------------------------------------------------------------------

API_KEY_PREFIX = "rag_"
API_KEY_RANDOM_BYTES = 32  # 256 bits
# The prefix and 43 URL-safe base64 characters (32 bytes, unpadded).
API_KEY_PATTERN = re.compile(r"rag_[A-Za-z0-9_-]{43}")
# How much of a key is kept to tell keys apart in lists and the audit log (the prefix + 4).
API_KEY_SHOWN_CHARS = len(API_KEY_PREFIX) + 4
_KEY_DERIVATION_LABEL = b"rag-service api key hashing v1"


def new_api_key() -> str:
    """A fresh key: the `rag_` prefix and 256 random bits."""
    return API_KEY_PREFIX + secrets.token_urlsafe(API_KEY_RANDOM_BYTES)


def is_api_key(credential: str) -> bool:
    """Whether a bearer credential is meant as an API key (a JWT starts with `eyJ`)."""
    return credential.startswith(API_KEY_PREFIX)


class ApiKeyHasher:
    """Keyed hashes of API keys: a stolen table cannot be checked offline without the secret,
    and checking a presented key costs one HMAC (microseconds), unlike bcrypt."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def hash(self, key: str) -> str:
        """The hex HMAC-SHA256 of the key: what the database stores and looks keys up by."""
        return hmac.new(self._secret, key.encode("utf-8"), hashlib.sha256).hexdigest()


def resolve_api_key_secret(settings: Settings) -> bytes:
    """RAG_API_KEY_SECRET, or a key derived from the JWT signing key when it is empty."""
    if settings.api_key_secret:
        problem = secret_problem(settings.api_key_secret)
        if problem is not None and settings.env != "development":
            raise ConfigurationError(f"RAG_API_KEY_SECRET is unusable: {problem}")
        return settings.api_key_secret.encode("utf-8")
    # A separate derived key: a key hash never equals anything signed with the JWT secret.
    jwt_secret = resolve_jwt_secret(settings).encode("utf-8")
    return hmac.new(jwt_secret, _KEY_DERIVATION_LABEL, hashlib.sha256).digest()
