"""Sending queued webhook events: signed as Standard Webhooks, at least once, with backoff.

Deliveries are rows of the service database (app/storage/webhooks.py), so they survive a
restart. A `WebhookDispatcher` thread runs in whichever process runs ingestion jobs (the API
process with the threads backend, `python -m app.worker` with Redis): it claims due deliveries,
checks the URL again (DNS rebinding) and connects to the address it checked, POSTs with a 5 s
timeout and no redirects, and records the outcome. A failure is retried after
RAG_WEBHOOK_RETRY_BASE_S, doubling up to an hour, for 24 hours; 50 failures in a row disable
the webhook, with an audit entry. `webhook-id` is the delivery's id on every attempt, so a
receiver can drop a repeat.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx

from app.errors import InvalidInput
from app.services.blocks.webhook_urls import Target, UrlRules, check_url
from app.storage.audit import AuditEntry
from app.storage.db import utc_now
from app.storage.webhooks import DeliveryRecord, WebhookRecord, WebhookStore
from app.wakeable_thread import WakeableThread

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0
RETRY_FOR = timedelta(hours=24)
MAX_RETRY_DELAY_S = 3600.0
DISABLE_AFTER_FAILURES = 50
LEASE = timedelta(seconds=30)  # longer than an attempt can take
BATCH = 20


SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A signing secret in Standard Webhooks form: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(secret: str, *, message_id: str, timestamp: int, body: str) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`, keyed with the secret's
    base64 part decoded (Standard Webhooks)."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    secret: str, *, message_id: str, body: str, now: float | None = None
) -> dict[str, str]:
    """The headers of one attempt: id, timestamp (seconds) and signature."""
    timestamp = int(time.time() if now is None else now)
    return {
        "content-type": "application/json",
        "user-agent": "rag-service-webhooks",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(
            secret, message_id=message_id, timestamp=timestamp, body=body
        ),
    }


def retry_delay_s(attempts: int, base_s: float) -> float:
    """The wait after the `attempts`-th failed attempt: base, doubling, at most an hour."""
    return float(min(base_s * 2 ** max(attempts - 1, 0), MAX_RETRY_DELAY_S))


@dataclass(frozen=True)
class Outcome:
    """How one attempt went: a 2xx status, or a status or error that failed it."""

    ok: bool
    status_code: int | None = None
    error: str = ""


def _pinned(target: Target) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL to request, extra headers and extensions that connect to the checked address
    while naming the host (Host header, TLS server name)."""
    if target.address is None:
        return target.url, {}, {}
    parts = urlsplit(target.url)
    literal = f"[{target.address}]" if ":" in target.address else target.address
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host = parts.hostname or target.host
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return url, {"host": host_header}, extensions


def _sending_client() -> httpx.Client:
    """5 s per attempt, no redirects, no proxy from the environment (it would not be the
    address checked)."""
    return httpx.Client(timeout=TIMEOUT_S, follow_redirects=False, trust_env=False)


# Whether a webhook may hear of an event now (its creator reads what the event is about).
MayDeliver = Callable[[WebhookRecord, DeliveryRecord], bool]
NOT_READABLE = "the webhook's creator may not read the document's collection"


class WebhookDispatcher:
    """A daemon thread sending due deliveries until stopped; `run_due` is one pass."""

    def __init__(
        self,
        store: WebhookStore,
        rules: UrlRules,
        retry_base_s: float,
        poll_s: float = 1.0,
        may_deliver: MayDeliver | None = None,
    ) -> None:
        self._store = store
        self._may_deliver = may_deliver
        self._rules = rules
        self._retry_base_s = retry_base_s
        self._poll_s = poll_s
        self._thread = WakeableThread(self._loop, "webhooks")
        self._client = _sending_client()

    def start(self) -> None:
        """Start sending (deliveries left pending by an earlier process are sent too)."""
        if self._client.is_closed:
            self._client = _sending_client()
        self._thread.start()

    def wake(self) -> None:
        """Look for due deliveries now (an event was just queued)."""
        self._thread.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the current attempt and stop."""
        self._thread.stop(timeout_s)
        self._client.close()

    def _loop(self) -> None:
        while not self._thread.stopping:
            try:
                sent = self.run_due()
            except Exception:
                log.exception("webhook deliveries could not be read")
                sent = 0
            if not sent:
                self._thread.wait(self._poll_s)
                self._thread.take_wake()

    def run_due(self) -> int:
        """Attempt every delivery that is due now; how many were attempted."""
        due = self._store.claim_due(BATCH, LEASE)
        for delivery in due:
            if self._thread.stopping:
                break
            self._attempt(delivery)
        return len(due)

    def _attempt(self, delivery: DeliveryRecord) -> None:
        webhook = self._store.webhook_of(delivery)
        if webhook is None or not webhook.enabled:
            self._store.abandon(delivery, "the webhook was deleted or disabled")
            return
        if self._may_deliver is not None and not self._may_deliver(webhook, delivery):
            self._store.abandon(delivery, NOT_READABLE)
            return
        outcome = self._send(webhook, delivery)
        if outcome.ok:
            assert outcome.status_code is not None
            self._store.delivered(delivery, outcome.status_code)
            return
        attempts = delivery.attempts + 1
        retry_at = utc_now() + timedelta(seconds=retry_delay_s(attempts, self._retry_base_s))
        if retry_at - delivery.created_at > RETRY_FOR:
            retry_at = None  # type: ignore[assignment]
        disabled_audit = AuditEntry(
            tenant_id=webhook.tenant_id,
            action="webhook.disabled",
            user_id=None,
            target_id=webhook.webhook_id,
            client_ip=None,
            detail={"failures": DISABLE_AFTER_FAILURES, "last_error": outcome.error[:200]},
        )
        disabled = self._store.attempt_failed(
            delivery,
            outcome.status_code,
            outcome.error,
            retry_at,
            DISABLE_AFTER_FAILURES,
            disabled_audit,
        )
        log.warning(
            "webhook delivery failed",
            extra={
                "webhook_id": webhook.webhook_id,
                "delivery_id": delivery.delivery_id,
                "attempts": attempts,
                "error": outcome.error,
                "disabled": disabled,
            },
        )

    def _send(self, webhook: WebhookRecord, delivery: DeliveryRecord) -> Outcome:
        try:
            target = check_url(webhook.url, self._rules)
        except InvalidInput as exc:
            return Outcome(False, None, exc.message)
        url, extra, extensions = _pinned(target)
        headers = {
            **signed_headers(webhook.secret, message_id=delivery.delivery_id, body=delivery.body),
            **extra,
        }
        try:
            response = self._client.post(
                url, content=delivery.body.encode(), headers=headers, extensions=extensions
            )
        except httpx.HTTPError as exc:
            return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:300])
        if 200 <= response.status_code < 300:
            return Outcome(True, response.status_code)
        return Outcome(False, response.status_code, f"answered {response.status_code}")
