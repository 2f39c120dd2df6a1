"""The answer cache through the API: hits, and no answer outliving its documents or tenant."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiHarness, ApiUser

pytestmark = pytest.mark.integration

REFUND_Q = "How many days until refunds are issued?"


def _stats(api: ApiHarness, user: ApiUser) -> Any:
    return api.client.get("/stats", headers=user.headers).json()


def _document_id(api: ApiHarness, user: ApiUser, source: str) -> str:
    listing = api.client.get("/documents", headers=user.headers).json()["data"]
    return str(next(d["document_id"] for d in listing if d["source"] == source))


def test_repeated_and_normalised_questions_hit_the_cache(api: ApiHarness) -> None:
    user = api.add_user("cache-hit")
    api.upload_and_wait(user, "pumps.txt", text_document("The blue pump runs at 300 rpm."))
    first = api.query(user, "How fast does the blue pump run?")
    assert first["cache"] == "miss" and "300 rpm" in first["answer"]
    for variant in (
        "How fast does the blue pump run?",
        "  how FAST does the   blue pump\trun? ",
        "HOW FAST DOES THE BLUE PUMP RUN?",
    ):
        again = api.query(user, variant)
        assert again["cache"] == "hit", variant
        assert {k: again[k] for k in ("answer", "citations", "refused")} == {
            k: first[k] for k in ("answer", "citations", "refused")
        }
        assert set(again["timings"]) == {"cache"}
    assert api.query(user, "How fast does the blue pump run?", k=2)["cache"] == "miss"
    assert api.query(user, "How fast does the red pump run?")["cache"] == "miss"
    stats = _stats(api, user)
    assert (stats["cache_hits"], stats["cache_misses"], stats["cache_entries"]) == (3, 3, 3)
    assert stats["cache_hit_rate"] == pytest.approx(0.5)


def test_refusals_are_cached_and_an_upload_invalidates_them(api: ApiHarness) -> None:
    user = api.add_user("cache-upload")
    refused = api.query(user, REFUND_Q)
    assert refused["refused"] is True and refused["cache"] == "miss"
    assert api.query(user, REFUND_Q)["cache"] == "hit"
    api.upload_and_wait(user, "policy.txt", text_document("Refunds are issued within 14 days."))
    assert _stats(api, user)["cache_entries"] == 0
    answered = api.query(user, REFUND_Q)
    assert answered["cache"] == "miss"
    assert answered["refused"] is False and "14 days" in answered["answer"]


def test_a_replaced_file_never_brings_back_the_old_answer(api: ApiHarness) -> None:
    user = api.add_user("cache-replace")
    old = api.upload_and_wait(
        user, "policy.txt", text_document("Refunds are issued within 14 days of purchase.")
    )
    assert "14 days" in api.query(user, REFUND_Q)["answer"]
    assert api.query(user, REFUND_Q)["cache"] == "hit"

    new = api.upload_and_wait(
        user, "policy.txt", text_document("Refunds are issued within 30 days of purchase.")
    )
    assert new["status"] == "done" and new["document_id"] == old["document_id"]
    answer = api.query(user, REFUND_Q)
    assert answer["cache"] == "miss"
    assert "30 days" in answer["answer"] and "14 days" not in answer["answer"]
    assert all("14 days" not in c["snippet"] for c in answer["citations"])
    for query in ("14 days", "refunds issued within 14 days of purchase"):
        assert all("14 days" not in r["text"] for r in api.search(user, query, k=50)["results"])
    listing = api.client.get("/documents", headers=user.headers).json()
    assert listing["count"] == 1 and listing["data"][0]["chunks"] == new["chunks_indexed"]
    assert api.container.corpus.count(user.tenant) == new["chunks_indexed"]


def test_a_deleted_document_is_not_answered_from_the_cache(api: ApiHarness) -> None:
    user = api.add_user("cache-delete")
    api.upload_and_wait(user, "policy.txt", text_document("Refunds are issued within 21 days."))
    assert "21 days" in api.query(user, REFUND_Q)["answer"]
    assert api.query(user, REFUND_Q)["cache"] == "hit"
    document_id = _document_id(api, user, "policy.txt")
    assert api.client.delete(f"/documents/{document_id}", headers=user.headers).status_code == 204
    after = api.query(user, REFUND_Q)
    assert after["cache"] == "miss"
    assert after["refused"] is True and after["citations"] == []
    assert "21 days" not in after["answer"]
    streamed = api.client.post("/query/stream", json={"question": REFUND_Q}, headers=user.headers)
    assert "21 days" not in streamed.text


def test_the_same_question_in_two_tenants_never_shares_an_answer(api: ApiHarness) -> None:
    x, y = api.add_user("cache-x"), api.add_user("cache-y")
    api.upload_and_wait(x, "faq.txt", text_document("Refunds are issued within 5 days."))
    api.upload_and_wait(y, "faq.txt", text_document("Refunds are issued within 60 days."))
    x_answer = api.query(x, REFUND_Q)
    assert x_answer["cache"] == "miss" and "5 days" in x_answer["answer"]
    assert api.query(x, REFUND_Q)["cache"] == "hit"
    y_answer = api.query(y, REFUND_Q)
    assert y_answer["cache"] == "miss", "tenant y was served tenant x's cached answer"
    assert "60 days" in y_answer["answer"] and "5 days" not in y_answer["answer"]
    assert _stats(api, y)["cache_hits"] == 0
    # A change in tenant x leaves tenant y's entries alone, and the reverse.
    api.upload_and_wait(x, "more.txt", text_document("Exchanges are possible for 10 days."))
    assert api.query(y, REFUND_Q)["cache"] == "hit"
    assert api.query(x, REFUND_Q)["cache"] == "miss"
