"""API keys of a user: created with a role at most the caller's, listed without the key,
revoked by their owner or a tenant admin. The key is returned once, at creation, and stored
only as its keyed hash."""

from __future__ import annotations

import secrets
import unicodedata
from datetime import timedelta

from app.domain import Role, role_at_least
from app.errors import Forbidden, InvalidInput, NotFound
from app.security import API_KEY_SHOWN_CHARS, ApiKeyHasher, new_api_key
from app.services.audit import Actor
from app.services.auth import Identity
from app.services.users import validate_role
from app.storage.api_keys import ApiKeyRecord, ApiKeyStore
from app.storage.db import utc_now

KEY_NAME_MAX_CHARS = 100
KEY_MAX_DAYS = 3650


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


class ApiKeyService:
    """Creating, listing and revoking keys (checking them is the Authenticator's job)."""

    def __init__(self, store: ApiKeyStore, hasher: ApiKeyHasher) -> None:
        self._store = store
        self._hasher = hasher

    def create(
        self,
        caller: Identity,
        actor: Actor,
        name: str,
        role: str | None = None,
        expires_in_days: int | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key of the caller and the key itself (shown once); InvalidInput, or Forbidden
        for a role above the caller's."""
        clean_name = validate_key_name(name)
        wanted: Role = validate_role(role) if role is not None else caller.role
        if not role_at_least(caller.role, wanted):
            raise Forbidden(
                f"a key's role cannot be above its owner's: you are {caller.role}, asked {wanted}"
            )
        if expires_in_days is not None and not 1 <= expires_in_days <= KEY_MAX_DAYS:
            raise InvalidInput(f"expires_in_days must be between 1 and {KEY_MAX_DAYS}")
        key = new_api_key()
        now = utc_now()
        record = ApiKeyRecord(
            key_id="key_" + secrets.token_hex(12),
            tenant_id=caller.tenant_id,
            user_id=caller.user_id,
            name=clean_name,
            role=wanted,
            prefix=key[:API_KEY_SHOWN_CHARS],
            created_at=now,
            expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
            last_used_at=None,
        )
        audit = actor.entry(
            "key.created", record.key_id, name=clean_name, role=wanted, prefix=record.prefix
        )
        return self._store.add(record, self._hasher.hash(key), audit), key

    def list(self, caller: Identity, everyone: bool) -> list[ApiKeyRecord]:
        """The caller's keys, or with `everyone` (admins only) every key of the tenant."""
        if everyone and caller.role != "admin":
            raise Forbidden("only an admin can list every key of the tenant")
        return self._store.list(caller.tenant_id, None if everyone else caller.user_id)

    def revoke(self, caller: Identity, actor: Actor, key_id: str) -> None:
        """Delete one of the caller's keys (an admin: any key of the tenant); NotFound else."""
        owner = None if caller.role == "admin" else caller.user_id
        removed = self._store.remove(
            caller.tenant_id, key_id, owner, actor.entry("key.revoked", key_id)
        )
        if removed is None:
            raise NotFound("API key not found")
