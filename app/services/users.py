"""Creating, listing, changing, deleting and authenticating users (the CLI, `/users`,
`/auth/password` and `/auth/token`); the last enabled admin of a tenant always stays, and an API
key never administers users or passwords (only a signed-in person does)."""

from __future__ import annotations

import re

from app import security
from app.config import Settings
from app.domain import ROLES, Role
from app.errors import AuthenticationFailed, InvalidInput, KeyNotAllowed, NotFound
from app.services.audit import Actor
from app.storage.db import Database
from app.storage.users import UserChange, UserRecord, UserStore

# Lower-case so "Alice" and "alice" cannot be two accounts; e-mail addresses are allowed.
USERNAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._@+-]{2,63}$")
# Tenant ids end up in collection names, paths and cache keys: keep them plain.
TENANT_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$")
MIN_PASSWORD_CHARS = 12
LOGIN_FAILED_MESSAGE = "incorrect username or password"


def normalise_username(username: str) -> str:
    """The stored form of a user name: trimmed and lower-cased."""
    return username.strip().lower()


def validate_tenant_id(tenant_id: str) -> str:
    """The tenant id unchanged, or InvalidInput explaining the allowed form."""
    if not TENANT_PATTERN.fullmatch(tenant_id):
        raise InvalidInput(
            f"tenant id {tenant_id!r} is invalid: use 1-64 lower-case letters, digits, '-' or "
            "'_', starting and ending with a letter or digit"
        )
    return tenant_id


def validate_username(username: str) -> str:
    """The normalised user name, or InvalidInput explaining the allowed form."""
    normalised = normalise_username(username)
    if not USERNAME_PATTERN.fullmatch(normalised):
        raise InvalidInput(
            f"user name {username!r} is invalid: use 3-64 letters, digits or . _ @ + -, "
            "starting with a letter or digit"
        )
    return normalised


def validate_role(role: str) -> Role:
    """The role unchanged, or InvalidInput naming the roles there are."""
    if role not in ROLES:
        raise InvalidInput(f"role {role!r} is unknown: use one of {', '.join(ROLES)}")
    return role  # type: ignore[return-value]


def validate_password(password: str) -> None:
    """InvalidInput when the password is too short or longer than bcrypt can use."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidInput(f"password must be at least {MIN_PASSWORD_CHARS} characters long")
    if not password.strip():
        raise InvalidInput("password must not be only whitespace")
    security.check_password_length(password)


def refuse_api_keys(actor: Actor | None) -> None:
    """KeyNotAllowed when the actor acts with an API key: a leaked key must not be able to add
    an account, promote one, or set a password that outlives the key's revocation."""
    if actor is not None and actor.key_id is not None:
        raise KeyNotAllowed(
            "an API key cannot administer users or passwords: sign in (POST /auth/token) to do it"
        )


