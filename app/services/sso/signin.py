"""Single sign-on for a tenant: its provider's configuration, the web app's Authorization Code
flow with PKCE, the provider's access tokens on the API, and the just-in-time users both make.

A person is found by the provider's `sub` (per tenant and issuer), never by a name or an email
address another account could take. Every sign-in and every accepted access token applies the
role mapping again, so someone removed from a provider group loses that role at once. No token
or secret is written to a log line or the audit log.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

from app import metrics
from app.errors import (
    AuthenticationFailed,
    Conflict,
    InvalidInput,
    NotFound,
    ProviderUnreachable,
    QuotaExceeded,
    SsoFailure,
)
from app.security import INVALID_TOKEN_MESSAGE, IssuedToken, TokenCodec
from app.services.audit import Actor, AuditLog
from app.services.sso.config import SsoSettingsIn, check_issuer, provider_name, public_view
from app.services.sso.mapping import (
    domain_allowed,
    email_of,
    mapped_role,
    mapped_tenant_groups,
    provider_groups,
    username_for,
)
from app.services.sso.provider import OidcProviders, ProviderRefused
from app.services.sso.tokens import (
    TokenRefused,
    unverified_issuer,
    verify_access_token,
    verify_id_token,
)
from app.storage.audit import NO_TENANT
from app.storage.db import utc_now
from app.storage.secret_box import SecretBox
from app.storage.sso import PendingSignIn, SsoStore, StoredSsoConfig
from app.storage.users import UserChange, UserRecord, UserStore

log = logging.getLogger(__name__)

# How long a person may take at the provider before the sign-in must start again.
PENDING_S = 600
# How long the one-time code in the web app's URL fragment may wait for its exchange.
EXCHANGE_CODE_S = 60
# Not a bcrypt hash: no password ever matches a user made by single sign-on.
UNUSABLE_PASSWORD_HASH = "!sso"
MAX_NEXT_CHARS = 512


@dataclass(frozen=True)
class SignInOption:
    """What the sign-in page offers for a tenant."""

    tenant_id: str
    provider_name: str
    password_login: bool


@dataclass(frozen=True)
class FinishedSignIn:
    """Where the person goes after signing in, and the one-time code the web app trades for
    the service's token."""

    next_path: str
    exchange_code: str


def safe_next_path(next_path: str) -> str:
    """The `next` path when it stays on this origin (a path, not `//host` or a URL);
    SsoFailure otherwise."""
    parts = urlsplit(next_path)
    if (
        not next_path.startswith("/")
        or next_path.startswith("//")
        or "\\" in next_path
        or parts.scheme
        or parts.netloc
        or len(next_path) > MAX_NEXT_CHARS
        or any(ord(c) < 0x20 for c in next_path)
    ):
        raise SsoFailure(
            "next", "The page to return to after signing in must be a page of this site."
        )
    return next_path.split("#", 1)[0]


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class GroupMemberships(Protocol):
    """The tenant's groups a user is in, as far as single sign-on manages them."""

    def sync(
        self, *, tenant_id: str, user_id: str, wanted: set[str], managed: set[str], actor: Actor
    ) -> None:
        """Make the user a member of the `wanted` groups and of no other `managed` one
        (groups named by name; a name the tenant has no group of is skipped)."""


