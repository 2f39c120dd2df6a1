"""RAG_HOT_TENANTS on the scale-out deployment (Chroma server, Redis, PostgreSQL, two API
processes, one worker): with a bound of 2 and five tenants, every search through either process
finds the tenant's own document, though each process evicted the tenant in between.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.local_stack import ApiClient
from tests.scaleout.running_stack import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TENANTS = 5


def test_evicted_tenants_find_their_own_documents_through_every_process(tmp_path: Path) -> None:
    with running_stack(tmp_path, {"RAG_HOT_TENANTS": "2"}) as (stack, apis):
        users: list[tuple[ApiClient, ApiClient]] = []
        for n in range(TENANTS):
            stack.create_user(f"hot{n}", f"user-hot{n}")
            first = ApiClient(apis[0].url)
            token = first.login(f"user-hot{n}")
            users.append((first, ApiClient(apis[1].url, token)))
        for n, (first, _) in enumerate(users):
            note = f"Pump P{n}7 in hall {n}: its relief valve resets with code Z{n}Q.\n"
            job = first.upload(f"note-{n}.txt", note.encode())
            stack.job_ids.add(job["job_id"])
            assert first.wait_job(job["job_id"])["status"] == "done"
        try:
            for _ in range(2):
                for n, pair in enumerate(users):
                    for client in pair:
                        hits = client.search(f"code Z{n}Q relief valve", k=3)["results"]
                        assert hits and f"Z{n}Q" in hits[0]["text"]
                        assert {hit["source"] for hit in hits} == {f"note-{n}.txt"}
        finally:
            for pair in users:
                for client in pair:
                    client.close()
