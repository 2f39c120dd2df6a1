"""Login with abuse limits that cannot be aimed at someone else.

Order matters. The client's own budget is checked first (every attempt from one client IP
counts), so a flood is refused before any per-account state is touched. Then the failures of
this (user name, client) pair: only a wrong password counts, a refused attempt does not, and a
success clears them, so an attacker on another client cannot lock the real user out. Last, the
bcrypt check itself takes one of a few slots: it costs ~0.25 s of a core, and a burst of
logins must not queue behind each other for minutes holding request threads, so beyond a short
bounded wait the login is refused at once with Retry-After.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from app.config import Settings
from app.errors import AuthenticationFailed, RateLimited
from app.security import IssuedToken, TokenCodec
from app.services.audit import Actor, AuditLog
from app.services.users import UserService, normalise_username
from app.storage.audit import NO_TENANT, AuditEntry
from app.storage.rate_limit import RateLimiter
from app.storage.users import UserRecord

TOO_MANY_ATTEMPTS = "too many login attempts; try again later"
BUSY = "the service is checking too many logins right now; try again in a moment"
# How long a login may wait for a free bcrypt slot: a few checks' time, not minutes.
SLOT_WAIT_S = 1.0


class HashSlots:
    """At most `slots` password checks at once, at most `queue` waiting (each ~SLOT_WAIT_S)."""

    def __init__(self, slots: int, queue: int, wait_s: float = SLOT_WAIT_S) -> None:
        self._free = threading.Semaphore(slots)
        self._queue = queue
        self._wait_s = wait_s
        self._waiting = 0
        self._lock = threading.Lock()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for the body; RateLimited when none frees up soon enough."""
        if not self._free.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self._queue:
                    raise RateLimited(BUSY, retry_after_s=1.0)
                self._waiting += 1
            try:
                acquired = self._free.acquire(timeout=self._wait_s)
            finally:
                with self._lock:
                    self._waiting -= 1
            if not acquired:
                raise RateLimited(BUSY, retry_after_s=1.0)
        try:
            yield
        finally:
            self._free.release()


class LoginGuard:
    """Checks credentials behind the per-client, per-(user, client) and bcrypt limits."""

    def __init__(
        self,
        users: UserService,
        limiter: RateLimiter,
        slots: HashSlots,
        *,
        attempts_per_ip: int,
        failures_per_account: int,
    ) -> None:
        self._users = users
        self._limiter = limiter
        self._slots = slots
        self._attempts_per_ip = attempts_per_ip
        self._failures_per_account = failures_per_account

    def login(self, username: str, password: str, client: str) -> UserRecord:
        """The user for these credentials; AuthenticationFailed or RateLimited otherwise."""
        self._allow(self._limiter.hit(f"auth-ip:{client}", self._attempts_per_ip))
        failures = f"auth-fail:{normalise_username(username)}|{client}"
        self._allow(self._limiter.peek(failures, self._failures_per_account))
        with self._slots.slot():
            try:
                user = self._users.authenticate(username, password)
            except AuthenticationFailed:
                self._limiter.hit(failures, self._failures_per_account)
                raise
        self._limiter.reset(failures)
        return user

    @staticmethod
    def _allow(decision: tuple[bool, float]) -> None:
        allowed, retry_after_s = decision
        if not allowed:
            raise RateLimited(TOO_MANY_ATTEMPTS, retry_after_s=retry_after_s)


def build_login_guard(settings: Settings, users: UserService, limiter: RateLimiter) -> LoginGuard:
    """The guard configured by RAG_RATE_LIMIT_AUTH_PER_MINUTE and RAG_LOGIN_*."""
    return LoginGuard(
        users,
        limiter,
        HashSlots(settings.login_concurrency, settings.login_queue),
        attempts_per_ip=settings.rate_limit_auth_per_minute,
        failures_per_account=settings.login_failures_per_minute,
    )


def log_in(
    guard: LoginGuard,
    codec: TokenCodec,
    audit: AuditLog,
    users: UserService,
    username: str,
    password: str,
    client: str,
) -> IssuedToken:
    """An access token for valid credentials; AuthenticationFailed or RateLimited otherwise.

    Successes and wrong credentials are in the audit log (a failure under the named user's
    tenant, if the name exists; never the password).
    """
    try:
        user = guard.login(username, password, client)
    except AuthenticationFailed:
        # Credential failures only: they are bounded by the per-client limit, while refusals by
        # that limit are not, and writing each would let a flood fill the log.
        audit.record(_failed_login(users, username, client))
        raise
    audit.record(Actor(user.tenant_id, user.id, client).entry("login.succeeded"))
    return codec.issue(user.id, user.tenant_id, session_version=user.session_version)


def _failed_login(users: UserService, username: str, client: str) -> AuditEntry:
    reason = "credentials"
    known = users.find(username) if len(username) <= 64 else None
    if known is None:  # a name nobody has (maybe a mistyped password): not written down
        return Actor(NO_TENANT, None, client).entry("login.failed", reason=reason)
    actor = Actor(known.tenant_id, known.id, client)
    return actor.entry("login.failed", known.id, reason=reason, username=known.username)
