"""More tenants than RAG_HOT_TENANTS through the API: real Chroma, the shipped embedder, and each
search still finds its own tenant's document after the tenant's keyword index was evicted."""

from __future__ import annotations

import pytest

from tests.api.harness import ApiFactory

pytestmark = pytest.mark.integration

TENANTS = 4


def test_searches_stay_right_while_only_the_bound_of_tenants_is_held(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(hot_tenants=2)
    users = [api.add_user(f"hot-{n}", login=False) for n in range(TENANTS)]
    for n, user in enumerate(users):
        text = f"Maintenance note {n}: the relief valve of pump P{n}7 is reset with code Z{n}Q.\n"
        assert api.upload_and_wait(user, f"note-{n}.txt", text.encode())["status"] == "done"
    keyword = api.container.retriever.keyword_index
    for _ in range(2):
        for n, user in enumerate(users):
            hits = api.search(user, f"code Z{n}Q relief valve", k=3)["results"]
            assert hits and hits[0]["source"] == f"note-{n}.txt"
            assert f"Z{n}Q" in hits[0]["text"]
            assert {h["source"] for h in hits} == {f"note-{n}.txt"}  # never another tenant's
            assert len(keyword.hot_tenants) <= 2
    assert keyword.evictions >= TENANTS


def test_an_evicted_tenant_answers_a_search_exactly_as_before_it_was_evicted(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(hot_tenants=1)
    acme, globex = (
        api.add_user("evict-acme", login=False),
        api.add_user("evict-globex", login=False),
    )
    notes = "".join(  # many chunks, so the ranking has an order to keep
        f"Note {n}: pump P{n} has a relief valve set to {n + 2} bar; its seal kit is S{n % 3}. "
        f"The inspection of pump P{n} after {n * 7 + 30} hours found wear on impeller I{n % 5}, "
        f"and the operator logged the reset of controller C{n % 4} at shift {n % 3 + 1}.\n\n"
        for n in range(60)
    )
    assert api.upload_and_wait(acme, "pumps.txt", notes.encode())["status"] == "done"
    queries = ["relief valve seal kit S1", "pump P7 bar", "seal"]
    keyword = api.container.retriever.keyword_index
    before = [api.search(acme, q, k=5)["results"] for q in queries]  # from the built index
    assert all(len(hits) >= 3 for hits in before) and keyword.loads["evict-acme"] == 0
    assert api.upload_and_wait(globex, "g.txt", b"Globex quarterly report.\n")["status"] == "done"
    assert api.search(globex, "quarterly report", k=3)["results"]
    assert keyword.hot_tenants == ["evict-globex"] and keyword.evictions >= 1  # acme evicted
    after = [api.search(acme, q, k=5)["results"] for q in queries]
    assert keyword.loads["evict-acme"] == 1  # its snapshot came back from disk
    assert after == before  # same chunks, same order, same scores and evidence
