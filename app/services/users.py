"""Creating, listing, deleting and authenticating users (what the CLI and `/auth/token` call)."""

from __future__ import annotations

import re

from app import security
from app.config import Settings
from app.errors import AuthenticationFailed, InvalidInput
from app.storage.db import Database
from app.storage.users import UserRecord, UserStore

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


def validate_password(password: str) -> None:
    """InvalidInput when the password is too short or longer than bcrypt can use."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidInput(f"password must be at least {MIN_PASSWORD_CHARS} characters long")
    if not password.strip():
        raise InvalidInput("password must not be only whitespace")
    security.check_password_length(password)


class UserService:
    """User management on top of the user store, hashing with the configured bcrypt cost."""

    def __init__(self, store: UserStore, bcrypt_rounds: int) -> None:
        self._store = store
        self._rounds = bcrypt_rounds

    def warm_up(self) -> None:
        """Compute the dummy hash now, so the first unknown-user login is not the slow one."""
        security.dummy_hash(self._rounds)

    def create_user(self, tenant_id: str, username: str, password: str) -> UserRecord:
        """Validate and add a user; InvalidInput or Conflict (name taken) on failure."""
        validate_tenant_id(tenant_id)
        name = validate_username(username)
        validate_password(password)
        password_hash = security.hash_password(password, self._rounds)
        return self._store.add(tenant_id, name, password_hash)

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
        return user


def build_user_service(settings: Settings, database: Database) -> UserService:
    """The user service on the service database with the configured bcrypt cost."""
    return UserService(UserStore(database), settings.bcrypt_rounds)
