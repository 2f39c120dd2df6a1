"""The audit's last-admin race, over HTTP on the default SQLite database: two admins sending
`PATCH /users/{id}` `{"role": "member"}` (or `DELETE /users/{id}`) for each other at the same
moment must leave the tenant one admin, the other request refused (a race an audit found)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from tests.api.harness import ApiFactory, ApiHarness, ApiUser

pytestmark = pytest.mark.integration

ROUNDS = 20
_tenants = itertools.count(1)


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    app = api_factory(start_workers=False)
    assert app.settings.sqlalchemy_url.startswith("sqlite")  # the database that ignored the lock
    return app


def _both_at_once(api: ApiHarness, requests: list[tuple[str, str, ApiUser, Any]]) -> list[Any]:
    """Send the requests from threads released together; their responses in order."""
    barrier = threading.Barrier(len(requests))
    responses: list[Any] = [None] * len(requests)

    def send(index: int, method: str, url: str, caller: ApiUser, body: Any) -> None:
        barrier.wait()
        responses[index] = api.client.request(method, url, json=body, headers=caller.headers)

    threads = [
        threading.Thread(target=send, args=(index, *request))
        for index, request in enumerate(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return responses


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_two_admins_demoting_or_deleting_each_other_at_once_keep_one_admin(
    api: ApiHarness, method: str
) -> None:
    body = {"role": "member"} if method == "PATCH" else None
    lost = []
    for round_ in range(ROUNDS):
        tenant = f"admin-race-{method.lower()}{next(_tenants)}"
        first = api.add_user(tenant, login=False)
        second = api.add_user(tenant, login=False, role="admin")
        responses = _both_at_once(
            api,
            [
                (method, f"/users/{second.user_id}", first, body),
                (method, f"/users/{first.user_id}", second, body),
            ],
        )
        ok = 200 if method == "PATCH" else 204
        winners = [
            caller
            for caller, r in zip((first, second), responses, strict=True)
            if r.status_code == ok
        ]
        # The other request is refused: 409 naming the last admin, or, when it was checked
        # after the winner's commit, 403/401 (its caller is a member now, or gone).
        others = [r for r in responses if r.status_code != ok]
        if len(winners) != 1:
            lost.append((round_, [r.status_code for r in responses]))
            continue
        assert others[0].status_code in (401, 403, 409), others[0].text
        listed = api.client.get("/users", headers=winners[0].headers).json()["data"]
        assert [u["user_id"] for u in listed if u["role"] == "admin"] == [winners[0].user_id]
    assert lost == [], f"{len(lost)} of {ROUNDS} rounds let both requests through: {lost}"
