"""Metadata filters of a search: a JSON tree, checked once, then evaluated per document (and per
page when it names `page`).

A leaf is `{"field": {"$op": value, ...}}` (several operators in one leaf must all hold);
leaves combine under `{"$and": [...]}`, `{"$or": [...]}` and `{"$not": {...}}`, at most
`MAX_DEPTH` levels deep. A field no document has matches nothing. A malformed tree, a value of
the wrong type for a built-in field, an unknown operator or a tree too deep is an `InvalidInput`
that names the problem (a 422).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from app.errors import InvalidInput
from app.services.document_metadata import KEY_PATTERN

MAX_DEPTH = 4
MAX_CHILDREN = 64
MAX_LIST = 256
OPERATORS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$contains")
_RANGE = ("$gt", "$gte", "$lt", "$lte")
TEXT_FIELDS = ("source", "document_id", "collection", "content_type", "language", "uploaded_by")
DATE_FIELDS = ("uploaded_at",)
NUMBER_FIELDS = ("page",)

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Leaf:
    """Conditions on one field, all of which must hold."""

    field: str
    conditions: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Branch:
    """`$and`, `$or` or `$not` of its children."""

    operator: str
    children: tuple[Node, ...]


Node = Leaf | Branch


@dataclass(frozen=True)
class Filter:
    """A checked filter tree and its canonical text (what a cache key holds)."""

    root: Node
    canonical: str

    def uses(self, field: str) -> bool:
        """Whether any leaf names `field`."""
        return _uses(self.root, field)

    def matches(self, value_of: Callable[[str], Any]) -> bool:
        """Whether a document (or one page of it) passes; `value_of(field)` is None when it
        lacks the field, a tuple when several values stand for it (a collection's id and name)."""
        return _matches(self.root, value_of)


def parse_filter(tree: Any) -> Filter:
    """The checked filter of a request body's `filters`, or InvalidInput naming the problem."""
    root = _node(tree, "filters", 1)
    return Filter(root, json.dumps(tree, sort_keys=True, separators=(",", ":"), default=str))


def _node(tree: Any, where: str, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise InvalidInput(f"{where}: filters nest deeper than {MAX_DEPTH} levels")
    if not isinstance(tree, dict) or len(tree) != 1:
        raise InvalidInput(f"{where}: expected an object with one field, or one of $and, $or, $not")
    ((key, value),) = tree.items()
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value or len(value) > MAX_CHILDREN:
            raise InvalidInput(f"{where}.{key}: expected a list of 1 to {MAX_CHILDREN} filters")
        children = tuple(
            _node(child, f"{where}.{key}[{i}]", depth + 1) for i, child in enumerate(value)
        )
        return Branch(key, children)
    if key == "$not":
        return Branch(key, (_node(value, f"{where}.$not", depth + 1),))
    if not isinstance(key, str) or key.startswith("$"):
        raise InvalidInput(f"{where}: unknown operator {key!r}")
    if not KEY_PATTERN.fullmatch(key):
        raise InvalidInput(f"{where}: field name {key!r} must match [a-z][a-z0-9_]{{0,39}}")
    return _leaf(key, value, f"{where}.{key}")


def _leaf(field: str, value: Any, where: str) -> Leaf:
    if not isinstance(value, dict) or not value:
        raise InvalidInput(f'{where}: expected {{operator: value}}, for example {{"$eq": ...}}')
    conditions = []
    for operator, operand in value.items():
        if operator not in OPERATORS:
            raise InvalidInput(f"{where}: unknown operator {operator!r}")
        conditions.append((operator, _operand(field, operator, operand, f"{where}.{operator}")))
    return Leaf(field, tuple(conditions))


def _operand(field: str, operator: str, operand: Any, where: str) -> Any:
    if operator in ("$in", "$nin"):
        if not isinstance(operand, list) or not operand or len(operand) > MAX_LIST:
            raise InvalidInput(f"{where}: expected a list of 1 to {MAX_LIST} values")
        return tuple(_scalar(field, operator, item, where) for item in operand)
    if operator in _RANGE:
        if field in TEXT_FIELDS:
            raise InvalidInput(f"{where}: {field} is text; {operator} compares numbers and dates")
        if isinstance(operand, bool) or not isinstance(operand, int | float | str):
            raise InvalidInput(f"{where}: expected a number or an ISO date")
    if operator == "$contains":
        if field in DATE_FIELDS or field in NUMBER_FIELDS:
            raise InvalidInput(f"{where}: {field} is not text or a list; $contains does not apply")
        if not isinstance(operand, str | int | float) or isinstance(operand, bool):
            raise InvalidInput(f"{where}: expected a string or a number")
    return _scalar(field, operator, operand, where)


def _scalar(field: str, operator: str, operand: Any, where: str) -> Any:
    if not isinstance(operand, str | int | float | bool):
        raise InvalidInput(f"{where}: expected a string, a number or a boolean")
    if field in TEXT_FIELDS and not isinstance(operand, str):
        raise InvalidInput(f"{where}: {field} is text; expected a string")
    if field in NUMBER_FIELDS and (isinstance(operand, bool) or not isinstance(operand, int)):
        raise InvalidInput(f"{where}: {field} is a whole number; expected one")
    if field in DATE_FIELDS:
        if not isinstance(operand, str):
            raise InvalidInput(f"{where}: {field} is a date; expected an ISO date string")
        return _instant(operand, where)
    return operand


def _instant(text: str, where: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{where}: {text!r} is not an ISO date") from None
        parsed = datetime(day.year, day.month, day.day)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _uses(node: Node, field: str) -> bool:
    if isinstance(node, Leaf):
        return node.field == field
    return any(_uses(child, field) for child in node.children)


def _matches(node: Node, value_of: Callable[[str], Any]) -> bool:
    if isinstance(node, Branch):
        if node.operator == "$and":
            return all(_matches(child, value_of) for child in node.children)
        if node.operator == "$or":
            return any(_matches(child, value_of) for child in node.children)
        return not _matches(node.children[0], value_of)
    value = value_of(node.field)
    if value is None:
        return False  # a field the document lacks matches nothing
    return all(_holds(value, operator, operand) for operator, operand in node.conditions)


def _same(value: Any, operand: Any) -> bool:
    if isinstance(value, tuple):  # several names of one thing: any of them
        return any(_same(v, operand) for v in value)
    if isinstance(value, list):
        return operand in value
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    return bool(value == operand)


def _holds(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return _same(value, operand)
    if operator == "$ne":
        return not _same(value, operand)
    if operator == "$in":
        return any(_same(value, item) for item in operand)
    if operator == "$nin":
        return not any(_same(value, item) for item in operand)
    if operator == "$contains":
        if isinstance(value, list):
            return operand in value
        return isinstance(value, str) and isinstance(operand, str) and operand in value
    return _compare(value, operator, operand)


def _compare(value: Any, operator: str, operand: Any) -> bool:
    comparable = (
        (isinstance(value, datetime) and isinstance(operand, datetime))
        or (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and isinstance(operand, int | float)
        )
        or (isinstance(value, str) and isinstance(operand, str))
    )
    if not comparable:
        return False
    if operator == "$gt":
        return bool(value > operand)
    if operator == "$gte":
        return bool(value >= operand)
    if operator == "$lt":
        return bool(value < operand)
    return bool(value <= operand)
