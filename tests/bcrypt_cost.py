"""Reading the cost factor out of a bcrypt hash, for tests that check what was stored."""

from __future__ import annotations


def bcrypt_cost(password_hash: str) -> int:
    """The cost factor recorded in a bcrypt hash (`$2b$12$...` -> 12)."""
    _, scheme, cost, rest = password_hash.split("$", 3)
    assert scheme in ("2a", "2b", "2y") and cost.isdigit() and len(rest) == 53, password_hash
    return int(cost)
