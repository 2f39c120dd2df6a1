"""Webhook delivery on the real database and a real local receiver: the SSRF guard (at
creation and at every delivery), the signature, and disabling after 50 failures in a row."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.errors import InvalidInput
from app.services.audit import Actor
from app.services.blocks.webhook_delivery import WebhookDispatcher, signature
from app.services.blocks.webhook_urls import UrlRules, check_url
from app.services.webhooks import DocumentEvents, WebhookDeps, create_webhook
from app.storage.audit import AuditStore
from app.storage.db import Database, utc_now
from app.storage.tables import WebhookDeliveryRow
from app.storage.webhooks import WebhookRecord, WebhookStore
from tests.api.webhook_receiver import Receiver

pytestmark = pytest.mark.integration

ALLOW = UrlRules(require_https=False, allow_private=True)
GUARD = UrlRules(require_https=False, allow_private=False)


@pytest.fixture
def store(sql_database: Database) -> WebhookStore:
    return WebhookStore(sql_database)


ADMIN = Actor("acme", "user-1", "127.0.0.1")


def make_hook(deps: WebhookDeps, url: str, event: str) -> WebhookRecord:
    """An admin of acme registers a webhook for one event."""
    return create_webhook(deps, actor=ADMIN, url=url, events=[event], description=None)


def _acme_document_event(
    events: DocumentEvents, event_type: str, document_id: str, source: str, status: str
) -> None:
    events.document(
        tenant_id="acme",
        event_type=event_type,
        document_id=document_id,
        source=source,
        status=status,
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://localhost:8080/hook",  # a name that resolves to 127.0.0.1
        "http://10.1.2.3/",
        "http://192.168.0.9/",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://100.100.100.200/",  # shared address space (a metadata service)
    ],
)
def test_private_and_loopback_targets_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput, match="refused"):
        check_url(url, GUARD)


def test_public_targets_pass_and_production_requires_https() -> None:
    public = UrlRules(False, False, resolver=lambda host, port: ["93.184.215.14"])
    assert check_url("http://example.org/hook", public).address == "93.184.215.14"
    production = UrlRules(True, False, resolver=lambda host, port: ["93.184.215.14"])
    with pytest.raises(InvalidInput, match="https"):
        check_url("http://example.org/hook", production)
    with pytest.raises(InvalidInput, match="user or password"):
        check_url("https://user:pw@example.org/", production)


def test_a_name_that_rebinds_to_loopback_is_refused_at_delivery(
    store: WebhookStore, receiver: Receiver
) -> None:
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])  # public when made, loopback later
    rebinding = UrlRules(False, False, resolver=lambda host, port: next(answers))
    url = f"http://rebind.example:{receiver.port}/hook"
    hook = make_hook(WebhookDeps(store, rebinding), url, "document.deleted")
    _acme_document_event(DocumentEvents(store), "document.deleted", "doc_1", "a.txt", "deleted")
    assert WebhookDispatcher(store, rebinding, retry_base_s=60).run_due() == 1
    assert receiver.requests == []  # never connected
    (delivery,) = store.deliveries("acme", hook.webhook_id, 10, 0).records
    assert delivery.status == "pending" and "127.0.0.1" in (delivery.last_error or "")


def test_the_signature_verifies_with_the_secret_key(
    store: WebhookStore, receiver: Receiver
) -> None:
    hook = make_hook(WebhookDeps(store, ALLOW), receiver.url, "document.indexed")
    receiver.secret = hook.secret
    _acme_document_event(DocumentEvents(store), "document.indexed", "doc_1", "a.txt", "done")
    WebhookDispatcher(store, ALLOW, retry_base_s=60).run_due()
    (got,) = receiver.requests
    assert got.signed
    assert got.body["type"] == "document.indexed" and got.body["data"]["source"] == "a.txt"
    # The Standard Webhooks example: its secret, id, timestamp and body give its signature.
    example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = '{"test": 2432232314}'
    assert signature(
        example, message_id="msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp=1614265330, body=body
    ) == ("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    assert base64.b64decode(hook.secret.removeprefix("whsec_"))  # base64 after the prefix


def test_fifty_failures_in_a_row_disable_the_webhook_with_an_audit_entry(
    store: WebhookStore, receiver: Receiver, sql_database: Database
) -> None:
    receiver.status = 500
    hook = make_hook(WebhookDeps(store, ALLOW), receiver.url, "document.deleted")
    events = DocumentEvents(store)
    for i in range(50):
        _acme_document_event(events, "document.deleted", f"doc_{i}", f"{i}.txt", "deleted")
    dispatcher = WebhookDispatcher(store, ALLOW, retry_base_s=3600)
    while dispatcher.run_due():
        pass
    assert len(receiver.requests) == 50
    disabled = store.get("acme", hook.webhook_id)
    assert disabled is not None and not disabled.enabled and disabled.disabled_reason
    entries = AuditStore(sql_database).list("acme", 10, 0, "webhook.disabled").records
    assert [entry.target_id for entry in entries] == [hook.webhook_id]
    _acme_document_event(events, "document.deleted", "doc_x", "x.txt", "deleted")
    dispatcher.run_due()
    assert len(receiver.requests) == 50  # a disabled webhook hears nothing more


def test_a_redirect_is_not_followed_and_a_day_of_failures_ends_the_retries(
    store: WebhookStore, receiver: Receiver, sql_database: Database
) -> None:
    receiver.status = 302  # it would send the service elsewhere: a failure, not followed
    hook = make_hook(WebhookDeps(store, ALLOW), receiver.url, "document.deleted")
    _acme_document_event(DocumentEvents(store), "document.deleted", "doc_1", "a.txt", "deleted")
    dispatcher = WebhookDispatcher(store, ALLOW, retry_base_s=60)
    assert dispatcher.run_due() == 1
    (delivery,) = store.deliveries("acme", hook.webhook_id, 10, 0).records
    assert (delivery.status, delivery.last_status_code) == ("pending", 302)
    assert len(receiver.requests) == 1
    assert delivery.next_attempt_at - utc_now() > timedelta(seconds=50)  # backoff, not at once

    with sql_database.session() as session:  # the event is a day old and due again
        session.execute(
            update(WebhookDeliveryRow).values(
                created_at=utc_now() - timedelta(hours=24), next_attempt_at=utc_now()
            )
        )
    assert dispatcher.run_due() == 1
    (delivery,) = store.deliveries("acme", hook.webhook_id, 10, 0).records
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    assert dispatcher.run_due() == 0  # no more attempts
