"""A query parameter the route does not read is a 422 that names it, never ignored: a misspelt
filter (`?collection_id=` for `?collection=`) used to list every document of the tenant, and a
script acting on that list would have acted on all of them.

Real stack (Chroma in a temp dir, the shipped `use` embedder, SQLite).
"""

from __future__ import annotations

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, assert_error_body

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory()


def test_a_misspelt_filter_is_refused_instead_of_listing_everything(api: ApiHarness) -> None:
    user = api.add_user("query-params", role="member")
    api.upload_and_wait(user, "boiler.txt", text_document("The boiler is serviced in May."))

    misspelt = api.client.get("/documents?collection_id=manuals", headers=user.headers)
    error = assert_error_body(misspelt, 422, "validation_error")
    assert "collection_id" in error["message"]
    assert "collection" in error["message"].split("reads:")[1]  # what to send instead

    # The parameters the route reads still work, with or without values.
    listed = api.client.get("/documents?collection=general&limit=5", headers=user.headers)
    assert listed.status_code == 200, listed.text
    assert [doc["source"] for doc in listed.json()["data"]] == ["boiler.txt"]
    assert api.client.get("/documents", headers=user.headers).status_code == 200

    jobs = api.client.get("/jobs?state=done", headers=user.headers)
    assert "state" in assert_error_body(jobs, 422, "validation_error")["message"]


def test_a_route_that_reads_no_query_says_so(api: ApiHarness) -> None:
    user = api.add_user("query-params-none", role="member")
    response = api.client.post("/search?k=1", json={"query": "boiler"}, headers=user.headers)
    error = assert_error_body(response, 422, "validation_error")
    assert error["message"] == "unknown query parameter(s): k; this route reads: none"


def test_a_caller_without_credentials_gets_401_whatever_the_query(api: ApiHarness) -> None:
    assert_error_body(api.client.get("/documents?collection_id=x"), 401)


def test_the_openai_compatible_routes_ignore_what_they_do_not_read(api: ApiHarness) -> None:
    # OpenAI's clients add their own (Azure's `api-version`); those routes stay lenient.
    user = api.add_user("query-params-openai", role="member")
    listed = api.client.get("/v1/models?api-version=2024-06-01", headers=user.headers)
    assert listed.status_code == 200, listed.text
