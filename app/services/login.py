"""Login with abuse limits that cannot be aimed at someone else.

Order matters. The client's own budget is checked first (every attempt from one client counts;
an IPv6 client is one /64, the block a single subscriber gets), so a flood is refused before any
per-account state is touched. Then the failures of this (account, client) pair: only a wrong
password counts, a refused attempt does not, and a success clears them, so an attacker on
another client cannot lock the real user out. Then, for a client new to the account, the
account's day (`daily_failures_per_account` failures in 24 hours lock new clients out until the
day ends, reported once in the audit log) and its pace (`account_pace`): many clients together
may not guess one account's password faster than one check every few seconds. The account's
own known clients (signed in to it in the last 30 days) skip both. Last, the bcrypt check itself
takes one of a few slots: it costs ~0.25 s of a core, and a burst of logins must not queue
behind each other for minutes holding request threads, so beyond a short bounded wait the login
is refused at once with Retry-After.

An account is the tenant and user name whose password is checked (`LoginTarget.account`), so a
name two tenants have is two accounts, each with its own limits.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from app.config import Settings
from app.errors import AccountLocked, AuthenticationFailed, RateLimited
from app.security import IssuedToken, TokenCodec
from app.services.audit import Actor, AuditLog
from app.services.users import LoginTarget, UserService
from app.storage.audit import NO_TENANT, AuditEntry
from app.storage.rate_limit import RateDecision, RateLimiter
from app.storage.users import UserRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

PASSWORD_SIGN_IN_OFF = (
    'this organisation signs in through its identity provider: use "Sign in with" on the '
    "sign-in page"
)
TOO_MANY_ATTEMPTS = "too many login attempts; try again later"
BUSY = "the service is checking too many logins right now; try again in a moment"
# How long a login may wait for a free bcrypt slot: a few checks' time, not minutes.
SLOT_WAIT_S = 1.0
# An account's pace: from N failures in the last minute (all clients together) one password
# check per 1 s, from 2N per 2 s, from 4N per 4 s, never slower.
PACE_STEPS_S = (1.0, 2.0, 4.0)
# How long a client that logged in to an account stays known to it (exempt from its pace and
# its daily lock).
KNOWN_CLIENT_S = 30 * 24 * 3600.0
# The period of an account's daily failure count: it starts with the first failure.
DAY_S = 24 * 3600.0
LOCKED_MESSAGE = (
    "too many failed sign-ins to this account today: only devices that signed in to it "
    "recently may try now; others can try again later"
)


def client_bucket(client: str) -> str:
    """The key a client's attempts are counted under: its IPv4 address, or its IPv6 /64.

    One IPv6 subscriber gets at least a /64 and may use any address in it, so counting per
    address would give one client 2**64 fresh budgets.
    """
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return client  # "unknown", a test client name
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return str(address)


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
    """Checks credentials behind the per-client, per-(user, client), per-account and bcrypt
    limits."""

    def __init__(
        self,
        users: UserService,
        limiter: RateLimiter,
        slots: HashSlots,
        *,
        attempts_per_ip: int,
        failures_per_client: int,
        failures_per_account: int,
        daily_failures_per_account: int,
        audit: AuditLog | None = None,
    ) -> None:
        self._users = users
        self._limiter = limiter
        self._slots = slots
        self._attempts_per_ip = attempts_per_ip
        self._failures_per_client = failures_per_client
        self._failures_per_account = failures_per_account
        self._daily_failures = daily_failures_per_account
        self._audit = audit
        # Failures beyond the last pace step change nothing, so the count stops there.
        self._account_count_cap = failures_per_account << (len(PACE_STEPS_S) - 1)

    def login(
        self, username: str, password: str, client: str, *, tenant: str | None = None
    ) -> UserRecord:
        """The user for these credentials; AuthenticationFailed, TenantRequired (the password
        was right, the name needs its tenant), AccountLocked or RateLimited otherwise."""
        bucket = client_bucket(client)
        self._allow(self._limiter.hit(f"auth-ip:{bucket}", self._attempts_per_ip))
        target = self._users.login_target(username, tenant=tenant)
        account = target.account
        failures = f"auth-fail:{account}|{bucket}"
        self._allow(self._limiter.peek(failures, self._failures_per_client))
        if not self._knows(target, bucket):
            self._refuse_if_locked(account)
            self._allow(self.account_pace(account))
        with self._slots.slot():
            try:
                user = self._users.check_login(target, password)
            except AuthenticationFailed:
                self._limiter.hit(failures, self._failures_per_client)
                self._limiter.hit(f"auth-account:{account}", self._account_count_cap)
                self._count_failure_of_the_day(target, client)
                raise
        self._limiter.reset(failures)
        self._limiter.remember(f"auth-known:{account}|{bucket}", KNOWN_CLIENT_S)
        return user

    def _knows(self, target: LoginTarget, bucket: str) -> bool:
        """Whether the client signed in to the account in the last KNOWN_CLIENT_S."""
        if self._limiter.remembers(f"auth-known:{target.account}|{bucket}"):
            return True
        # Noted before names were per tenant (keyed by the name alone, which named one account
        # then): the owner's devices stay known across the upgrade, for up to 30 days.
        return target.user is not None and self._limiter.remembers(
            f"auth-known:{target.name}|{bucket}"
        )

    def _refuse_if_locked(self, account: str) -> None:
        """AccountLocked when the account's failures of the day reached the cap."""
        day = self._limiter.tally(f"auth-day:{account}")
        if day.total >= self._daily_failures:
            raise AccountLocked(LOCKED_MESSAGE, retry_after_s=max(day.ends_in_s, 1.0))

    def _count_failure_of_the_day(self, target: LoginTarget, client: str) -> None:
        """Count a wrong password against the account's day; the one that reaches the cap
        locks new clients out and is written to the audit log (once per lock, not per refusal,
        so a flood cannot fill the log)."""
        count = self._limiter.count_up(f"auth-day:{target.account}", DAY_S)
        if count != self._daily_failures:
            return
        log.warning(
            "account %r reached %d failed logins today: clients new to it are locked out",
            target.account,
            count,
        )
        if self._audit is None:
            return
        user = target.user
        if user is None:  # a name nobody has: nothing to tell a tenant, the name not kept
            entry = Actor(NO_TENANT, None, client).entry("login.locked", failures=count)
        else:
            entry = Actor(user.tenant_id, None, client).entry(
                "login.locked",
                target_id=user.id,
                failures=count,
                username=user.username,
                locked_for_s=int(self._limiter.tally(f"auth-day:{target.account}").ends_in_s),
            )
        self._audit.record(entry)

    def check_current_password(self, *, user_id: str, check: Callable[[], T]) -> T:
        """`check()` (which verifies a signed-in user's current password) behind the same
        per-minute failure budget and bcrypt slots as a login, so a stolen token or key cannot
        guess its user's password without limit through POST /auth/password."""
        failures = f"password-fail:{user_id}"
        self._allow(self._limiter.peek(failures, self._failures_per_client))
        with self._slots.slot():
            try:
                return check()
            except AuthenticationFailed:
                self._limiter.hit(failures, self._failures_per_client)
                raise

    def account_pace(self, account: str) -> RateDecision:
        """Whether a client new to this account may have its password checked now.

        Clients that each stay under their own budgets (a botnet, or one attacker's many
        addresses) are capped together here: from `failures_per_account` failures in the last
        minute, all clients counted, one check per PACE_STEPS_S[0] s goes through, fewer as the
        failures grow, never fewer than one per PACE_STEPS_S[-1] s. In between the answer is
        429 with Retry-After and no password check: no bcrypt work for the flood, and a refused
        attempt counts for nothing, so hammering does not lengthen the wait.

        Why this cannot be aimed at the account's owner: a hard lock after N failures would let
        anyone who knows a user name keep its owner out by failing on purpose. Here the owner's
        clients, any that logged in to the account in the last 30 days (`auth-known`, by IPv4
        address or IPv6 /64), skip the pace entirely, and a new client waits seconds, never
        minutes. (Someone behind the owner's own address shares the exemption; the per-client
        limits still hold them.) A sleep before each check would not do instead: it caps nobody
        who sends in parallel, and it holds a request thread per waiting attempt. The pace is
        kept whether or not the user exists, so its answers reveal nothing.
        """
        counted = f"auth-account:{account}"
        hold_s: float | None = None
        for step, delay_s in enumerate(PACE_STEPS_S):
            if self._limiter.peek(counted, self._failures_per_account << step).allowed:
                break
            hold_s = delay_s
        if hold_s is None:
            return RateDecision(True, 0.0)
        decision = self._limiter.claim(f"auth-pace:{account}", hold_s)
        if decision.allowed:
            log.warning(
                "many failed logins for account %r from all clients: checks from clients "
                "new to it are paced to one per %.0f s",
                account,
                hold_s,
            )
        return decision

    @staticmethod
    def _allow(decision: tuple[bool, float]) -> None:
        allowed, retry_after_s = decision
        if not allowed:
            raise RateLimited(TOO_MANY_ATTEMPTS, retry_after_s=retry_after_s)


