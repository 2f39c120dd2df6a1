"""More tenants than RAG_HOT_TENANTS through the API: real Chroma, the shipped embedder, and each
search still finds its own tenant's document after the tenant's keyword index was evicted."""

from __future__ import annotations

import pytest
from conftest import ApiFactory

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
