"""Who a request acts as: a bearer credential (an access token or an API key) checked against
the user's current state on every request, and signing out.

A token is refused once signed out (its `jti` in the revocation list), once the user's session
version moved past the token's `sv` (password change, disable, "sign out everywhere"), or once
the user is disabled or gone. A key is refused once revoked, expired, or its user is disabled or
gone; it acts with the weaker of its own role and its user's current role.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from app.domain import KeyScope, Role, weaker_role
from app.errors import AuthenticationFailed, Conflict
from app.security import (
    API_KEY_PATTERN,
    INVALID_TOKEN_MESSAGE,
    ApiKeyHasher,
    TokenCodec,
    is_api_key,
)
from app.services.audit import Actor
from app.services.blocks.admission import Caller
from app.storage.api_keys import ApiKeyStore
from app.storage.db import utc_now
from app.storage.revoked_tokens import RevokedTokens
from app.storage.users import UserRecord, UserStore

INVALID_KEY_MESSAGE = "invalid, expired or revoked API key"
KEY_IS_NOT_A_SESSION = (
    "an API key is not signed out: revoke it with DELETE /auth/keys/{key_id}, or sign out "
    "every session of its user with POST /auth/logout?all=true"
)


@dataclass(frozen=True)
class Identity:
    """The verified identity of a request and the role it acts with right now."""

    user_id: str
    tenant_id: str
    username: str
    role: Role
    token_id: str | None = None  # the access token's jti (None with an API key)
    token_expires_at: datetime | None = None
    key_id: str | None = None  # the API key's id (None with an access token)
    key_expires_at: datetime | None = None  # when the API key expires (None: never, or a token)
    scopes: tuple[KeyScope, ...] = ()  # the API key's scopes (a token has none: it needs none)
    # The collections an API key is limited to (None: all its owner reads, and every token).
    collections: tuple[str, ...] | None = None
    # The tenant's access version, read with the credential (None: not read; whoever resolves
    # the caller's collections reads it then).
    access_version: int | None = None

    @classmethod
    def of_user(cls, user: UserRecord) -> Identity:
        """A user acting with their own role; a credential's details are `replace`d in."""
        return cls(
            user_id=user.id, tenant_id=user.tenant_id, username=user.username, role=user.role
        )

    @property
    def is_key(self) -> bool:
        """Whether this request acts with an API key rather than a signed-in person's token."""
        return self.key_id is not None

    def actor(self, client_ip: str | None) -> Actor:
        """This caller as the actor of audit entries."""
        return Actor(self.tenant_id, self.user_id, client_ip, key_id=self.key_id)

    def as_caller(self) -> Caller:
        """This caller as the unit of the per-user and per-tenant bounds on answers."""
        return Caller(self.tenant_id, self.user_id)


class Authenticator:
    """Turns a bearer credential into an Identity, or raises AuthenticationFailed (one message
    per kind of credential, never saying which check failed)."""

    def __init__(
        self,
        codec: TokenCodec,
        users: UserStore,
        keys: ApiKeyStore,
        hasher: ApiKeyHasher,
        revoked: RevokedTokens,
        provider_tokens: Callable[[str], UserRecord] | None = None,
    ) -> None:
        self._codec = codec
        self._users = users
        self._keys = keys
        self._hasher = hasher
        self._revoked = revoked
        # A tenant's identity provider's access tokens (single sign-on), when tenants accept
        # them: the user such a token stands for, or AuthenticationFailed.
        self._provider_tokens = provider_tokens

    def authenticate(self, credential: str) -> Identity:
        """The caller a bearer credential stands for."""
        if is_api_key(credential):
            return self._by_key(credential)
        try:
            claims = self._codec.verify(credential)
        except AuthenticationFailed:
            if self._provider_tokens is None:
                raise
            return self._by_provider_token(credential)
        # One database round trip: the user row and, when the list is in the database, the
        # revocation check with it.
        in_database = self._revoked.in_database
        subject = self._users.get_for_token(
            claims.user_id, claims.token_id if in_database else None
        )
        user = subject.user
        if (
            user is None
            or subject.revoked
            or not _active_in(user, claims.tenant_id)
            or user.session_version != claims.session_version
            or (not in_database and self._revoked.is_revoked(claims.token_id))
        ):
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        return replace(
            Identity.of_user(user),
            token_id=claims.token_id,
            token_expires_at=claims.expires_at,
            access_version=subject.access_version,
        )

    def _by_provider_token(self, token: str) -> Identity:
        user = self._provider_tokens(token) if self._provider_tokens else None
        if user is None or not _active_in(user, user.tenant_id):
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        # Not a session of this service: it ends when the provider's token expires.
        return Identity.of_user(user)

    def _by_key(self, key: str) -> Identity:
        if not API_KEY_PATTERN.fullmatch(key):  # not even shaped like a key: no lookup
            raise AuthenticationFailed(INVALID_KEY_MESSAGE)
        found = self._keys.find_with_owner(self._hasher.hash(key))
        if found is None:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE)
        record, user = found.key, found.owner
        now = utc_now()
        expired = record.expires_at is not None and record.expires_at <= now
        if expired or not _active_in(user, record.tenant_id):
            raise AuthenticationFailed(INVALID_KEY_MESSAGE)
        self._keys.touch(record, now)
        return replace(
            Identity.of_user(user),
            role=weaker_role(record.role, user.role),
            key_id=record.key_id,
            key_expires_at=record.expires_at,
            scopes=record.scopes,
            collections=record.collections,
            access_version=found.access_version,
        )

    def log_out(self, caller: Identity, actor: Actor, everywhere: bool) -> None:
        """End the presented token, or with `everywhere` every token of the user so far
        (API keys stay: they are revoked one by one). Conflict for a key without
        `everywhere`: a key is not a session."""
        if everywhere:
            self._users.end_sessions(caller.user_id, actor.entry("logout.everywhere"))
            return
        if caller.token_id is None or caller.token_expires_at is None:
            raise Conflict(KEY_IS_NOT_A_SESSION)
        self._revoked.revoke(caller.token_id, caller.token_expires_at, actor.entry("logout"))


def _active_in(user: UserRecord, tenant_id: str) -> bool:
    # A user moved to another tenant (or a key of another tenant's user) is not this caller.
    return user.tenant_id == tenant_id and not user.disabled
