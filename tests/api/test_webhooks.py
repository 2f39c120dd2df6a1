"""Webhooks from outside: a live server signs document events for a real local receiver,
retries while it is down, keeps retrying across a restart, and never crosses tenants."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.live_server import LiveServer
from testkit.waiting import wait_until
from tests.api.webhook_receiver import Receiver

pytestmark = pytest.mark.integration


@dataclass
class Tenant:
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@dataclass
class Hooks:
    server: LiveServer
    acme: Tenant
    globex: Tenant
    acme_reader: Tenant
    acme_ned: Tenant

    def call(self, tenant: Tenant, method: str, path: str, **kw: Any) -> httpx.Response:
        return httpx.request(
            method, f"{self.server.url}{path}", headers=tenant.headers, timeout=30, **kw
        )

    def upload(
        self, tenant: Tenant, name: str, text: str, collection: str = "general"
    ) -> dict[str, Any]:
        answer = self.call(
            tenant,
            "POST",
            "/documents",
            files={"file": (name, text.encode())},
            data={"collection": collection},
        )
        assert answer.status_code == 202, answer.text
        return answer.json()

    def ada_signed_in(self) -> Tenant:
        """Ada with an access token: users and keys are administered signed in."""
        signed_in = httpx.post(
            f"{self.server.url}/auth/token",
            data={"username": "ada", "password": "Hook-keeper 42 lighthouse", "tenant": "acme"},
        )
        assert signed_in.status_code == 200, signed_in.text
        return Tenant(signed_in.json()["access_token"])

    def remove_all(self) -> None:
        """Delete both tenants' webhooks (the next test starts without them)."""
        for tenant in (self.acme, self.globex):
            for hook in self.call(tenant, "GET", "/webhooks").json()["data"]:
                self.call(tenant, "DELETE", f"/webhooks/{hook['webhook_id']}")

    def make_hook(self, tenant: Tenant, receiver: Receiver, events: list[str]) -> dict[str, Any]:
        made = self.call(tenant, "POST", "/webhooks", json={"url": receiver.url, "events": events})
        assert made.status_code == 201, made.text
        receiver.secret = made.json()["secret"]
        return made.json()


def _key(server: LiveServer, username: str) -> str:
    printed = server.cli("create-key", "--username", username, "--name", "webhook tests")
    return next(word for word in printed.split() if word.startswith("rag_"))


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooks]:
    data = tmp_path_factory.mktemp("webhooks") / "data"
    server = LiveServer(
        data,
        {
            "RAG_ENV": "development",  # http receivers (production requires https)
            "RAG_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver listens on 127.0.0.1
            "RAG_WEBHOOK_RETRY_BASE_S": "0.5",
        },
    )
    server.create_user("acme", "ada", "Hook-keeper 42 lighthouse")
    server.create_user("acme", "rita", "Hook-reader 42 lighthouse", role="reader")
    server.create_user("acme", "ned", "Hook-maker 44 lighthouse", role="admin")
    server.create_user("globex", "gus", "Hook-keeper 43 lighthouse")
    tenants = Hooks(
        server,
        Tenant(_key(server, "ada")),
        Tenant(_key(server, "gus")),
        Tenant(_key(server, "rita")),
        Tenant(_key(server, "ned")),
    )
    with server.running():
        yield tenants


