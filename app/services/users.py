"""Creating, listing, changing, deleting and authenticating users (the CLI, `/users`,
`/auth/password` and `/auth/token`); the last enabled admin of a tenant always stays, and an API
key never administers users or passwords (only a signed-in person does).

A user name is unique within its tenant. A login may name the tenant; without one, a name only
one tenant has is enough, and a name several tenants have needs it (TenantRequired).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app import security
from app.domain import ROLES, ListedPage, Role
from app.errors import AuthenticationFailed, InvalidInput, KeyNotAllowed, NotFound, TenantRequired
from app.services.audit import Actor
from app.services.blocks.passwords import validate_password
from app.storage.users import UserChange, UserRecord, UserStore

# Lower-case so "Alice" and "alice" cannot be two accounts; e-mail addresses are allowed.
USERNAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._@+-]{2,63}$")
# Tenant ids end up in collection names, paths and cache keys: keep them plain.
TENANT_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$")
LOGIN_FAILED_MESSAGE = "incorrect username or password"
TENANT_REQUIRED_MESSAGE = (
    "this user name is used in more than one organisation: give yours as `tenant`"
)


def normalise_username(username: str) -> str:
    """The stored form of a user name: trimmed and lower-cased."""
    return username.strip().lower()


def validate_tenant_id(tenant_id: str) -> str:
    """The tenant id unchanged, or InvalidInput explaining the allowed form."""
    form = "1-64 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit"
    return _of_form(TENANT_PATTERN, tenant_id, f"tenant id {tenant_id!r}", form)


def validate_username(username: str) -> str:
    """The normalised user name, or InvalidInput explaining the allowed form."""
    form = "3-64 letters, digits or . _ @ + -, starting with a letter or digit"
    return _of_form(USERNAME_PATTERN, normalise_username(username), f"user name {username!r}", form)


def _of_form(pattern: re.Pattern[str], value: str, named: str, form: str) -> str:
    """`value` when `pattern` matches all of it, else InvalidInput saying what `named` must be."""
    if not pattern.fullmatch(value):
        raise InvalidInput(f"{named} is invalid: use {form}")
    return value


def validate_role(role: str) -> Role:
    """The role unchanged, or InvalidInput naming the roles there are."""
    if role not in ROLES:
        raise InvalidInput(f"role {role!r} is unknown: use one of {', '.join(ROLES)}")
    return role  # type: ignore[return-value]


def normalise_tenant(tenant: str | None) -> str | None:
    """A tenant a person typed (trimmed, lower-cased), or None when none was given."""
    if tenant is None or not tenant.strip():
        return None
    return tenant.strip().lower()


@dataclass(frozen=True)
class LoginTarget:
    """The account a login's password is checked against, and the key its limits count under.

    `user` is None when no account matches (a dummy hash is checked instead). `ambiguous`: no
    tenant was given and several tenants have the name; `user` is then the one that had it
    first, and only a password right for it learns that a tenant is needed.
    """

    name: str
    account: str  # "tenant/name", "*/name" for a name nobody has
    user: UserRecord | None
    ambiguous: bool = False


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
        *,
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
        validate_password(password, name)
        password_hash = security.hash_password(password, self._rounds)
        audit = actor.entry("user.created") if actor else None
        return self._store.add(tenant_id, name, password_hash, checked, audit)

    def page(self, *, tenant_id: str, limit: int, offset: int) -> ListedPage[UserRecord]:
        """One page of the tenant's users by name, and how many there are."""
        return self._store.page(tenant_id, limit, offset)

    def change_user(
        self,
        actor: Actor,
        *,
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
            target = self._store.get(user_id)  # another tenant's id: NotFound comes below
            mine = target is not None and target.tenant_id == actor.tenant_id
            validate_password(password, target.username if target is not None and mine else None)
            password_hash = security.hash_password(password, self._rounds)
        change = UserChange(role=checked, disabled=disabled, password_hash=password_hash)
        return self._store.change(actor.tenant_id, user_id, change, actor.entry("user.changed"))

    def remove_user(self, actor: Actor, *, user_id: str) -> None:
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
        validate_password(new, user.username)
        change = UserChange(password_hash=security.hash_password(new, self._rounds))
        return self._store.change(actor.tenant_id, user.id, change, actor.entry("password.changed"))

    def operator_change(
        self,
        username: str,
        role: str | None = None,
        disabled: bool | None = None,
        *,
        tenant: str | None = None,
    ) -> UserRecord:
        """The CLI's change of a user by name (same rules as the API, no actor)."""
        user = self.resolve(username, tenant=tenant)
        checked = validate_role(role) if role is not None else None
        change = UserChange(role=checked, disabled=disabled)
        operator = Actor(tenant_id=user.tenant_id, user_id=None, client_ip="cli")
        return self._store.change(user.tenant_id, user.id, change, operator.entry("user.changed"))

    def resolve(self, username: str, *, tenant: str | None = None) -> UserRecord:
        """The user an operator names (any letter case): in the tenant, or the only one with
        the name; NotFound, or TenantRequired when several tenants have it."""
        name = normalise_username(username)
        chosen = normalise_tenant(tenant)
        if chosen is not None:
            user = self._store.get_by_username(chosen, name)
            if user is None:
                raise NotFound(f"no user named {username} in tenant {chosen}")
            return user
        named = self._store.named(name)
        if not named:
            raise NotFound(f"no user named {username}")
        if len(named) > 1:
            tenants = ", ".join(sorted(user.tenant_id for user in named))
            raise TenantRequired(f"user name {username} is in tenants {tenants}: give --tenant")
        return named[0]

    def list_users(self, tenant_id: str | None = None) -> list[UserRecord]:
        """Users of one tenant, or all users when tenant_id is None."""
        return self._store.list(tenant_id)

    def delete_user(self, username: str, *, tenant: str | None = None) -> bool:
        """Delete a user by name (see `resolve`); returns whether one existed."""
        try:
            user = self.resolve(username, tenant=tenant)
        except NotFound:
            return False
        return self._store.delete(user.tenant_id, user.username)

    def get(self, user_id: str) -> UserRecord | None:
        """The user with this id, or None once deleted (its tokens stop working)."""
        return self._store.get(user_id)

    def login_target(self, username: str, *, tenant: str | None = None) -> LoginTarget:
        """The account a login names (no password check yet); see LoginTarget."""
        name = normalise_username(username)
        chosen = normalise_tenant(tenant)
        # A name or tenant that could never have been created is not looked up.
        if not USERNAME_PATTERN.fullmatch(name) or (
            chosen is not None and not TENANT_PATTERN.fullmatch(chosen)
        ):
            return LoginTarget(name, f"{chosen or '*'}/{name}", None)
        if chosen is not None:
            return LoginTarget(name, f"{chosen}/{name}", self._store.get_by_username(chosen, name))
        named = self._store.named(name)
        if not named:
            return LoginTarget(name, f"*/{name}", None)
        first = named[0]
        return LoginTarget(name, f"{first.tenant_id}/{name}", first, ambiguous=len(named) > 1)

    def check_login(self, target: LoginTarget, password: str) -> UserRecord:
        """The target's user if the password is right; AuthenticationFailed otherwise, or
        TenantRequired when it is right but the name is in several tenants and none was given.

        Every path costs exactly one bcrypt check (a dummy hash of the same cost for a name
        nobody has), so neither the time nor the answer tells a guesser whether the name exists
        or how many tenants have it: only the right password learns that a tenant is needed.
        """
        user = target.user
        if user is None:
            security.verify_password(password, security.dummy_hash(self._rounds))
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        if not security.verify_password(password, user.password_hash):
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        if user.disabled:  # after the hash check: the reply says nothing a guesser could use
            raise AuthenticationFailed(LOGIN_FAILED_MESSAGE)
        if target.ambiguous:
            raise TenantRequired(TENANT_REQUIRED_MESSAGE)
        return user

    def authenticate(
        self, username: str, password: str, *, tenant: str | None = None
    ) -> UserRecord:
        """The user these credentials belong to; AuthenticationFailed or TenantRequired."""
        return self.check_login(self.login_target(username, tenant=tenant), password)
