"""Revocation across API processes: two `uvicorn` processes share PostgreSQL and Redis; a token
signed out, a key revoked, a user disabled through one is refused by the other on its next
request. The PostgreSQL dump holds the key's hash, never the key."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy.engine import make_url

from testkit.local_stack import PASSWORD, REDIS_URL, LocalStack
from tests.scaleout.running_stack import running_stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Chroma server, PostgreSQL database, Redis namespace, two API processes (no worker)."""
    root: Path = tmp_path_factory.mktemp("revocation")
    with running_stack(root, {"RAG_REVOCATION_BACKEND": "redis"}, workers=0) as (local, _apis):
        yield local


def _urls(stack: LocalStack) -> tuple[str, str]:
    first, second = (p for p in stack.processes if p.name.startswith("api"))
    return first.url, second.url


def _login(url: str, username: str) -> dict[str, str]:
    response = httpx.post(f"{url}/auth/token", data={"username": username, "password": PASSWORD})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def _me(url: str, headers: dict[str, str]) -> int:
    return httpx.get(f"{url}/auth/me", headers=headers).status_code


def _key(url: str, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.post(f"{url}/auth/keys", json={"name": "cron"}, headers=headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_a_signed_out_token_is_refused_by_the_other_process(stack: LocalStack) -> None:
    one, two = _urls(stack)
    stack.create_user("rev-a", "rev-alice")
    session = _login(one, "rev-alice")
    assert _me(two, session) == 200
    assert httpx.post(f"{one}/auth/logout", headers=session).status_code == 204
    assert _me(two, session) == 401 and _me(one, session) == 401
    # Kept in Redis (RAG_REVOCATION_BACKEND=redis), expiring with the token.
    client: redis.Redis[bytes] = redis.Redis.from_url(REDIS_URL)
    try:
        [entry] = client.keys(f"{stack.prefix}:revoked:*")
        assert 0 < client.ttl(entry) <= 3600
    finally:
        client.close()


def test_a_revoked_key_is_refused_by_the_other_process(stack: LocalStack) -> None:
    one, two = _urls(stack)
    stack.create_user("rev-b", "rev-bob")
    session = _login(one, "rev-bob")
    key = _key(one, session)
    as_key = {"Authorization": f"Bearer {key['key']}"}
    assert _me(two, as_key) == 200
    assert httpx.delete(f"{two}/auth/keys/{key['key_id']}", headers=session).status_code == 204
    assert _me(one, as_key) == 401 and _me(two, as_key) == 401


def test_signing_out_everywhere_and_disabling_reach_every_process(stack: LocalStack) -> None:
    one, two = _urls(stack)
    stack.create_user("rev-c", "rev-carol")  # the tenant's admin
    stack.create_user("rev-c", "rev-dave")  # a member
    carol, dave = _login(one, "rev-carol"), _login(two, "rev-dave")
    carol_elsewhere = _login(two, "rev-carol")
    everywhere = httpx.post(f"{one}/auth/logout", params={"all": "true"}, headers=carol)
    assert everywhere.status_code == 204
    assert _me(two, carol_elsewhere) == 401
    carol = _login(two, "rev-carol")
    daves_key = {"Authorization": f"Bearer {_key(two, dave)['key']}"}
    dave_id = httpx.get(f"{two}/auth/me", headers=dave).json()["user_id"]
    off = httpx.patch(f"{one}/users/{dave_id}", json={"disabled": True}, headers=carol)
    assert off.status_code == 200
    assert _me(two, dave) == 401 and _me(two, daves_key) == 401


def test_the_postgresql_dump_holds_no_key_in_clear_text(stack: LocalStack) -> None:
    one, _ = _urls(stack)
    stack.create_user("rev-d", "rev-erin")
    key = _key(one, _login(one, "rev-erin"))
    url = make_url(stack.database_url)
    where = ["-h", url.host or "127.0.0.1", "-p", str(url.port or 5432)]
    dump = subprocess.run(
        ["pg_dump", *where, "-U", url.username or "root", "--data-only", url.database or ""],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout.decode()
    assert key["key_id"] in dump and key["prefix"] in dump  # the row is there...
    assert key["key"] not in dump  # ...but only the key's keyed hash
    assert key["key"].removeprefix("rag_") not in dump


def test_a_revoked_grant_is_refused_by_the_other_process_at_once(stack: LocalStack) -> None:
    """Grants live in PostgreSQL; each request reads the tenant's access version, so neither
    process keeps an old answer to "who reads what"."""
    one, two = _urls(stack)
    stack.create_user("rev-e", "rev-fay")  # the tenant's admin
    stack.create_user("rev-e", "rev-gus")  # a member
    fay, gus = _login(one, "rev-fay"), _login(two, "rev-gus")
    gus_key = {"Authorization": f"Bearer {_key(two, gus)['key']}"}
    made = httpx.post(
        f"{one}/collections", json={"name": "payroll", "visibility": "restricted"}, headers=fay
    )
    assert made.status_code == 201, made.text
    gus_id = httpx.get(f"{two}/auth/me", headers=gus).json()["user_id"]

    def readable(url: str, headers: dict[str, str]) -> set[str]:
        listed = httpx.get(f"{url}/collections", headers=headers).json()["data"]
        return {c["name"] for c in listed}

    assert readable(two, gus) == {"general"}  # the second process resolved gus's set now
    group = httpx.post(f"{one}/groups", json={"name": "payroll-team"}, headers=fay).json()
    joined = httpx.put(f"{one}/groups/payroll-team/members/{gus_id}", headers=fay)
    assert joined.status_code == 204
    granted = httpx.put(
        f"{one}/collections/payroll/access",
        json={"grants": [{"group_id": group["group_id"], "permission": "read"}]},
        headers=fay,
    )
    assert granted.status_code == 200, granted.text
    assert readable(two, gus) == {"general", "payroll"}
    assert readable(two, gus_key) == {"general", "payroll"}  # a key: its owner's grants now
    assert httpx.get(f"{two}/collections/payroll", headers=gus).status_code == 200
    left = httpx.delete(f"{one}/groups/payroll-team/members/{gus_id}", headers=fay)
    assert left.status_code == 204
    for url in (two, one):
        assert readable(url, gus) == {"general"} and readable(url, gus_key) == {"general"}
        assert httpx.get(f"{url}/collections/payroll", headers=gus).status_code == 404
