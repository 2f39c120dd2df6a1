"""The input limits /openapi.json documents are exactly the ones the API enforces.

A client generated from the schema must be able to send everything the schema allows, and get
422 for one step past it: for a small configuration, and for caps at the request models' own
outer bounds (where a configured cap used to be documented but never reachable).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.config import Settings
from app.request_limits import K_CEILING, PAGE_SIZE_CEILING, QUESTION_CHARS_CEILING
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

TEXT_FIELDS = (
    ("/search", "SearchIn", "query"),
    ("/query", "QueryIn", "question"),
    ("/conversations/{conversation_id}/messages", "MessageIn", "content"),
)
LISTINGS = ("/documents", "/jobs", "/conversations", "/users", "/audit")  # the user is its admin


def _documented(api: ApiHarness) -> dict[str, Any]:
    schema = api.client.get("/openapi.json").json()
    models = schema["components"]["schemas"]
    found: dict[str, Any] = {}
    for path in LISTINGS:
        listing = next(
            p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == "limit"
        )
        options = listing["schema"]["anyOf"]
        (found[path],) = [o["maximum"] for o in options if o.get("type") == "integer"]
    for path, model, field in TEXT_FIELDS:
        properties = models[model]["properties"]
        (k,) = [o["maximum"] for o in properties["k"]["anyOf"] if o.get("type") == "integer"]
        found[path] = (properties[field]["maxLength"], k)
    return found


def _assert_enforced_as_documented(api: ApiHarness, user: ApiUser) -> None:
    documented = _documented(api)
    started = api.client.post("/conversations", headers=user.headers)
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    for documented_path, _, field in TEXT_FIELDS:
        path = documented_path.format(conversation_id=conversation_id)
        max_chars, max_k = documented[documented_path]
        longest = "tide " + "x" * (max_chars - 5)
        accepted = api.client.post(path, json={field: longest, "k": max_k}, headers=user.headers)
        assert accepted.status_code == 200, (path, accepted.text)
        too_long = api.client.post(path, json={field: longest + "x"}, headers=user.headers)
        assert_error_body(too_long, 422)
        too_many = api.client.post(path, json={field: "tide", "k": max_k + 1}, headers=user.headers)
        assert_error_body(too_many, 422)
    for path in LISTINGS:
        page_size = documented[path]
        listing = api.client.get(path, params={"limit": page_size}, headers=user.headers)
        assert listing.status_code == 200, (path, listing.text)
        over = api.client.get(path, params={"limit": page_size + 1}, headers=user.headers)
        assert_error_body(over, 422)


def test_small_configured_caps_are_documented_and_enforced(api_factory: ApiFactory) -> None:
    api = api_factory(
        start_workers=False,
        max_question_chars=300,
        max_k=7,
        top_k=5,
        max_page_size=9,
        rate_limit_query_per_minute=1000,
    )
    assert _documented(api) == {
        **dict.fromkeys(LISTINGS, 9),
        **{path: (300, 7) for path, _, _ in TEXT_FIELDS},
    }
    _assert_enforced_as_documented(api, api.add_user("limits-small"))


def test_caps_at_the_outer_bounds_are_documented_and_enforced(api_factory: ApiFactory) -> None:
    api = api_factory(
        start_workers=False,
        max_question_chars=QUESTION_CHARS_CEILING,
        max_body_bytes=6 * QUESTION_CHARS_CEILING + 1024,
        max_k=K_CEILING,
        max_page_size=PAGE_SIZE_CEILING,
        rate_limit_query_per_minute=1000,
    )
    ceilings = (QUESTION_CHARS_CEILING, K_CEILING)
    assert _documented(api) == {
        **dict.fromkeys(LISTINGS, PAGE_SIZE_CEILING),
        **{path: ceilings for path, _, _ in TEXT_FIELDS},
    }
    _assert_enforced_as_documented(api, api.add_user("limits-ceiling"))


@pytest.mark.parametrize(
    ("name", "ceiling"),
    [
        ("max_question_chars", QUESTION_CHARS_CEILING),
        ("max_k", K_CEILING),
        ("max_page_size", PAGE_SIZE_CEILING),
    ],
)
def test_a_cap_above_what_the_request_models_accept_is_refused_at_start_up(
    settings: Settings, name: str, ceiling: int
) -> None:
    values = settings.model_dump() | {"max_body_bytes": 6 * (ceiling + 1) + 1024, name: ceiling + 1}
    with pytest.raises(ValueError, match=name):
        Settings.model_validate(values)
