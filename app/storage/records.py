"""Rows to records and back, one way: a detached record takes each of its fields from the
row's attribute of the same name, and a new row each of its columns from the record's field of
the same name, unless the store gives the value itself (a renamed, encoded or decoded column, a
joined value). A page of a listing is read one way too (`listed_page`), as is how many rows
match (`count_rows`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from app.domain import ListedPage

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Record = TypeVar("Record", bound=DataclassInstance)
else:
    Record = TypeVar("Record")
Listed = TypeVar("Listed")


def record_of(kind: type[Record], row: object, **given: Any) -> Record:
    """The `kind` record of an ORM row: `given` values first, the rest read from the row."""
    read = {f.name: getattr(row, f.name) for f in fields(kind) if f.init and f.name not in given}
    return kind(**read, **given)


def columns_of(record: DataclassInstance, **given: Any) -> dict[str, Any]:
    """The column values of a new row from a record: `given` values first, the rest the
    record's fields (each the name of a column)."""
    read = {f.name: getattr(record, f.name) for f in fields(record) if f.name not in given}
    return {**read, **given}


def count_rows(session: Session, table: Any, *where: ColumnElement[bool]) -> int:
    """How many rows of `table` match every condition of `where`."""
    return int(session.scalar(select(func.count()).select_from(table).where(*where)) or 0)


def listed_page(
    session: Session,
    query: Select[*tuple[Any, ...]],
    where: Sequence[ColumnElement[bool]],
    counted: Any,
    limit: int,
    offset: int,
    record: Callable[..., Listed],
) -> ListedPage[Listed]:
    """The `limit` rows from `offset` that `query` (its order given) selects under `where`,
    each made a record by `record(*row)`, and how many rows of the `counted` table match
    `where` in all."""
    rows = session.execute(query.where(*where).limit(limit).offset(offset))
    found = [record(*row) for row in rows]
    return ListedPage(found, count_rows(session, counted, *where))