def test_document_events_arrive_signed_without_text_and_only_to_their_tenant(
    hooks: Hooks, receiver: Receiver
) -> None:
    made = hooks.make_hook(
        hooks.acme, receiver, ["document.indexed", "document.failed", "document.deleted"]
    )
    assert made["secret"].startswith("whsec_")
    other = Receiver().start()
    try:
        hooks.make_hook(hooks.globex, other, ["document.indexed", "document.deleted"])
        shown = hooks.call(hooks.acme, "GET", f"/webhooks/{made['webhook_id']}").json()
        assert "secret" not in shown and shown["url"] == receiver.url
        listed = hooks.call(hooks.acme, "GET", "/webhooks").json()
        assert all("secret" not in hook for hook in listed["data"])
        assert hooks.call(hooks.globex, "GET", f"/webhooks/{made['webhook_id']}").status_code == 404
        assert hooks.call(hooks.acme_reader, "GET", "/webhooks").status_code == 403

        job = hooks.upload(hooks.acme, "lighthouse.txt", "The lighthouse lamp turns every 9 s.")
        (indexed,) = receiver.wait_for("document.indexed")
        assert indexed.signed
        assert indexed.body["data"]["document_id"] == job["document_id"]
        assert indexed.body["data"]["source"] == "lighthouse.txt"
        assert indexed.body["data"]["status"] == "done"
        assert indexed.body["data"]["collection"] == {"id": "general", "name": "general"}
        assert indexed.body["timestamp"].endswith("Z")
        assert "lamp" not in str(indexed.body)  # ids and names, never the text

        hooks.upload(hooks.acme, "blank.txt", "")
        (failed,) = receiver.wait_for("document.failed")
        assert failed.signed and failed.body["data"]["error_code"]

        deleted = hooks.call(hooks.acme, "DELETE", f"/documents/{job['document_id']}")
        assert deleted.status_code == 204
        (gone,) = receiver.wait_for("document.deleted")
        assert gone.signed and gone.body["data"]["document_id"] == job["document_id"]
        assert gone.body["data"]["collection"]["id"] == "general"
        assert other.requests == []  # globex's webhook heard nothing of acme

        log = hooks.call(hooks.acme, "GET", f"/webhooks/{made['webhook_id']}/deliveries").json()
        assert {d["status"] for d in log["data"]} == {"delivered"}
        assert sorted(d["event_type"] for d in log["data"]) == [
            "document.deleted",
            "document.failed",
            "document.indexed",
        ]
    finally:
        other.stop()
        hooks.remove_all()


def test_deliveries_are_retried_while_the_receiver_is_down_and_across_a_restart(
    hooks: Hooks, receiver: Receiver
) -> None:
    made = hooks.make_hook(hooks.acme, receiver, ["document.indexed"])
    receiver.status = 503
    try:
        hooks.upload(hooks.acme, "tide-table.txt", "High tide at 06:12 and 18:40.")
        receiver_saw = wait_until(lambda: len(receiver.requests) >= 2, 60, 0.1)
        assert receiver_saw, "the failed delivery was not retried"
        first_ids = {r.headers["webhook-id"] for r in receiver.requests}
        assert len(first_ids) == 1  # one delivery, retried under the same webhook-id

        receiver.stop()  # down: connections refused
        hooks.server.crash()  # and the service dies in the middle of its retries
        receiver.status = 200
        receiver.start()
        hooks.server.start()
        (delivered,) = receiver.wait_for("document.indexed", timeout_s=90)
        assert delivered.headers["webhook-id"] in first_ids and delivered.signed
        log = hooks.call(hooks.acme, "GET", f"/webhooks/{made['webhook_id']}/deliveries").json()
        (entry,) = log["data"]
        assert entry["status"] == "delivered" and entry["attempts"] >= 3
    finally:
        hooks.call(hooks.acme, "DELETE", f"/webhooks/{made['webhook_id']}")


def test_bad_webhook_bodies_are_refused(hooks: Hooks, tmp_path: Path) -> None:
    bad_event = hooks.call(
        hooks.acme, "POST", "/webhooks", json={"url": "http://example.org/", "events": ["x"]}
    )
    assert bad_event.status_code == 422
    assert bad_event.json()["error"]["code"] == "validation_error"
    no_scheme = hooks.call(
        hooks.acme,
        "POST",
        "/webhooks",
        json={"url": "ftp://example.org/", "events": ["document.indexed"]},
    )
    assert no_scheme.status_code == 422 and "http" in no_scheme.json()["error"]["message"]


