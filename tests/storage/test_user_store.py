"""Users on a real SQLite file and the local PostgreSQL: creation rules, scoping, login."""

from __future__ import annotations

from typing import Any

import pytest

from app import security
from app.config import Settings
from app.errors import AuthenticationFailed, Conflict, InvalidInput
from app.services.users import LOGIN_FAILED_MESSAGE, UserService
from app.storage.db import Database, open_database
from app.storage.users import UserStore
from tests.bcrypt_cost import bcrypt_cost

pytestmark = pytest.mark.integration

PASSWORD = "a long enough passphrase"


def user_service(settings: Settings, database: Database) -> UserService:
    """The user service as the container builds it, on `database`."""
    return UserService(UserStore(database, settings.quota_users), settings.bcrypt_rounds)


@pytest.fixture
def users(sql_database: Database, settings: Settings) -> UserService:
    return user_service(settings, sql_database)


def test_created_user_can_log_in_and_gets_its_tenant(users: UserService) -> None:
    created = users.create_user(tenant_id="acme", username="Alice@Example.com", password=PASSWORD)
    assert (created.tenant_id, created.username) == ("acme", "alice@example.com")
    assert created.created_at.tzinfo is not None
    user = users.authenticate("alice@example.com", PASSWORD)
    assert (user.id, user.tenant_id) == (created.id, "acme")
    # The name is matched the way it was stored, whatever case the user types.
    assert users.authenticate("ALICE@example.com", PASSWORD).id == created.id


def test_stored_hash_uses_the_configured_cost_and_not_the_password(
    users: UserService, sql_database: Database, settings: Settings
) -> None:
    users.create_user(tenant_id="acme", username="bob", password=PASSWORD)
    stored = UserStore(sql_database).get_by_username("acme", "bob")
    assert stored is not None
    assert bcrypt_cost(stored.password_hash) == settings.bcrypt_rounds >= 12
    assert PASSWORD not in stored.password_hash


def test_wrong_password_and_unknown_user_fail_the_same_way(users: UserService) -> None:
    users.create_user(tenant_id="acme", username="carol", password=PASSWORD)
    with pytest.raises(AuthenticationFailed) as wrong_password:
        users.authenticate("carol", PASSWORD + "!")
    with pytest.raises(AuthenticationFailed) as unknown_user:
        users.authenticate("nobody", PASSWORD)
    assert wrong_password.value.message == unknown_user.value.message == LOGIN_FAILED_MESSAGE


def test_unknown_user_still_pays_for_a_bcrypt_check_at_full_cost(
    users: UserService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[tuple[str, str]] = []
    real_verify = security.verify_password

    def recording_verify(password: str, password_hash: str) -> bool:
        checked.append((password, password_hash))
        return real_verify(password, password_hash)

    monkeypatch.setattr(security, "verify_password", recording_verify)
    for unknown in ("ghost", "not a valid name!", "x" * 10_000):
        with pytest.raises(AuthenticationFailed):
            users.authenticate(unknown, PASSWORD)
    assert len(checked) == 3
    assert {password_hash for _, password_hash in checked} == {
        security.dummy_hash(settings.bcrypt_rounds)
    }
    assert bcrypt_cost(checked[0][1]) == settings.bcrypt_rounds


def test_user_names_are_unique_within_a_tenant_whatever_the_case(users: UserService) -> None:
    users.create_user(tenant_id="acme", username="dave", password=PASSWORD)
    with pytest.raises(Conflict):
        users.create_user(tenant_id="acme", username="DAVE", password=PASSWORD)
    # Another tenant's dave is another user (names are unique per tenant since migration 0008).
    other = users.create_user(tenant_id="globex", username="DAVE", password=PASSWORD)
    assert (other.tenant_id, other.username) == ("globex", "dave")


BAD_INPUTS: list[dict[str, Any]] = [
    {"tenant_id": "Acme"},  # upper case
    {"tenant_id": "acme/../x"},
    {"tenant_id": ""},
    {"tenant_id": "-acme"},
    {"tenant_id": "a" * 65},
    {"username": "ab"},
    {"username": "eve smith"},
    {"username": "eve;drop"},
    {"username": "x" * 65},
    {"password": "short"},
    {"password": " " * 20},
    {"password": "é" * 37},  # 74 bytes: over bcrypt's limit
]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[str(b) for b in BAD_INPUTS])
def test_invalid_tenant_user_name_or_password_is_refused_with_a_reason(
    users: UserService, bad: dict[str, Any]
) -> None:
    arguments = {"tenant_id": "acme", "username": "eve", "password": PASSWORD, **bad}
    with pytest.raises(InvalidInput) as caught:
        users.create_user(**arguments)
    assert caught.value.message
    assert users.list_users() == []


def test_list_users_by_tenant_and_delete(users: UserService) -> None:
    users.create_user(tenant_id="acme", username="frank", password=PASSWORD)
    users.create_user(tenant_id="acme", username="grace", password=PASSWORD)
    users.create_user(tenant_id="globex", username="heidi", password=PASSWORD)
    assert [u.username for u in users.list_users("acme")] == ["frank", "grace"]
    assert [u.username for u in users.list_users("globex")] == ["heidi"]
    assert len(users.list_users()) == 3

    assert users.delete_user("Frank") is True
    assert users.delete_user("frank") is False
    with pytest.raises(AuthenticationFailed):
        users.authenticate("frank", PASSWORD)
    assert [u.username for u in users.list_users("acme")] == ["grace"]


def test_users_survive_a_restart(sql_database: Database, settings: Settings) -> None:
    user_service(settings, sql_database).create_user(
        tenant_id="acme", username="ivan", password=PASSWORD
    )
    sql_database.dispose()
    reopened = open_database(sql_database.url)
    try:
        assert user_service(settings, reopened).authenticate("ivan", PASSWORD).tenant_id == ("acme")
    finally:
        reopened.dispose()