def build_login_guard(
    settings: Settings, users: UserService, limiter: RateLimiter, audit: AuditLog | None = None
) -> LoginGuard:
    """The guard configured by RAG_RATE_LIMIT_AUTH_PER_MINUTE and RAG_LOGIN_*."""
    return LoginGuard(
        users,
        limiter,
        HashSlots(settings.login_concurrency, settings.login_queue),
        attempts_per_ip=settings.rate_limit_auth_per_minute,
        failures_per_client=settings.login_failures_per_minute,
        failures_per_account=settings.login_account_failures_per_minute,
        daily_failures_per_account=settings.login_daily_failures_per_account,
        audit=audit,
    )


def log_in(
    guard: LoginGuard,
    codec: TokenCodec,
    audit: AuditLog,
    users: UserService,
    username: str,
    password: str,
    client: str,
    *,
    tenant: str | None = None,
    password_allowed: Callable[[UserRecord], bool] | None = None,
) -> IssuedToken:
    """An access token for valid credentials; AuthenticationFailed, TenantRequired or
    RateLimited otherwise. `password_allowed` says whether the user's tenant still allows
    password sign-in for them (single sign-on may turn it off but for break-glass admins).

    Successes and wrong credentials are in the audit log (a failure under the tenant of the
    account whose password was checked, if there is one; never the password).
    """
    try:
        user = guard.login(username, password, client, tenant=tenant)
    except AuthenticationFailed:
        # Credential failures only: they are bounded by the per-client limit, while refusals by
        # that limit are not, and writing each would let a flood fill the log.
        audit.record(_failed_login(users, username, tenant, client))
        raise
    if password_allowed is not None and not password_allowed(user):
        audit.record(Actor(user.tenant_id, user.id, client).entry("sso.password_refused"))
        raise AuthenticationFailed(PASSWORD_SIGN_IN_OFF)
    audit.record(Actor(user.tenant_id, user.id, client).entry("login.succeeded"))
    return codec.issue(user.id, user.tenant_id, session_version=user.session_version)


def _failed_login(users: UserService, username: str, tenant: str | None, client: str) -> AuditEntry:
    reason = "credentials"
    known = users.login_target(username, tenant=tenant).user if len(username) <= 64 else None
    if known is None:  # a name nobody has (maybe a mistyped password): not written down
        return Actor(NO_TENANT, None, client).entry("login.failed", reason=reason)
    actor = Actor(known.tenant_id, known.id, client)
    return actor.entry("login.failed", target_id=known.id, reason=reason, username=known.username)
