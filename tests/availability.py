"""What a test does when something it needs (a server, data, a font, a CLI) is missing.

It fails, so CI cannot go green by skipping a backend. A machine that really lacks the
dependency opts out explicitly with RAG_TEST_ALLOW_SKIP_SERVICES=1, and the test is skipped.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

ALLOW_SKIP_ENV = "RAG_TEST_ALLOW_SKIP_SERVICES"


def skips_allowed() -> bool:
    """True when the environment explicitly allows skipping tests whose dependency is missing."""
    return os.environ.get(ALLOW_SKIP_ENV) == "1"


def unavailable(message: str) -> NoReturn:
    """Skip when explicitly allowed, otherwise fail the test with the message."""
    if skips_allowed():
        pytest.skip(message)
    pytest.fail(f"{message} (set {ALLOW_SKIP_ENV}=1 to skip instead)")


def require(present: bool, message: str) -> None:
    """Go on when `present`; otherwise `unavailable(message)`."""
    if not present:
        unavailable(message)


def needs(present: bool, message: str) -> pytest.MarkDecorator:
    """A marker that makes the test `unavailable(message)` at set-up when not `present`."""
    return pytest.mark.needs(present=present, message=message)
