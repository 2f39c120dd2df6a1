"""What only the in-memory rate limiter does (forgetting idle keys), on a fake clock, and the
Retry-After header. Behaviour every backend shares is in test_rate_limit_conformance.py."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.storage.rate_limit import (
    MemoryRateLimiter,
    RateDecision,
    RedisRateLimiter,
    build_rate_limiter,
    retry_after_header,
)
from tests.fake_clock import FakeClock

pytestmark = pytest.mark.unit


def test_idle_keys_are_forgotten() -> None:
    clock = FakeClock(500.0)
    limiter = MemoryRateLimiter(clock)
    for i in range(999):
        limiter.hit(f"ip:{i}", 5)
    clock.now += 61
    limiter.hit("ip:new", 5)  # the 1000th call sweeps
    assert len(limiter._hits) == 1


@pytest.mark.parametrize(("wait", "header"), [(0.001, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_retry_after_header_rounds_up_to_whole_seconds(wait: float, header: str) -> None:
    assert retry_after_header(RateDecision(False, wait)) == header


def test_factory_builds_the_configured_backend(settings: Settings) -> None:
    assert isinstance(build_rate_limiter(settings), MemoryRateLimiter)
    shared = settings.model_copy(update={"rate_limit_backend": "redis"})
    assert isinstance(build_rate_limiter(shared), RedisRateLimiter)


def test_the_sweep_forgets_expired_remembered_keys() -> None:
    clock = FakeClock(500.0)
    limiter = MemoryRateLimiter(clock)
    limiter.remember("auth-known:alice|10.0.0.1", 30.0)
    clock.now += 31
    for i in range(1000):  # the 1000th hit sweeps expired marks too
        limiter.hit(f"ip:{i}", 5)
    assert "auth-known:alice|10.0.0.1" not in limiter._until
