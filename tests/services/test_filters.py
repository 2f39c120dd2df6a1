"""Metadata filters as a search reads them: every operator, the typed built-in fields, a field
a document lacks, and the 422 message of each kind of bad tree; and the limits of the metadata
an upload may carry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.errors import InvalidInput
from app.services.document_metadata import checked_metadata
from app.services.filters import parse_filter
from app.services.search_scope import field_values, fields_of
from app.storage.collections import DocumentFacts

DOCUMENT = DocumentFacts(
    document_id="doc_1",
    collection_id="col_1",
    source="pump-manual.pdf",
    uploaded_at=datetime(2026, 3, 14, 9, 30, tzinfo=UTC),
    uploaded_by="usr_1",
    uploaded_by_name="ada",
    metadata={"team": "ops", "year": 2024, "draft": False, "tags": ["tide", "ferry"]},
    language="en",
)


def matches(tree: Any) -> bool:
    fields = {**fields_of(DOCUMENT, "engineering"), "page": 7}  # as a search judges page 7
    return parse_filter(tree).matches(field_values(fields, DOCUMENT))


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ({"team": {"$eq": "ops"}}, True),
        ({"team": {"$ne": "ops"}}, False),
        ({"team": {"$in": ["hr", "ops"]}}, True),
        ({"team": {"$nin": ["hr", "ops"]}}, False),
        ({"year": {"$gt": 2023, "$lte": 2024}}, True),
        ({"year": {"$lt": 2024}}, False),
        ({"year": {"$eq": "2024"}}, False),  # a string is not the number
        ({"draft": {"$eq": False}}, True),
        ({"draft": {"$eq": 0}}, False),  # nor is a number a boolean
        ({"tags": {"$contains": "tide"}}, True),
        ({"tags": {"$eq": "ferry"}}, True),
        ({"tags": {"$contains": "storm"}}, False),
        ({"source": {"$contains": "manual"}}, True),
        ({"collection": {"$eq": "engineering"}}, True),  # by name
        ({"collection": {"$eq": "col_1"}}, True),  # or by id
        ({"collection": {"$nin": ["engineering"]}}, False),
        ({"uploaded_by": {"$eq": "ada"}}, True),
        ({"content_type": {"$eq": "application/pdf"}}, True),
        ({"language": {"$in": ["de", "fr"]}}, False),
        ({"uploaded_at": {"$gte": "2026-03-14"}}, True),
        ({"uploaded_at": {"$lt": "2026-03-14T09:00:00+00:00"}}, False),
        ({"page": {"$gte": 5, "$lt": 8}}, True),
        ({"$and": [{"team": {"$eq": "ops"}}, {"page": {"$eq": 7}}]}, True),
        ({"$or": [{"team": {"$eq": "hr"}}, {"year": {"$eq": 2024}}]}, True),
        ({"$not": {"team": {"$eq": "ops"}}}, False),
        # A field no document has matches nothing, whatever the operator.
        ({"nobody_has": {"$eq": 1}}, False),
        ({"nobody_has": {"$ne": 1}}, False),
        ({"nobody_has": {"$nin": ["x"]}}, False),
    ],
)
def test_each_operator_on_custom_and_built_in_fields(tree: Any, expected: bool) -> None:
    assert matches(tree) is expected


@pytest.mark.parametrize(
    ("tree", "named"),
    [
        ({"team": {"$regex": "o"}}, "unknown operator '$regex'"),
        ({"$xor": [{"team": {"$eq": "ops"}}]}, "unknown operator '$xor'"),
        ({"Team": {"$eq": "ops"}}, "field name 'Team'"),
        ({"team": "ops"}, "expected {operator: value}"),
        ({"team": {"$in": "ops"}}, "expected a list"),
        ({"team": {"$in": []}}, "expected a list"),
        ({"$and": {"team": {"$eq": "ops"}}}, "filters.$and: expected a list"),
        ({"$and": []}, "filters.$and: expected a list"),
        ({"team": {"$eq": ["ops"]}}, "expected a string, a number or a boolean"),
        ({"team": {"$eq": "ops"}, "year": {"$eq": 1}}, "expected an object with one field"),
        ({"page": {"$eq": "seven"}}, "page is a whole number"),
        ({"page": {"$contains": 7}}, "$contains does not apply"),
        ({"source": {"$gt": "a"}}, "source is text"),
        ({"language": {"$eq": 1}}, "language is text"),
        ({"uploaded_at": {"$gt": "last week"}}, "is not an ISO date"),
        ({"uploaded_at": {"$gt": 2026}}, "uploaded_at is a date"),
        (
            {"$not": {"$not": {"$not": {"$not": {"team": {"$eq": "x"}}}}}},
            "deeper than 4 levels",
        ),
        ({"$or": [{"$and": [{"$not": {"$or": [{"a": {"$eq": 1}}]}}]}]}, "deeper than 4"),
    ],
)
def test_a_bad_tree_is_refused_naming_the_problem(tree: Any, named: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_filter(tree)
    assert named in str(refused.value)


def test_four_levels_are_allowed() -> None:
    assert matches({"$not": {"$not": {"$not": {"team": {"$eq": "ops"}}}}}) is False


def test_equal_trees_in_any_key_order_share_one_canonical_text() -> None:
    one = parse_filter({"year": {"$gte": 2020, "$lt": 2030}})
    other = parse_filter({"year": {"$lt": 2030, "$gte": 2020}})
    assert one.canonical == other.canonical


def test_metadata_holds_32_keys_of_every_kind_and_no_more() -> None:
    kinds: dict[str, Any] = {
        "owner": "ada",
        "year": 2024,
        "ratio": 0.5,
        "draft": True,
        "reviewed_on": "2026-03-14",
        "tags": ["x"] * 32,
    }
    full = {**kinds, **{f"k{i}": i for i in range(32 - len(kinds))}}
    assert checked_metadata(full) == full
    with pytest.raises(InvalidInput, match="33 keys; at most 32"):
        checked_metadata({**full, "one_more": 1})
    with pytest.raises(InvalidInput, match="'tags': a list holds at most 32"):
        checked_metadata({"tags": ["x"] * 33})
    with pytest.raises(InvalidInput, match="'ratio': a number must be finite"):
        checked_metadata({"ratio": float("nan")})
    with pytest.raises(InvalidInput, match="'nested'"):
        checked_metadata({"nested": {"a": 1}})
    with pytest.raises(InvalidInput, match="must match"):
        checked_metadata({"k" * 41: 1})
    assert checked_metadata({"k" * 40: 1}) == {"k" * 40: 1}
