"""What bcrypt costs, for tests: the cost factor in a stored hash, and the checks a login makes."""

from __future__ import annotations

import pytest

from app import security


def bcrypt_cost(password_hash: str) -> int:
    """The cost factor recorded in a bcrypt hash (`$2b$12$...` -> 12)."""
    _, scheme, cost, rest = password_hash.split("$", 3)
    assert scheme in ("2a", "2b", "2y") and cost.isdigit() and len(rest) == 53, password_hash
    return int(cost)


def record_password_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hashes `security.verify_password` is asked to check from now on, one per bcrypt
    check (each is still checked)."""
    checked: list[str] = []
    real_verify = security.verify_password

    def verify(password: str, password_hash: str) -> bool:
        checked.append(password_hash)
        return real_verify(password, password_hash)

    monkeypatch.setattr(security, "verify_password", verify)
    return checked
