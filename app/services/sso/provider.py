"""Talking to OpenID providers: discovery, the code exchange, and their signing keys.

Signing keys (JWKS) are cached per issuer for RAG_SSO_JWKS_CACHE_S. A token signed with a key
id the cache does not know makes one refetch (a provider rotated its keys), at most once a
minute per issuer, so a flood of forged key ids cannot hammer the provider. While the provider
is down, keys already fetched keep working until their cache lifetime ends; an unknown key is
refused (fail closed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from app import metrics
from app.errors import ProviderUnreachable
from app.services.sso.tokens import TokenRefused

log = logging.getLogger(__name__)

# The least time between two fetches of one issuer's keys for an unknown key id.
JWKS_REFETCH_S = 60.0
DISCOVERY_PATH = "/.well-known/openid-configuration"
# A discovery document or key set larger than this is not one.
MAX_DOCUMENT_BYTES = 512 * 1024


class ProviderRefused(Exception):
    """The provider refused a request (an expired or reused code, a wrong client secret)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


@dataclass(frozen=True)
class ProviderMetadata:
    """The endpoints of a provider, from its discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None = None


@dataclass
class _KeySet:
    keys: dict[str | None, dict[str, Any]] = field(default_factory=dict)  # kid -> JWK
    fetched_at: float | None = None  # when the keys were last fetched successfully
    tried_at: float = float("-inf")  # when a fetch was last tried


UNREACHABLE = (
    "the organisation's identity provider cannot be reached right now; try again in a minute"
)


class OidcProviders:
    """Discovery documents and key sets of every provider this process talks to."""

    def __init__(
        self,
        timeout_s: float,
        jwks_cache_s: float,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._cache_s = jwks_cache_s
        self._clock = clock
        self._http = httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False)
        self._metadata: dict[str, tuple[float, ProviderMetadata]] = {}
        self._keys: dict[str, _KeySet] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()

    # --- discovery ----------------------------------------------------------------------------

    def metadata(self, issuer: str) -> ProviderMetadata:
        """The provider's endpoints (cached like its keys); ProviderUnreachable when it cannot
        be read and nothing is cached."""
        now = self._clock()
        cached = self._metadata.get(issuer)
        if cached is not None and now - cached[0] < self._cache_s:
            return cached[1]
        try:
            found = self._discover(issuer)
        except ProviderUnreachable:
            if cached is not None:
                return cached[1]
            raise
        self._metadata[issuer] = (now, found)
        return found

    def _discover(self, issuer: str) -> ProviderMetadata:
        url = issuer.rstrip("/") + DISCOVERY_PATH
        document = self._get_json(url)
        announced = document.get("issuer")
        if announced != issuer:
            # OpenID Connect Discovery 4.3: the document must name exactly the configured issuer.
            log.warning("discovery at %s names issuer %r, not %r", url, announced, issuer)
            raise ProviderUnreachable(
                f"the provider's discovery document names the issuer {announced!r}, not "
                f"{issuer!r}: set the issuer exactly as the provider announces it"
            )
        try:
            return ProviderMetadata(
                issuer=issuer,
                authorization_endpoint=_url(document, "authorization_endpoint"),
                token_endpoint=_url(document, "token_endpoint"),
                jwks_uri=_url(document, "jwks_uri"),
                end_session_endpoint=document.get("end_session_endpoint") or None,
            )
        except KeyError as exc:
            raise ProviderUnreachable(
                f"the provider's discovery document has no {exc.args[0]}"
            ) from None

    # --- signing keys -------------------------------------------------------------------------

    def key_lookup(self, issuer: str) -> Callable[[str | None, str], PyJWK]:
        """The key lookup the token checks call for this issuer's tokens."""
        return lambda kid, algorithm: self.signing_key(issuer, kid, algorithm)

    def signing_key(self, issuer: str, kid: str | None, algorithm: str) -> PyJWK:
        """The issuer's key `kid` for `algorithm`; TokenRefused("unknown_key") when the fresh
        key set lacks it (after one refetch, if allowed), or the key does not fit."""
        with self._lock:
            keys = self._keys.setdefault(issuer, _KeySet())
            now = self._clock()
            fresh = keys.fetched_at is not None and now - keys.fetched_at < self._cache_s
            if (not fresh or _find(keys, kid) is None) and now - keys.tried_at >= JWKS_REFETCH_S:
                keys.tried_at = now
                self._refresh(issuer, keys, now)
                fresh = keys.fetched_at is not None and now - keys.fetched_at < self._cache_s
            jwk = _find(keys, kid) if fresh else None
        if jwk is None:
            raise TokenRefused("unknown_key")
        declared = jwk.get("alg")
        if declared is not None and declared != algorithm:
            raise TokenRefused("algorithm")
        try:
            return PyJWK(jwk, algorithm)
        except PyJWKError:  # an RSA key for ES256, an unusable key
            raise TokenRefused("algorithm") from None

    def _refresh(self, issuer: str, keys: _KeySet, now: float) -> None:
        try:
            document = self._get_json(self.metadata(issuer).jwks_uri)
            listed = document.get("keys")
            if not isinstance(listed, list):
                raise ProviderUnreachable("the provider's key set has no keys")
        except ProviderUnreachable as exc:
            metrics.sso_jwks_refresh("failed")
            log.warning("cannot refresh the signing keys of %s: %s", issuer, exc.message)
            return
        signing = [
            jwk
            for jwk in listed
            if isinstance(jwk, dict) and jwk.get("use", "sig") == "sig" and "kty" in jwk
        ]
        keys.keys = {
            (jwk.get("kid") if isinstance(jwk.get("kid"), str) else None): jwk for jwk in signing
        }
        keys.fetched_at = now
        metrics.sso_jwks_refresh("ok")
        log.info("fetched %d signing keys of %s", len(keys.keys), issuer)

    # --- the code exchange --------------------------------------------------------------------

    def exchange_code(
        self,
        provider: ProviderMetadata,
        *,
        client_id: str,
        client_secret: str,
        code: str,
        redirect_uri: str,
        code_verifier: str,
    ) -> dict[str, Any]:
        """The token response for an authorization code (client_secret_basic with PKCE);
        ProviderRefused for a code the provider refuses, ProviderUnreachable otherwise."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": code_verifier,
        }
        try:
            answer = self._http.post(
                provider.token_endpoint,
                data=form,
                auth=(client_id, client_secret),
                headers={"Accept": "application/json"},
            )
        except httpx.HTTPError as exc:
            log.warning("token endpoint of %s unreachable: %s", provider.issuer, type(exc).__name__)
            raise ProviderUnreachable(UNREACHABLE) from None
        body = _json_body(answer)
        if answer.status_code == 200 and isinstance(body.get("id_token"), str):
            return body
        if 400 <= answer.status_code < 500:
            error = str(body.get("error") or "invalid_request")[:64]
            description = str(body.get("error_description") or "")[:200]
            raise ProviderRefused(error, description)
        log.warning("token endpoint of %s answered %d", provider.issuer, answer.status_code)
        raise ProviderUnreachable(UNREACHABLE)

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            answer = self._http.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            log.warning("identity provider unreachable at %s: %s", url, type(exc).__name__)
            raise ProviderUnreachable(UNREACHABLE) from None
        if answer.status_code != 200:
            log.warning("identity provider answered %d at %s", answer.status_code, url)
            raise ProviderUnreachable(UNREACHABLE)
        body = _json_body(answer)
        if not body:
            raise ProviderUnreachable(UNREACHABLE)
        return body


def _find(keys: _KeySet, kid: str | None) -> dict[str, Any] | None:
    if kid is not None:
        return keys.keys.get(kid)
    # A token without a key id: only unambiguous when the provider has a single key.
    return next(iter(keys.keys.values())) if len(keys.keys) == 1 else None


def _url(document: dict[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise KeyError(name)
    return value


def _json_body(answer: httpx.Response) -> dict[str, Any]:
    if len(answer.content) > MAX_DOCUMENT_BYTES:
        return {}
    try:
        body = answer.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
