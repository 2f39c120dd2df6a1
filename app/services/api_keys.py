"""API keys of a user: created with a role at most the caller's, listed without the key,
revoked by their owner or a tenant admin. The key is returned once, at creation, and stored
only as its keyed hash.

Keys are made and revoked by a signed-in person (an access token). A key may do so only when an
admin gave it the `keys:manage` scope, and what it makes never outlives it: the new key expires
no later than its maker (an expiring key cannot make a key that never expires), cannot have
scopes, and is revoked with its maker. A user holds at most `max_active_per_user` working keys.
"""

from __future__ import annotations

import secrets
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.domain import KEY_SCOPES, KeyScope, Role, role_at_least
from app.errors import Forbidden, InvalidInput, KeyNotAllowed, NotFound
from app.security import API_KEY_SHOWN_CHARS, ApiKeyHasher, new_api_key
from app.services.audit import Actor
from app.services.auth import Identity
from app.services.users import validate_role
from app.storage.api_keys import ApiKeyRecord, ApiKeyStore
from app.storage.db import utc_now

KEY_NAME_MAX_CHARS = 100
KEY_MAX_DAYS = 3650

# `keys:manage`: make and revoke its owner's keys (with an admin's role: any key of the tenant).
KEYS_MANAGE: KeyScope = "keys:manage"


def validate_key_name(name: str) -> str:
    """The trimmed name, or InvalidInput when it is empty, too long or holds control chars."""
    trimmed = name.strip()
    if not trimmed:
        raise InvalidInput("name must not be empty")
    if len(trimmed) > KEY_NAME_MAX_CHARS:
        raise InvalidInput(f"name is longer than {KEY_NAME_MAX_CHARS} characters")
    if any(unicodedata.category(ch).startswith("C") for ch in trimmed):
        raise InvalidInput("name must not contain control characters")
    return trimmed


def validate_scopes(scopes: Sequence[str]) -> tuple[KeyScope, ...]:
    """The scopes, in KEY_SCOPES order without repeats, or InvalidInput naming the scopes
    there are."""
    unknown = sorted(set(scopes) - set(KEY_SCOPES))
    if unknown:
        raise InvalidInput(f"unknown scope {unknown[0]!r}: use {', '.join(KEY_SCOPES)}")
    return tuple(scope for scope in KEY_SCOPES if scope in scopes)


def _requested_expiry(now: datetime, expires_in_days: int | None) -> datetime | None:
    if expires_in_days is None:
        return None
    if not 1 <= expires_in_days <= KEY_MAX_DAYS:
        raise InvalidInput(f"expires_in_days must be between 1 and {KEY_MAX_DAYS}")
    return now + timedelta(days=expires_in_days)


def _check_key_may_manage_keys(caller: Identity) -> None:
    """KeyNotAllowed for an API key without `keys:manage` (a signed-in person passes)."""
    if caller.is_key and KEYS_MANAGE not in caller.scopes:
        raise KeyNotAllowed(
            "an API key cannot make or revoke keys: sign in (POST /auth/token) to do it, or "
            f"ask an admin for a key with the {KEYS_MANAGE} scope"
        )


def _made_by_key(
    caller: Identity, scopes: tuple[KeyScope, ...], wanted: datetime | None
) -> datetime | None:
    """The expiry of a key the key `caller` makes: never after the caller's own (capped at
    it); InvalidInput for a key that would never expire from an expiring maker, KeyNotAllowed
    for scopes (only a signed-in admin gives them)."""
    if scopes:
        raise KeyNotAllowed("only a signed-in admin gives a key scopes; a key cannot pass them on")
    limit = caller.key_expires_at
    if limit is None:
        return wanted  # revoked with its maker all the same
    if wanted is None:
        raise InvalidInput(
            f"a key made by a key cannot outlive it: this key expires at {limit.isoformat()}, "
            "so give expires_in_days (the new key expires by then at the latest)"
        )
    return min(wanted, limit)


def _within_maker(caller: Identity, wanted: Sequence[str] | None) -> tuple[str, ...] | None:
    """The collections a new key is limited to: those asked (None: no limit of its own), and
    never beyond a maker limited to some (no limit asked: the maker's; one outside them:
    NotFound, as a collection the caller cannot read)."""
    chosen = None if wanted is None else tuple(sorted(set(wanted)))
    if caller.collections is None:
        return chosen
    if chosen is None:
        return tuple(sorted(caller.collections))
    outside = sorted(set(chosen) - set(caller.collections))
    if outside:
        raise NotFound(f"collection not found: {outside[0]}")
    return chosen


