"""A burst of uploads to one tenant: each is indexed, the keyword index is rebuilt once."""

from __future__ import annotations

import pytest
from api_builders import text_document
from conftest import ApiFactory, ApiHarness

from app.services.ingest_worker import run_job

pytestmark = pytest.mark.integration

CODES = ["QUILLMORE-17", "BRACKENFELL-42", "OSPREYLANE-93"]


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    # No worker threads: the test runs the queued jobs itself, one at a time, like one worker.
    return api_factory(start_workers=False)


def test_a_burst_rebuilds_the_keyword_index_once_and_every_document_is_found(
    api: ApiHarness,
) -> None:
    user = api.add_user("burst")
    for i, code in enumerate(CODES):
        body = text_document(f"Part {code} is the spare valve for pump line {i}.")
        assert api.upload(user, f"part{i}.txt", body).status_code == 202
    keyword = api.container.retriever.keyword_index
    rebuilds = []
    while (job := api.container.jobs.claim_next()) is not None:
        assert run_job(api.container, job)
        rebuilds.append(keyword.rebuilds[user.tenant])
    # Two jobs left the rebuild to a later one; the last job of the burst rebuilt once.
    assert rebuilds == [0, 0, 1]
    for code in CODES:
        hits = api.search(user, code)["results"]
        assert hits and code in hits[0]["text"], (code, hits)
    assert keyword.rebuilds[user.tenant] == 1  # the searches found the index current


def test_a_lone_upload_is_keyword_searchable_without_waiting_for_a_query(
    api: ApiHarness,
) -> None:
    user = api.add_user("lone")
    assert api.upload(user, "lone.txt", text_document("Part WRENFIELD-5 fits.")).status_code == 202
    job = api.container.jobs.claim_next()
    assert job is not None and run_job(api.container, job)
    assert api.container.retriever.keyword_index.rebuilds[user.tenant] == 1
