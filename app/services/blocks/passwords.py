"""Which new passwords are refused: too short, too long for bcrypt, common, or built on the
user's own name.

The common passwords are the 30,000 most frequent in leaked password sets, as shipped by the
`zxcvbn` package (its `passwords` frequency list, from Dropbox's zxcvbn). With a 12-character
minimum only a few hundred of them could be set as they are, so a password is also refused when
it is a common one with digits or symbols added before or after ("Sunshine2024!"), the way
people lengthen a short password to pass a minimum.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache

from app import security
from app.errors import InvalidInput, PasswordContainsUsername, PasswordTooCommon

MIN_PASSWORD_CHARS = 12
# Shorter words stripped of padding ("abc" in "abc123456789") are too weak a signal to refuse on.
MIN_COMMON_CORE_CHARS = 4
_PADDING = "0123456789!@#$%^&*()-_=+.,;:?/\\|~`'\"[]{}<> "


@lru_cache(maxsize=1)
def common_passwords() -> frozenset[str]:
    """The shipped list of common passwords, lower-cased, read once per process."""
    # The data module alone: importing the `zxcvbn` package would also build its matcher over
    # every list it ships (words, names; ~12 MB held for the life of the process).
    spec = importlib.util.find_spec("zxcvbn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the zxcvbn package (common passwords) is not installed")
    path = f"{next(iter(spec.submodule_search_locations))}/frequency_lists.py"
    data = importlib.util.spec_from_file_location("_zxcvbn_frequency_lists", path)
    if data is None or data.loader is None:
        raise RuntimeError(f"cannot read the common password list at {path}")
    module = importlib.util.module_from_spec(data)
    data.loader.exec_module(module)
    words: list[str] = module.FREQUENCY_LISTS["passwords"]
    return frozenset(word.lower() for word in words)


def is_common(password: str) -> bool:
    """Whether the password is a common one, or a common one padded with digits or symbols."""
    lowered = password.lower()
    common = common_passwords()
    if lowered in common:
        return True
    core = lowered.strip(_PADDING)
    return len(core) >= MIN_COMMON_CORE_CHARS and core in common


def validate_password(password: str, username: str | None = None) -> None:
    """InvalidInput (or a subclass with its own code) when the password may not be set."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidInput(f"password must be at least {MIN_PASSWORD_CHARS} characters long")
    if not password.strip():
        raise InvalidInput("password must not be only whitespace")
    security.check_password_length(password)
    if username and username.strip().lower() in password.lower():
        raise PasswordContainsUsername("password must not contain the user name")
    if is_common(password):
        raise PasswordTooCommon(
            "password is too common: it is, or is built on, one of the 30,000 passwords most "
            "used in leaked password lists; choose another (a few unrelated words work well)"
        )
