"""The input limits /openapi.json documents are exactly the ones the API enforces.

A client generated from the schema must be able to send everything the schema allows, and get
422 for one step past it: for a small configuration, and for caps at the request models' own
outer bounds (where a configured cap used to be documented but never reachable).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ApiFactory, ApiHarness, ApiUser, assert_error_body

from app.config import Settings
from app.limits import K_CEILING, PAGE_SIZE_CEILING, QUESTION_CHARS_CEILING

pytestmark = pytest.mark.integration

TEXT_FIELDS = (("/search", "SearchIn", "query"), ("/query", "QueryIn", "question"))


def _documented(api: ApiHarness) -> dict[str, Any]:
    schema = api.client.get("/openapi.json").json()
    models = schema["components"]["schemas"]
    listing = next(
        p for p in schema["paths"]["/documents"]["get"]["parameters"] if p["name"] == "limit"
    )
    (page_size,) = [o["maximum"] for o in listing["schema"]["anyOf"] if o.get("type") == "integer"]
    found: dict[str, Any] = {"page_size": page_size}
    for path, model, field in TEXT_FIELDS:
        properties = models[model]["properties"]
        (k,) = [o["maximum"] for o in properties["k"]["anyOf"] if o.get("type") == "integer"]
        found[path] = (properties[field]["maxLength"], k)
    return found


def _assert_enforced_as_documented(api: ApiHarness, user: ApiUser) -> None:
    documented = _documented(api)
    for path, _, field in TEXT_FIELDS:
        max_chars, max_k = documented[path]
        longest = "tide " + "x" * (max_chars - 5)
        accepted = api.client.post(path, json={field: longest, "k": max_k}, headers=user.headers)
        assert accepted.status_code == 200, (path, accepted.text)
        too_long = api.client.post(path, json={field: longest + "x"}, headers=user.headers)
        assert_error_body(too_long, 422)
        too_many = api.client.post(path, json={field: "tide", "k": max_k + 1}, headers=user.headers)
        assert_error_body(too_many, 422)
    page_size = documented["page_size"]
    listing = api.client.get("/documents", params={"limit": page_size}, headers=user.headers)
    assert listing.status_code == 200, listing.text
    over = api.client.get("/documents", params={"limit": page_size + 1}, headers=user.headers)
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
    assert _documented(api) == {"page_size": 9, "/search": (300, 7), "/query": (300, 7)}
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
        "page_size": PAGE_SIZE_CEILING,
        "/search": ceilings,
        "/query": ceilings,
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
