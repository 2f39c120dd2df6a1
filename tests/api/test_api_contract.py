"""Every route: unauthenticated -> 401, another tenant's id -> the same 404 as a missing one,
bad input -> 422, always with the one error body."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

MISSING_JOB = "job_000000000000000000000000"
MISSING_DOC = "doc_000000000000000000000000"
MISSING_CONVERSATION = "0" * 32
CHAT = {"model": "rag", "messages": [{"role": "user", "content": "lamp at dusk"}]}

# Every protected route with a request that would succeed for the owner (ids filled in later).
PROTECTED = [
    ("POST", "/documents"),
    ("GET", "/jobs"),
    ("GET", "/jobs/{job_id}"),
    ("GET", "/documents"),
    ("GET", "/documents/{document_id}"),
    ("DELETE", "/documents/{document_id}"),
    ("POST", "/search"),
    ("POST", "/query"),
    ("POST", "/query/stream"),
    ("GET", "/stats"),
    ("GET", "/documents/{document_id}/pages/{page}.png"),
    ("GET", "/documents/{document_id}/pages/{page}/text"),
    ("POST", "/conversations"),
    ("GET", "/conversations"),
    ("GET", "/conversations/{conversation_id}"),
    ("DELETE", "/conversations/{conversation_id}"),
    ("POST", "/conversations/{conversation_id}/messages"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/{model_id}"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/auth/me"),
    ("POST", "/auth/logout"),
    ("POST", "/auth/password"),
    ("POST", "/auth/keys"),
    ("GET", "/auth/keys"),
    ("DELETE", "/auth/keys/{key_id}"),
    ("POST", "/users"),
    ("GET", "/users"),
    ("PATCH", "/users/{user_id}"),
    ("DELETE", "/users/{user_id}"),
    ("GET", "/audit"),
    ("GET", "/answers"),
    ("GET", "/answers/{answer_id}"),
    ("POST", "/answers/{answer_id}/feedback"),
    ("GET", "/answers/{answer_id}/feedback"),
    ("GET", "/answers/export"),
    ("DELETE", "/answers"),
    ("GET", "/feedback"),
    ("POST", "/evaluations/sets"),
    ("POST", "/evaluations/sets/upload"),
    ("POST", "/evaluations/sets/from-feedback"),
    ("GET", "/evaluations/sets"),
    ("GET", "/evaluations/sets/{set_id}"),
    ("DELETE", "/evaluations/sets/{set_id}"),
    ("POST", "/evaluations/runs"),
    ("GET", "/evaluations/runs"),
    ("GET", "/evaluations/runs/{run_id}"),
    ("GET", "/evaluations/runs/{run_id}/compare"),
    ("PUT", "/sso"),
    ("GET", "/sso"),
    ("DELETE", "/sso"),
    ("POST", "/webhooks"),
    ("GET", "/webhooks"),
    ("GET", "/webhooks/{webhook_id}"),
    ("PATCH", "/webhooks/{webhook_id}"),
    ("DELETE", "/webhooks/{webhook_id}"),
    ("GET", "/webhooks/{webhook_id}/deliveries"),
    ("POST", "/collections"),
    ("GET", "/collections"),
    ("GET", "/collections/{collection_id}"),
    ("PATCH", "/collections/{collection_id}"),
    ("DELETE", "/collections/{collection_id}"),
    ("GET", "/collections/{collection_id}/access"),
    ("PUT", "/collections/{collection_id}/access"),
    ("POST", "/groups"),
    ("GET", "/groups"),
    ("GET", "/groups/{group_id}"),
    ("PATCH", "/groups/{group_id}"),
    ("DELETE", "/groups/{group_id}"),
    ("PUT", "/groups/{group_id}/members/{user_id}"),
    ("DELETE", "/groups/{group_id}/members/{user_id}"),
    ("PATCH", "/documents/{document_id}"),
]
PUBLIC = [
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("POST", "/auth/token"),
    # single sign-on: the browser's steps before it holds a token of this service
    ("GET", "/auth/sso/options"),
    ("GET", "/auth/sso/{tenant}/start"),
    ("GET", "/auth/sso/callback"),
    ("POST", "/auth/sso/exchange"),
]


@pytest.fixture(scope="module")
def owner(api: ApiHarness) -> ApiUser:
    return api.add_user("contract-a")


@pytest.fixture(scope="module")
def outsider(api: ApiHarness) -> ApiUser:
    return api.add_user("contract-b")


@pytest.fixture(scope="module")
def owned_job(api: ApiHarness, owner: ApiUser) -> dict[str, Any]:
    job = api.upload_and_wait(
        owner, "lighthouse.txt", text_document("The lighthouse keeper lights the lamp at dusk.")
    )
    assert job["status"] == "done", job
    return dict(job)


def _call(api: ApiHarness, method: str, path: str, headers: dict[str, str], **ids: str) -> Any:
    defaults = {
        "conversation_id": MISSING_CONVERSATION,
        "key_id": "key_x",
        "user_id": "usr_x",
        "webhook_id": "wh_x",
        "collection_id": "col_x",
        "group_id": "grp_x",
        "model_id": "rag",
    }
    defaults |= {"answer_id": "0" * 32, "set_id": "0" * 32, "run_id": "0" * 32}
    url = path.format(page=1, **{**defaults, **ids})
    if path == "/documents" and method == "POST":
        return api.client.post(url, files={"file": ("x.txt", b"hello there")}, headers=headers)
    if path.endswith("/messages"):
        return api.client.post(url, json={"content": "lamp at dusk"}, headers=headers)
    if path == "/v1/chat/completions":
        return api.client.post(url, json=CHAT, headers=headers)
    if method == "POST":
        field = "query" if url == "/search" else "question"
        return api.client.post(url, json={field: "lamp at dusk"}, headers=headers)
    return api.client.request(method, url, headers=headers)


def test_the_route_tables_cover_every_route_of_the_app(api: ApiHarness) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    routes = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert routes == set(PROTECTED) | set(PUBLIC)


@pytest.mark.parametrize(("method", "path"), PROTECTED)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer a.b.c"},
    ],
    ids=["no-header", "empty-bearer", "garbage", "basic-scheme", "three-parts"],
)
def test_protected_routes_refuse_requests_without_a_valid_token(
    api: ApiHarness, owned_job: dict[str, Any], method: str, path: str, headers: dict[str, str]
) -> None:
    response = _call(
        api,
        method,
        path,
        headers,
        job_id=owned_job["job_id"],
        document_id=owned_job["document_id"],
    )
    assert_error_body(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert api.uploads_left() == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/search", {"k": "many"}), ("POST", "/query", {}), ("POST", "/documents", None)],
)
def test_authentication_is_checked_before_the_body(
    api: ApiHarness, method: str, path: str, body: Any
) -> None:
    response = api.client.request(method, path, json=body)
    assert_error_body(response, 401, "unauthorized")


def test_public_routes_need_no_token(api: ApiHarness) -> None:
    assert api.client.get("/health").json() == {"status": "ok"}
    ready = api.client.get("/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"
    assert api.client.get("/openapi.json").status_code == 200
    assert api.client.get("/docs").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/jobs/{job_id}"),
        ("GET", "/documents/{document_id}"),
        ("DELETE", "/documents/{document_id}"),
        ("GET", "/documents/{document_id}/pages/{page}.png"),
        ("GET", "/documents/{document_id}/pages/{page}/text"),
    ],
)
def test_another_tenants_id_is_indistinguishable_from_a_missing_one(
    api: ApiHarness,
    owner: ApiUser,
    outsider: ApiUser,
    owned_job: dict[str, Any],
    method: str,
    path: str,
) -> None:
    theirs = _call(
        api,
        method,
        path,
        outsider.headers,
        job_id=owned_job["job_id"],
        document_id=owned_job["document_id"],
    )
    missing = _call(
        api, method, path, outsider.headers, job_id=MISSING_JOB, document_id=MISSING_DOC
    )
    assert_error_body(theirs, 404, "not_found")
    assert theirs.status_code == missing.status_code
    assert theirs.json() == missing.json()
    # The owner still has it, whatever the outsider tried.
    document = api.client.get(f"/documents/{owned_job['document_id']}", headers=owner.headers)
    assert document.status_code == 200
    assert document.json()["chunks"] == owned_job["chunks_indexed"] > 0
    hits = api.search(owner, "lighthouse keeper lamp")["results"]
    assert any("lighthouse keeper" in hit["text"] for hit in hits)


@pytest.mark.parametrize("path", ["/search", "/query", "/query/stream"])
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": "wrong field name"},
        {"q": "x", "k": 3},
        {"FIELD": ""},
        {"FIELD": "   \n\t "},
        {"FIELD": "x" * 2001},
        {"FIELD": "x" * 20_001},
        {"FIELD": "valid question", "k": 0},
        {"FIELD": "valid question", "k": -3},
        {"FIELD": "valid question", "k": 51},
        {"FIELD": "valid question", "k": 10**6},
        {"FIELD": "valid question", "k": "five"},
        {"FIELD": "valid question", "k": 2.5},
        {"FIELD": "valid question", "tenant_id": "contract-a"},
        {"FIELD": 42},
        {"FIELD": None},
        ["FIELD"],
        "just a string",
    ],
    ids=lambda body: str(body)[:40],
)
def test_bad_retrieval_bodies_are_422_with_the_error_body(
    api: ApiHarness, outsider: ApiUser, path: str, body: Any
) -> None:
    field = "query" if path == "/search" else "question"

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            return {(field if k == "FIELD" else k): v for k, v in value.items()}
        if isinstance(value, list):
            return [field if v == "FIELD" else v for v in value]
        return value

    response = api.client.post(path, json=fill(body), headers=outsider.headers)
    error = assert_error_body(response, 422, None)
    assert error["code"] in ("validation_error", "invalid_input")
    assert "text/event-stream" not in response.headers.get("content-type", "")


@pytest.mark.parametrize("path", ["/search", "/query", "/query/stream"])
@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        (b"query=x&question=x", "application/x-www-form-urlencoded"),
        (b"\xff\xfe\x00", "application/json"),  # FastAPI's own 400 before the fix
    ],
    ids=["broken-json", "empty", "form", "not-utf8"],
)
def test_undecodable_retrieval_bodies_are_422_and_logged_with_the_reason(
    api: ApiHarness,
    outsider: ApiUser,
    path: str,
    content: bytes,
    content_type: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    headers = {**outsider.headers, "Content-Type": content_type}
    with caplog.at_level(logging.INFO, logger="app.api"):
        response = api.client.post(path, content=content, headers=headers)
    assert_error_body(response, 422, "validation_error")
    # An operator finds why in the log, as for every other refused body.
    logged = [
        getattr(record, "detail", None)
        for record in caplog.records
        if record.name == "app.api" and getattr(record, "status", None) == 422
    ]
    assert logged == [response.json()["error"]["message"]]


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=-1", "limit=abc", "limit=101", "limit=1001", "offset=-1", "offset=x"],
)
def test_bad_document_list_parameters_are_422(
    api: ApiHarness, outsider: ApiUser, query: str
) -> None:
    response = api.client.get(f"/documents?{query}", headers=outsider.headers)
    assert_error_body(response, 422)


def test_page_size_cap_is_the_configured_one(api: ApiHarness, owner: ApiUser) -> None:
    cap = api.settings.max_page_size
    assert api.client.get(f"/documents?limit={cap}", headers=owner.headers).status_code == 200
    error = assert_error_body(
        api.client.get(f"/documents?limit={cap + 1}", headers=owner.headers), 422
    )
    assert str(cap) in error["message"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"json": {"file": "not a file"}},
        {"data": {"file": "a plain form field, not a file"}},
        {"files": {"document": ("notes.txt", b"right content, wrong field name")}},
        {"content": b"raw bytes", "headers": {"Content-Type": "application/octet-stream"}},
        {
            "content": b'--XYZ\r\nContent-Disposition: form-data; name="file"; '
            b'filename="a.txt"\r\n\r\nhello',
            "headers": {"Content-Type": "multipart/form-data; boundary=XYZ"},
        },
        {"content": b"", "headers": {"Content-Type": "multipart/form-data; boundary=XYZ"}},
        {"content": b"x", "headers": {"Content-Type": "multipart/form-data"}},
    ],
    ids=["json", "form-field", "wrong-field", "octet-stream", "truncated", "empty", "no-boundary"],
)
def test_bad_upload_bodies_are_422_and_leave_no_file(
    api: ApiHarness, outsider: ApiUser, kwargs: dict[str, Any]
) -> None:
    headers = {**outsider.headers, **kwargs.pop("headers", {})}
    response = api.client.post("/documents", headers=headers, **kwargs)
    assert_error_body(response, 422, "validation_error")
    assert api.uploads_left() == []


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"username": "someone"},
        {"password": "something long"},
        {"username": "", "password": "x"},
    ],
)
def test_bad_login_bodies_are_422(api: ApiHarness, data: dict[str, str]) -> None:
    assert_error_body(api.client.post("/auth/token", data=data), 422, "validation_error")


def test_login_with_json_instead_of_a_form_is_415(api: ApiHarness) -> None:
    response = api.client.post("/auth/token", json={"username": "a", "password": "b"})
    assert_error_body(response, 415, "unsupported_media_type")


def test_unknown_route_and_wrong_method_use_the_error_body(api: ApiHarness, owner: ApiUser) -> None:
    assert_error_body(api.client.get("/nope", headers=owner.headers), 404, "not_found")
    assert_error_body(api.client.put("/search", headers=owner.headers), 405)