@dataclass(frozen=True)
class IssuedKey:
    """A key just made: its record, and the key itself (shown this once, never stored)."""

    record: ApiKeyRecord
    key: str


class ApiKeyService:
    """Creating, listing and revoking keys (checking them is the Authenticator's job)."""

    def __init__(
        self, store: ApiKeyStore, hasher: ApiKeyHasher, max_active_per_user: int | None = None
    ) -> None:
        self._store = store
        self._hasher = hasher
        self._max_active_per_user = max_active_per_user  # RAG_MAX_KEYS_PER_USER

    def create(
        self,
        caller: Identity,
        actor: Actor,
        name: str,
        role: str | None = None,
        expires_in_days: int | None = None,
        scopes: Sequence[str] = (),
        collections: Sequence[str] | None = None,
    ) -> IssuedKey:
        """A new key of the caller and the key itself (shown once); InvalidInput, Forbidden for
        a role above the caller's or `keys:manage` from a non-admin, KeyNotAllowed for a key
        without `keys:manage`, QuotaExceeded at the user's cap of working keys. A key made by a
        key limited to some collections is limited to them too."""
        _check_key_may_manage_keys(caller)
        clean_name = validate_key_name(name)
        wanted: Role = validate_role(role) if role is not None else caller.role
        if not role_at_least(caller.role, wanted):
            raise Forbidden(
                f"a key's role cannot be above its owner's: you are {caller.role}, asked {wanted}"
            )
        clean_scopes = validate_scopes(scopes)
        now = utc_now()
        expires_at = _requested_expiry(now, expires_in_days)
        if caller.is_key:
            expires_at = _made_by_key(caller, clean_scopes, expires_at)
        elif KEYS_MANAGE in clean_scopes and caller.role != "admin":
            raise Forbidden(f"only an admin can give a key the {KEYS_MANAGE} scope")
        limit = _within_maker(caller, collections)
        key = new_api_key()
        record = ApiKeyRecord(
            key_id="key_" + secrets.token_hex(12),
            tenant_id=caller.tenant_id,
            user_id=caller.user_id,
            name=clean_name,
            role=wanted,
            prefix=key[:API_KEY_SHOWN_CHARS],
            created_at=now,
            expires_at=expires_at,
            last_used_at=None,
            scopes=clean_scopes,
            parent_key_id=caller.key_id,
            collections=limit,
        )
        audit = actor.entry(
            "key.created",
            target_id=record.key_id,
            name=clean_name,
            role=wanted,
            prefix=record.prefix,
            **({"scopes": list(clean_scopes)} if clean_scopes else {}),
            **({"collections": list(record.collections)} if record.collections is not None else {}),
        )
        stored = self._store.add(record, self._hasher.hash(key), audit, self._max_active_per_user)
        return IssuedKey(stored, key)

    def list(self, caller: Identity, everyone: bool) -> list[ApiKeyRecord]:
        """The caller's keys, or with `everyone` (admins only, and not through a key limited to
        some collections: other keys name collections it does not read) every key of the
        tenant."""
        if everyone and caller.role != "admin":
            raise Forbidden("only an admin can list every key of the tenant")
        if everyone and caller.collections is not None:
            raise KeyNotAllowed(
                "an API key limited to some collections cannot list every key of the tenant "
                "(they name collections it does not read); sign in, or use an unlimited key"
            )
        return self._store.list(caller.tenant_id, None if everyone else caller.user_id)

    def revoke(self, caller: Identity, actor: Actor, *, key_id: str) -> None:
        """Delete one of the caller's keys (an admin: any key of the tenant) and every key made
        from it; NotFound else, KeyNotAllowed for a key without `keys:manage`."""
        _check_key_may_manage_keys(caller)
        owner = None if caller.role == "admin" else caller.user_id
        removed = self._store.remove(
            caller.tenant_id, key_id, owner, actor.entry("key.revoked", target_id=key_id)
        )
        if removed is None:
            raise NotFound("API key not found")