def test_a_webhook_hears_only_of_documents_its_creator_reads_when_it_is_delivered(
    hooks: Hooks, receiver: Receiver
) -> None:
    made = hooks.make_hook(hooks.acme_ned, receiver, ["document.indexed"])
    vault = hooks.call(
        hooks.acme, "POST", "/collections", json={"name": "vault", "visibility": "restricted"}
    )
    assert vault.status_code == 201, vault.text
    users = hooks.call(hooks.acme, "GET", "/users", params={"limit": 100}).json()["data"]
    ned = next(u for u in users if u["username"] == "ned")
    ada = hooks.ada_signed_in()
    demoted = hooks.call(ada, "PATCH", f"/users/{ned['user_id']}", json={"role": "member"})
    assert demoted.status_code == 200, demoted.text
    try:
        hooks.upload(hooks.acme, "codes.txt", "The vault opens with the brass key.", "vault")
        public = hooks.upload(hooks.acme, "canteen.txt", "The canteen opens at noon.")
        (heard,) = receiver.wait_for("document.indexed")
        assert heard.body["data"]["document_id"] == public["document_id"]

        def settled() -> list[dict[str, Any]]:
            path = f"/webhooks/{made['webhook_id']}/deliveries"
            return hooks.call(hooks.acme, "GET", path).json()["data"]

        assert wait_until(
            lambda: {d["status"] for d in settled()} == {"delivered", "failed"}, 60, 0.1
        )
        (withheld,) = [d for d in settled() if d["status"] == "failed"]
        assert "may not read" in withheld["last_error"]
        assert [r.body["data"]["source"] for r in receiver.requests] == ["canteen.txt"]
    finally:
        hooks.call(hooks.acme, "DELETE", f"/webhooks/{made['webhook_id']}")


def test_collection_changes_arrive_signed_and_only_to_their_tenant(
    hooks: Hooks, receiver: Receiver
) -> None:
    events = ["collection.created", "collection.changed", "collection.deleted"]
    made = hooks.make_hook(hooks.acme, receiver, events)
    other = Receiver().start()
    try:
        hooks.make_hook(hooks.globex, other, events)
        created = hooks.call(hooks.acme, "POST", "/collections", json={"name": "harbour"})
        assert created.status_code == 201, created.text
        harbour = created.json()["collection_id"]
        (born,) = receiver.wait_for("collection.created")
        assert born.signed
        assert born.body["data"]["collection"] == {"id": harbour, "name": "harbour"}

        # A name is stored trimmed: the event names it as stored, not as it was typed.
        change = {"name": "  port "}
        renamed = hooks.call(hooks.acme, "PATCH", f"/collections/{harbour}", json=change)
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["name"] == "port"
        (moved,) = receiver.wait_for("collection.changed")
        assert moved.signed and moved.body["data"]["collection"] == {"id": harbour, "name": "port"}
        assert moved.body["data"]["changes"] == {"name": "port"}

        assert hooks.call(hooks.acme, "DELETE", f"/collections/{harbour}").status_code == 204
        (gone,) = receiver.wait_for("collection.deleted")
        assert gone.signed and gone.body["data"]["collection"] == {"id": harbour, "name": "port"}

        full = hooks.call(hooks.acme, "POST", "/collections", json={"name": "quay"}).json()
        answer = hooks.call(
            hooks.acme,
            "POST",
            "/documents",
            data={"collection": "quay"},
            files={"file": ("crane.txt", b"The quay crane lifts forty tonnes.")},
        )
        assert answer.status_code == 202, answer.text
        emptied = hooks.call(
            hooks.acme, "DELETE", f"/collections/{full['collection_id']}?documents=delete"
        )
        assert emptied.status_code in (202, 204), emptied.text
        _, with_documents = receiver.wait_for("collection.deleted", count=2)
        assert with_documents.signed
        assert with_documents.body["data"]["collection"]["id"] == full["collection_id"]
        assert with_documents.body["data"]["documents"] == 1
        assert other.requests == []  # globex's webhook heard nothing of acme
        log = hooks.call(hooks.acme, "GET", f"/webhooks/{made['webhook_id']}/deliveries").json()
        assert {d["status"] for d in log["data"]} == {"delivered"}
    finally:
        other.stop()
        hooks.remove_all()