class UserService:
    """User management on top of the user store, hashing with the configured bcrypt cost."""

    def __init__(self, store: UserStore, bcrypt_rounds: int) -> None:
        self._store = store
        self._rounds = bcrypt_rounds

    def warm_up(self) -> None:
        """Compute the dummy hash now, so the first unknown-user login is not the slow one."""
        security.dummy_hash(self._rounds)

    def create_user(
        self,
        tenant_id: str,
        username: str,
        password: str,
        role: str | None = None,
        actor: Actor | None = None,
    ) -> UserRecord:
        """Validate and add a user; InvalidInput or Conflict (name taken) on failure.

        Without a role, the tenant's first user is admin and later ones member.
        """
        refuse_api_keys(actor)
        validate_tenant_id(tenant_id)
        name = validate_username(username)
        checked = validate_role(role) if role is not None else None
        validate_password(password)
        password_hash = security.hash_password(password, self._rounds)
        audit = actor.entry("user.created") if actor else None
        return self._store.add(tenant_id, name, password_hash, checked, audit)

    def page(self, tenant_id: str, limit: int, offset: int) -> tuple[list[UserRecord], int]:
        """One page of the tenant's users by name, and how many there are."""
        return self._store.page(tenant_id, limit, offset)

    def change_user(
        self,
        actor: Actor,
        user_id: str,
        role: str | None = None,
        disabled: bool | None = None,
        password: str | None = None,
    ) -> UserRecord:
        """An admin's change to a user of its tenant; NotFound, InvalidInput or Conflict (the
        last enabled admin). Disabling or a new password ends the user's sessions and keys."""
        refuse_api_keys(actor)
        checked = validate_role(role) if role is not None else None
        password_hash = None
        if password is not None:
            validate_password(password)
            password_hash = security.hash_password(password, self._rounds)
        change = UserChange(role=checked, disabled=disabled, password_hash=password_hash)
        return self._store.change(actor.tenant_id, user_id, change, actor.entry("user.changed"))

    def remove_user(self, actor: Actor, user_id: str) -> None:
        """Delete a user of the actor's tenant with its keys and conversations; NotFound or
        Conflict."""
        refuse_api_keys(actor)
        self._store.remove(actor.tenant_id, user_id, actor.entry("user.deleted"))

    def change_own_password(self, actor: Actor, current: str, new: str) -> UserRecord:
        """The caller's new password after checking the current one (AuthenticationFailed);
        every session and key of the user ends."""
        refuse_api_keys(actor)
        assert actor.user_id is not None
        user = self._store.get(actor.user_id)
        if user is None or not security.verify_password(current, user.password_hash):
            raise AuthenticationFailed("the current password is incorrect")
        validate_password(new)
        change = UserChange(password_hash=security.hash_password(new, self._rounds))
        return self._store.change(actor.tenant_id, user.id, change, actor.entry("password.changed"))

    def operator_change(
        self, username: str, role: str | None = None, disabled: bool | None = None
    ) -> UserRecord:
        """The CLI's change of a user by name (same rules as the API, no actor)."""
        user = self._store.get_by_username(normalise_username(username))
        if user is None:
            raise NotFound(f"no user named {username}")
        checked = validate_role(role) if role is not None else None
        change = UserChange(role=checked, disabled=disabled)
        operator = Actor(tenant_id=user.tenant_id, user_id=None, client_ip="cli")
        return self._store.change(user.tenant_id, user.id, change, operator.entry("user.changed"))

    def find(self, username: str) -> UserRecord | None:
        """The user with this name (any letter case), or None."""
        return self._store.get_by_username(normalise_username(username))

    def list_users(self, tenant_id: str | None = None) -> list[UserRecord]:
        """Users of one tenant, or all users when tenant_id is None."""
        return self._store.list(tenant_id)

    def delete_user(self, username: str) -> bool:
        """Delete a user by name; returns whether one existed."""
        return self._store.delete(normalise_username(username))

    def get(self, user_id: str) -> UserRecord | None:
        """The user with this id, or None once deleted (its tokens stop working)."""
        return self._store.get(user_id)

    def authenticate(self, username: str, password: str) -> UserRecord:
        """The user these credentials belong to; AuthenticationFailed otherwise.

        An unknown user costs one bcrypt check against a dummy hash of the same cost, so the
        response time does not reveal whether the name exists.
        """
        name = normalise_username(username)
        # A name that could never have been created is not looked up, but costs the same.
        user = self._store.get_by_username(name) if USERNAME_PATTERN.fullmatch(name) else None
        if user is None:
            security.verify_password(password, security.dummy_hash(self._rounds))
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        if not security.verify_password(password, user.password_hash):
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        if user.disabled:  # after the hash check: the reply says nothing a guesser could use
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        return user


def build_user_service(settings: Settings, database: Database) -> UserService:
    """The user service on the service database with the configured bcrypt cost and user
    quota."""
    return UserService(UserStore(database, settings.quota_users), settings.bcrypt_rounds)