class SingleSignOn:
    """The tenants' identity providers and everything signing in through them takes."""

    def __init__(
        self,
        store: SsoStore,
        box: SecretBox,
        providers: OidcProviders,
        users: UserStore,
        codec: TokenCodec,
        audit: AuditLog,
        *,
        allow_http: bool,
        own_issuer: str,
        memberships: GroupMemberships | None = None,
    ) -> None:
        self._store = store
        self._box = box
        self._providers = providers
        self._users = users
        self._codec = codec
        self._audit = audit
        self._allow_http = allow_http
        self._own_issuer = own_issuer
        self._memberships = memberships

    # --- configuration ------------------------------------------------------------------------

    def configure(self, *, tenant_id: str, body: SsoSettingsIn, actor: Actor) -> dict[str, Any]:
        """Set the tenant's provider (its discovery document must answer and name the issuer);
        InvalidInput, or Conflict when another tenant accepts the same issuer's access tokens
        for the same audience."""
        issuer = check_issuer(body.issuer, self._allow_http)
        existing = self._store.config(tenant_id)
        if body.client_secret is not None:
            sealed = self._box.seal(body.client_secret)
        elif existing is not None:
            sealed = existing.client_secret_encrypted
        else:
            raise InvalidInput("client_secret is required the first time")
        if body.accept_access_tokens:
            for other in self._store.configs_of_issuer(issuer):
                if (
                    other.tenant_id != tenant_id
                    and other.settings.get("accept_access_tokens")
                    and other.settings.get("audience") == body.audience
                ):
                    raise Conflict(
                        "another organisation accepts this provider's access tokens for the "
                        "same audience: give this organisation an audience of its own, so that "
                        "a token names exactly one organisation"
                    )
        try:
            self._providers.metadata(issuer)
        except ProviderUnreachable as exc:
            raise InvalidInput(f"cannot use this issuer: {exc.message}") from None
        settings = body.model_dump(exclude={"issuer", "client_id", "client_secret"})
        entry = actor.entry(
            "sso.configured",
            issuer=issuer,
            client_id=body.client_id,
            client_secret="replaced" if body.client_secret is not None else "kept",
            password_login=body.password_login,
            accept_access_tokens=body.accept_access_tokens,
        )
        stored = self._store.put_config(tenant_id, issuer, body.client_id, sealed, settings, entry)
        log.info("single sign-on of tenant %s set to issuer %s", tenant_id, issuer)
        return public_view(stored)

    def describe(self, tenant_id: str) -> dict[str, Any]:
        """The tenant's configuration without its secret; NotFound when it has none."""
        stored = self._store.config(tenant_id)
        if stored is None:
            raise NotFound("this organisation has no single sign-on")
        return public_view(stored)

    def remove(self, *, tenant_id: str, actor: Actor) -> None:
        """Remove the tenant's provider; NotFound when it has none."""
        if not self._store.delete_config(tenant_id, actor.entry("sso.removed")):
            raise NotFound("this organisation has no single sign-on")

    def password_allowed(self, user: UserRecord) -> bool:
        """Whether the user may sign in with a password: yes unless the tenant's single
        sign-on turned that off and the user is not a break-glass admin."""
        if user.break_glass and user.role == "admin":
            return True
        stored = self._store.config(user.tenant_id)
        return stored is None or bool(stored.settings.get("password_login", True))

    # --- the sign-in page ---------------------------------------------------------------------

    def option(self, *, tenant_id: str | None = None, email: str | None = None) -> SignInOption:
        """The provider the sign-in page offers for an organisation, or for an email address
        whose domain exactly one organisation allows; NotFound otherwise."""
        stored: StoredSsoConfig | None = None
        if tenant_id:
            stored = self._store.config(tenant_id)
        elif email and "@" in email:
            domain = email.rsplit("@", 1)[1].strip().lower()
            matches = [
                config
                for config in self._store.all_configs()
                if domain in config.settings.get("allowed_domains", [])
            ]
            stored = matches[0] if len(matches) == 1 else None
        if stored is None:
            raise NotFound("no single sign-on for this organisation")
        return SignInOption(
            stored.tenant_id,
            provider_name(stored.settings, stored.issuer),
            bool(stored.settings.get("password_login", True)),
        )

    # --- the Authorization Code flow ----------------------------------------------------------

    def start(self, *, tenant_id: str, next_path: str, redirect_uri: str) -> str:
        """The provider's authorization URL for a new sign-in (state, nonce, S256 PKCE)."""
        next_path = safe_next_path(next_path)
        stored = self._store.config(tenant_id)
        if stored is None:
            raise SsoFailure(
                "not_configured", "This organisation does not sign in through a provider.", 404
            )
        provider = self._providers.metadata(stored.issuer)
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        self._store.add_pending(
            state,
            PendingSignIn(
                tenant_id=tenant_id,
                nonce=nonce,
                code_verifier=verifier,
                redirect_uri=redirect_uri,
                next_path=next_path,
                expires_at=utc_now() + timedelta(seconds=PENDING_S),
            ),
        )
        query = urlencode(
            {
                "response_type": "code",
                "client_id": stored.client_id,
                "redirect_uri": redirect_uri,
                "scope": " ".join(stored.settings.get("scopes", ["openid"])),
                "state": state,
                "nonce": nonce,
                "code_challenge": _challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        joiner = "&" if "?" in provider.authorization_endpoint else "?"
        return f"{provider.authorization_endpoint}{joiner}{query}"

    def complete(
        self, state: str | None, code: str | None, error: str | None, client_ip: str | None
    ) -> FinishedSignIn:
        """Finish a sign-in the provider sent back: the `next` path and a one-time exchange
        code; SsoFailure with a message for the person otherwise."""
        pending = self._store.take_pending(state) if state else None
        if pending is None:
            metrics.sso_signin("state")
            self._audit.record(
                Actor(NO_TENANT, None, client_ip).entry("sso.refused", reason="state")
            )
            raise SsoFailure(
                "state",
                "This sign-in has expired or was already used. Start again from the sign-in page.",
            )
        tenant_id = pending.tenant_id
        stored = self._store.config(tenant_id)
        if stored is None:
            raise self._refused(
                tenant_id,
                client_ip,
                "not_configured",
                "This organisation no longer signs in through a provider.",
                404,
            )
        name = provider_name(stored.settings, stored.issuer)
        if error:
            if error == "access_denied":
                raise self._refused(
                    tenant_id,
                    client_ip,
                    "denied",
                    f"The sign-in was cancelled at {name}: access was not allowed. Start again "
                    "if that was a mistake.",
                    403,
                )
            raise self._refused(
                tenant_id,
                client_ip,
                "provider_error",
                f"{name} could not sign you in ({error[:64]}). Start again, or ask an "
                "administrator.",
                400,
            )
        if not code:
            raise self._refused(
                tenant_id, client_ip, "no_code", f"{name} sent no sign-in code. Start again.", 400
            )
        provider = self._providers.metadata(stored.issuer)
        try:
            answer = self._providers.exchange_code(
                provider,
                client_id=stored.client_id,
                client_secret=self._box.open(stored.client_secret_encrypted),
                code=code,
                redirect_uri=pending.redirect_uri,
                code_verifier=pending.code_verifier,
            )
        except ProviderRefused as exc:
            log.info(
                "provider refused the code of a sign-in of tenant %s: %s", tenant_id, exc.error
            )
            raise self._refused(
                tenant_id,
                client_ip,
                "code_refused",
                f"{name} did not accept the sign-in code: it expired or was already used. "
                "Start again from the sign-in page.",
                400,
            ) from None
        try:
            claims = verify_id_token(
                answer["id_token"],
                self._providers.key_lookup(stored.issuer),
                issuer=stored.issuer,
                client_id=stored.client_id,
                nonce=pending.nonce,
            )
        except TokenRefused as exc:
            raise self._refused(
                tenant_id,
                client_ip,
                f"id_token_{exc.reason}",
                f"The answer from {name} could not be verified, so you are not signed in. "
                "Start again; if it happens again, tell an administrator.",
                401,
            ) from None
        user = self._admit(stored, claims, client_ip, via="sign_in")
        exchange = secrets.token_urlsafe(32)
        self._store.add_exchange_code(
            exchange, tenant_id, user.id, utc_now() + timedelta(seconds=EXCHANGE_CODE_S)
        )
        self._audit.record(
            Actor(tenant_id, user.id, client_ip).entry(
                "sso.signed_in", target_id=user.id, issuer=stored.issuer
            )
        )
        metrics.sso_signin("ok")
        return FinishedSignIn(pending.next_path, exchange)

    def exchange(self, code: str) -> IssuedToken:
        """The service's own token for a one-time code from a finished sign-in."""
        found = self._store.take_exchange_code(code)
        user = self._users.get(found.user_id) if found else None
        if found is None or user is None or user.disabled or user.tenant_id != found.tenant_id:
            raise AuthenticationFailed(
                "this sign-in code is invalid, expired or already used; sign in again"
            )
        return self._codec.issue(user.id, user.tenant_id, session_version=user.session_version)

    def end_session_url(self, tenant_id: str) -> str | None:
        """Where the person can also sign out of the provider, when it offers that."""
        stored = self._store.config(tenant_id)
        if stored is None:
            return None
        try:
            endpoint = self._providers.metadata(stored.issuer).end_session_endpoint
        except ProviderUnreachable:
            return None
        if endpoint is None:
            return None
        joiner = "&" if "?" in endpoint else "?"
        return f"{endpoint}{joiner}{urlencode({'client_id': stored.client_id})}"

    # --- provider access tokens on the API ----------------------------------------------------

    def user_for_access_token(self, token: str) -> UserRecord:
        """The user a provider's JWT access token stands for, in the one tenant that accepts
        this issuer's tokens for the token's audience; AuthenticationFailed otherwise."""
        issuer = unverified_issuer(token)
        if issuer is None or issuer == self._own_issuer:
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        accepting = [
            config
            for config in self._store.configs_of_issuer(issuer)
            if config.settings.get("accept_access_tokens") and config.settings.get("audience")
        ]
        if not accepting:
            metrics.sso_signin("access_token_issuer")
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        refused = TokenRefused("audience")
        for config in accepting:
            try:
                claims = verify_access_token(
                    token,
                    self._providers.key_lookup(issuer),
                    issuer=issuer,
                    audience=str(config.settings["audience"]),
                )
            except TokenRefused as exc:
                refused = exc
                if exc.reason == "audience":  # perhaps the next tenant's audience
                    continue
                break
            try:
                user = self._admit(config, claims, None, via="access_token")
            except SsoFailure as exc:
                raise AuthenticationFailed(exc.message) from None
            metrics.sso_signin("access_token_ok")
            return user
        metrics.sso_signin(f"access_token_{refused.reason}")
        raise refused

    # --- people -------------------------------------------------------------------------------

    def _admit(
        self, config: StoredSsoConfig, claims: dict[str, Any], client_ip: str | None, via: str
    ) -> UserRecord:
        """The tenant's user for these verified claims, made or updated from the mapping;
        SsoFailure (recorded) when the mapping refuses them."""
        tenant_id, settings = config.tenant_id, config.settings
        name = provider_name(settings, config.issuer)
        if not domain_allowed(claims, settings.get("allowed_domains", [])):
            raise self._refused(
                tenant_id,
                client_ip,
                "domain",
                "Your email address is not from a domain this organisation allows.",
                403,
            )
        groups = provider_groups(claims, str(settings.get("groups_claim", "groups")))
        role = mapped_role(groups, settings.get("role_groups", {}), settings.get("default_role"))
        subject = str(claims["sub"])
        user_id = self._store.user_of(tenant_id, config.issuer, subject)
        user = self._users.get(user_id) if user_id else None
        if role is None:
            raise self._refused(
                tenant_id,
                client_ip,
                "no_role",
                f"Your {name} account is in none of the groups that may use this "
                "organisation's service. Ask an administrator to add you to one.",
                403,
                target=user.id if user else None,
            )
        if user is not None and user.disabled:
            raise self._refused(
                tenant_id,
                client_ip,
                "disabled",
                "Your account in this organisation is disabled. Ask an administrator to enable it.",
                403,
                target=user.id,
            )
        actor = Actor(tenant_id, None, client_ip)
        if user is None:
            user = self._provision(config, claims, role, actor, via)
        elif user.role != role:
            try:
                user = self._users.change(
                    tenant_id,
                    user.id,
                    UserChange(role=role),
                    actor.entry("sso.role_changed", via=via),
                )
            except Conflict:  # the tenant's last enabled admin: kept until another exists
                log.warning(
                    "tenant %s: the provider maps its last admin %s to %s; kept admin",
                    tenant_id,
                    user.id,
                    role,
                )
        group_map: dict[str, str] = settings.get("group_map", {})
        if self._memberships is not None and group_map:
            # Only the tenant groups group_map names follow the provider; others stay as set.
            self._memberships.sync(
                tenant_id=tenant_id,
                user_id=user.id,
                wanted=mapped_tenant_groups(groups, group_map),
                managed=set(group_map.values()),
                actor=actor,
            )
        return user

    def _provision(
        self,
        config: StoredSsoConfig,
        claims: dict[str, Any],
        role: Any,
        actor: Actor,
        via: str,
    ) -> UserRecord:
        username = username_for(claims)
        try:
            user = self._users.add(
                config.tenant_id,
                username,
                UNUSABLE_PASSWORD_HASH,
                role,
                actor.entry("sso.provisioned", via=via, email=email_of(claims)),
            )
        except QuotaExceeded:
            raise self._refused(
                config.tenant_id,
                actor.client_ip,
                "user_quota",
                "This organisation has as many users as it may have, so no account can be made "
                "for you. Ask an administrator.",
                403,
            ) from None
        except Conflict:
            raise self._refused(
                config.tenant_id,
                actor.client_ip,
                "username_taken",
                f"The user name {username!r} belongs to another account of this organisation. "
                "Ask an administrator to rename or remove it.",
                409,
            ) from None
        try:
            self._store.link(config.tenant_id, config.issuer, str(claims["sub"]), user.id)
        except Conflict:  # the same person's other request linked first
            self._users.delete(config.tenant_id, user.username)
            linked = self._store.user_of(config.tenant_id, config.issuer, str(claims["sub"]))
            found = self._users.get(linked) if linked else None
            if found is None:
                raise
            return found
        return user

    def _refused(
        self,
        tenant_id: str,
        client_ip: str | None,
        reason: str,
        message: str,
        status: int,
        target: str | None = None,
    ) -> SsoFailure:
        metrics.sso_signin(reason)
        self._audit.record(
            Actor(tenant_id, None, client_ip).entry("sso.refused", target_id=target, reason=reason)
        )
        log.info("single sign-on refused for tenant %s: %s", tenant_id, reason)
        return SsoFailure(reason, message, status)
