"""Which new passwords are refused, on the list the zxcvbn package ships: common ones as they
are or padded to the minimum length, and ones holding the user's own name."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput, PasswordContainsUsername, PasswordTooCommon
from app.services.blocks.passwords import MIN_PASSWORD_CHARS, common_passwords, validate_password

pytestmark = pytest.mark.unit


def test_the_shipped_list_is_the_top_30000_and_ranks_the_usual_suspects() -> None:
    common = common_passwords()
    assert len(common) >= 10_000
    assert {"123456", "password", "qwerty", "dragon", "letmein", "1qaz2wsx3edc"} <= common


@pytest.mark.parametrize(
    "password",
    [
        "1qaz2wsx3edc",  # 12 characters, on the list as it is
        "QazWsxEdcRfv",  # any letter case
        "Sunshine2024!!",  # a common word padded with digits and symbols
        "!!Dragon123456",
        "letmein12345678",  # "letmein" and a run of digits
    ],
)
def test_common_passwords_are_refused(password: str) -> None:
    with pytest.raises(PasswordTooCommon) as refused:
        validate_password(password, "someone")
    assert refused.value.code == "password_too_common" and refused.value.http_status == 422


@pytest.mark.parametrize(
    ("username", "password"),
    [
        ("alice", "xx-Alice-in-the-garden"),
        ("bob.smith@example.com", "BOB.SMITH@EXAMPLE.COM!"),
    ],
)
def test_a_password_holding_the_user_name_is_refused(username: str, password: str) -> None:
    with pytest.raises(PasswordContainsUsername) as refused:
        validate_password(password, username)
    assert refused.value.code == "password_contains_username"


def test_good_passphrases_and_the_old_rules_still_hold() -> None:
    for password in ("violet kettle on the stairs", "correct horse battery staple"):
        validate_password(password, "alice")
    with pytest.raises(InvalidInput, match=f"at least {MIN_PASSWORD_CHARS}"):
        validate_password("short", "alice")
    # A short core padded out is not "common" unless the core itself is on the list.
    validate_password("zq!82736450913", "alice")
