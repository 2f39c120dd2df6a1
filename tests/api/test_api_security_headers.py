"""Every response carries `X-Content-Type-Options: nosniff`, so no browser runs a stored
document's bytes as another type: JSON, errors (from a route, from validation, from the body
cap), a page picture, a stream, the web app and its static files, the docs."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.builders import pdf_document
from tests.api.harness import ApiHarness, ApiUser

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def owner(api: ApiHarness) -> ApiUser:
    return api.add_user("nosniff")


def nosniff(response: Any) -> bool:
    return response.headers.get_list("x-content-type-options") == ["nosniff"]


def test_api_responses_and_errors_say_nosniff(api: ApiHarness, owner: ApiUser) -> None:
    client, headers = api.client, owner.headers
    responses = {
        "json": client.get("/health"),
        "401": client.get("/documents"),
        "404": client.get("/no-such-route"),
        "422": client.post("/search", json={"query": ""}, headers=headers),
        "413": client.post("/search", content=b"x" * (api.settings.max_body_bytes + 1)),
        "stream": client.post("/query/stream", json={"question": "valves?"}, headers=headers),
    }
    assert responses["json"].status_code == 200
    assert responses["413"].status_code == 413
    assert responses["stream"].headers["content-type"].startswith("text/event-stream")
    assert {name: nosniff(response) for name, response in responses.items()} == dict.fromkeys(
        responses, True
    )


def test_a_page_picture_says_nosniff(api: ApiHarness, owner: ApiUser) -> None:
    job = api.upload_and_wait(owner, "valves.pdf", pdf_document("The relief valve is red."))
    assert job["status"] == "done", job
    picture = api.client.get(f"/documents/{job['document_id']}/pages/1.png", headers=owner.headers)
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
    assert nosniff(picture)


def test_the_web_app_its_static_files_and_the_docs_say_nosniff(api: ApiHarness) -> None:
    paths = ["/", "/static/js/main.js", "/static/style.css", "/static/favicon.svg", "/docs"]
    responses = {path: api.client.get(path) for path in paths}
    assert {path: r.status_code for path, r in responses.items()} == dict.fromkeys(paths, 200)
    # Once each: the page that sets its own header keeps it, the middleware adds no second one.
    assert {path: nosniff(r) for path, r in responses.items()} == dict.fromkeys(paths, True)