def test_a_key_limited_to_some_collections_cannot_send_itself_events_of_the_others(
    hooks: Hooks, receiver: Receiver
) -> None:
    """An admin's key limited to general reads nothing of a restricted collection; before, it
    registered a webhook (or pointed the admin's at its own URL) and heard each document
    indexed there by name, since a webhook reports on what its creating user reads."""
    ledger = hooks.call(
        hooks.acme, "POST", "/collections", json={"name": "ledger", "visibility": "restricted"}
    )
    assert ledger.status_code == 201, ledger.text
    limited = hooks.call(
        hooks.ada_signed_in(),
        "POST",
        "/auth/keys",
        json={"name": "general only", "collections": ["general"]},
    )
    assert limited.status_code == 201, limited.text
    key = Tenant(limited.json()["key"])
    admins = hooks.make_hook(hooks.acme, receiver, ["document.indexed"])
    own = Receiver().start()
    try:
        made = hooks.call(
            key, "POST", "/webhooks", json={"url": own.url, "events": ["document.indexed"]}
        )
        assert made.status_code == 403, made.text
        assert made.json()["error"]["code"] == "api_key_not_allowed"
        path = f"/webhooks/{admins['webhook_id']}"
        moved = hooks.call(key, "PATCH", path, json={"url": own.url})
        assert moved.status_code == 403, moved.text
        assert hooks.call(hooks.acme, "GET", path).json()["url"] == receiver.url

        hooks.upload(hooks.acme, "takeover-terms.txt", "The takeover closes in May.", "ledger")
        (heard,) = receiver.wait_for("document.indexed")  # the admin's own webhook hears it
        assert heard.body["data"]["source"] == "takeover-terms.txt"
        assert own.requests == []
        hidden = f"/documents/{heard.body['data']['document_id']}"
        assert hooks.call(key, "GET", hidden).status_code == 404
    finally:
        own.stop()
        hooks.call(hooks.acme, "DELETE", f"/webhooks/{admins['webhook_id']}")


def test_a_demoted_creator_hears_nothing_of_a_restricted_collection_deleted_since(
    hooks: Hooks, receiver: Receiver
) -> None:
    """Once its one restricted collection is deleted, a creator made a member reads every
    collection left; that must not let its webhook hear the deleted collection's name, or its
    documents' names, which the creator never read."""
    server = hooks.server
    server.create_user("initech", "lumbergh", "Hook-boss 45 lighthouse")
    server.create_user("initech", "milton", "Hook-stapler 46 lighthouse", role="admin")
    boss, creator = Tenant(_key(server, "lumbergh")), Tenant(_key(server, "milton"))
    made = hooks.make_hook(creator, receiver, ["document.deleted", "collection.deleted"])
    server.cli("set-role", "--username", "milton", "--role", "member")
    try:
        made_payroll = hooks.call(
            boss, "POST", "/collections", json={"name": "payroll", "visibility": "restricted"}
        )
        assert made_payroll.status_code == 201, made_payroll.text
        salaries = hooks.upload(boss, "salaries.txt", "Milton earns too little.", "payroll")
        canteen = hooks.upload(boss, "canteen.txt", "The canteen serves cake on Fridays.")
        for job in (salaries, canteen):
            ended = hooks.call(boss, "GET", f"/jobs/{job['job_id']}", params={"wait": 30})
            assert ended.json()["status"] == "done", ended.text
        gone = hooks.call(boss, "DELETE", "/collections/payroll", params={"documents": "delete"})
        assert gone.status_code == 202, gone.text
        ended = hooks.call(boss, "GET", f"/jobs/{gone.json()['job_id']}", params={"wait": 30})
        assert ended.json()["status"] == "done", ended.text
        deleted = hooks.call(boss, "DELETE", f"/documents/{canteen['document_id']}")
        assert deleted.status_code == 204, deleted.text

        receiver.wait_for("document.deleted")  # the canteen, which the creator reads

        def settled() -> list[dict[str, Any]]:
            path = f"/webhooks/{made['webhook_id']}/deliveries"
            return hooks.call(boss, "GET", path).json()["data"]

        assert wait_until(lambda: "pending" not in {d["status"] for d in settled()}, 60, 0.1)
        assert len(settled()) == 3  # the salaries, payroll and the canteen
        heard = [r.body["data"] for r in receiver.delivered()]
        assert [(d.get("source"), d["collection"]["name"]) for d in heard] == [
            ("canteen.txt", "general")
        ]
    finally:
        hooks.call(boss, "DELETE", f"/webhooks/{made['webhook_id']}")
