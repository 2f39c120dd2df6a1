"""Rows to records, one way: a detached record takes each of its fields from the row's
attribute of the same name, unless the store gives the value itself (a renamed or decoded
column, a joined value)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Record = TypeVar("Record", bound=DataclassInstance)
else:
    Record = TypeVar("Record")


def record_of(kind: type[Record], row: object, **given: Any) -> Record:
    """The `kind` record of an ORM row: `given` values first, the rest read from the row."""
    read = {f.name: getattr(row, f.name) for f in fields(kind) if f.init and f.name not in given}
    return kind(**read, **given)
