"""Checks of the provider's tokens, as OpenID Connect Core 3.1.3.7 asks of an ID token and RFC
9068 of a JWT access token: the signature by a key from the provider's JWKS under an allow-list
of algorithms (never `none`, never an HMAC keyed with a public key), the issuer, the audience
(and `azp`), expiry, not-before and issued-at with a small clock skew, and the nonce.

Every refusal is a TokenRefused with a short `reason` (for the audit log and metrics) and one
message for the caller, so a forger learns nothing about which check failed.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from typing import Any

import jwt
from jwt import PyJWK

from app.errors import AuthenticationFailed

ALLOWED_ALGORITHMS = ("RS256", "ES256")
# How far the clocks of the provider and this service may disagree.
CLOCK_SKEW_S = 60
REFUSED_MESSAGE = "the identity provider's token is invalid or expired"

# The reason a failed decode is refused for: that of the first kind of error it is.
_DECODE_REFUSALS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid"),
    (jwt.InvalidAudienceError, "audience"),
    (jwt.InvalidIssuerError, "issuer"),
    (jwt.InvalidSignatureError, "signature"),
    (jwt.PyJWTError, "malformed"),
)

# (key id or None, algorithm) -> the provider's key; TokenRefused("unknown_key") when it has none.
KeyLookup = Callable[[str | None, str], PyJWK]


class TokenRefused(AuthenticationFailed):
    """A provider token that fails a check; `reason` says which, for logs and metrics only."""

    def __init__(self, reason: str) -> None:
        super().__init__(REFUSED_MESSAGE)
        self.reason = reason


def unverified_issuer(token: str) -> str | None:
    """The `iss` a JWT claims, unverified (to pick whose keys to check it with), or None."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    issuer = claims.get("iss")
    return issuer if isinstance(issuer, str) else None


def _signed_claims(
    token: str, keys: KeyLookup, issuer: str, audience: str, now: float | None
) -> dict[str, Any]:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenRefused("malformed") from None
    algorithm = header.get("alg")
    if algorithm not in ALLOWED_ALGORITHMS:  # `none`, HS256 (a public key as HMAC secret), ...
        raise TokenRefused("algorithm")
    kid = header.get("kid")
    key = keys(kid if isinstance(kid, str) else None, algorithm)
    if key.algorithm_name != algorithm:
        raise TokenRefused("algorithm")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[algorithm],
            audience=audience,
            issuer=issuer,
            leeway=CLOCK_SKEW_S,
            options={"require": ["iss", "sub", "aud", "exp", "iat"], "verify_iat": True},
        )
    except jwt.PyJWTError as exc:
        reason = next(reason for kind, reason in _DECODE_REFUSALS if isinstance(exc, kind))
        raise TokenRefused(reason) from None
    issued_at = claims["iat"]
    current = time.time() if now is None else now
    if not isinstance(issued_at, int | float) or issued_at > current + CLOCK_SKEW_S:
        raise TokenRefused("not_yet_valid")
    if not isinstance(claims["sub"], str) or not claims["sub"]:
        raise TokenRefused("malformed")
    return claims


def verify_id_token(
    token: str,
    keys: KeyLookup,
    *,
    issuer: str,
    client_id: str,
    nonce: str,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of a valid ID token for this client and sign-in; TokenRefused otherwise."""
    claims = _signed_claims(token, keys, issuer, client_id, now)
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    authorized_party = claims.get("azp")
    # Several audiences need azp naming this client; an azp naming another is refused always.
    if (len(audiences) > 1 or authorized_party is not None) and authorized_party != client_id:
        raise TokenRefused("azp")
    presented = claims.get("nonce")
    if not isinstance(presented, str) or not hmac.compare_digest(presented, nonce):
        raise TokenRefused("nonce")
    return claims


def verify_access_token(
    token: str, keys: KeyLookup, *, issuer: str, audience: str, now: float | None = None
) -> dict[str, Any]:
    """The claims of a valid JWT access token for this audience; TokenRefused otherwise.

    An ID token is not an access token, even when its audience (the client id) is the one
    configured, as with Entra ID's v2 tokens: one with a `nonce`, or typed as an ID token
    (Keycloak's `typ: ID`), is refused."""
    claims = _signed_claims(token, keys, issuer, audience, now)
    if "nonce" in claims or str(claims.get("typ", "")).lower() in ("id", "id_token"):
        raise TokenRefused("token_type")
    return claims
