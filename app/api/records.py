"""What every response body read from a service's record shares: reading by attributes, the
moment type, the fields of a view that holds records, and the generic page of a listing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Generic, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, model_validator

# A moment as the API writes it: ISO 8601 with the offset (`datetime.isoformat`).
IsoTime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]


def _in_utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# A moment as the API reads it: ISO 8601; a date, or a time without an offset, is UTC (as in a
# search filter).
UtcMoment = Annotated[datetime, AfterValidator(_in_utc)]
Item = TypeVar("Item", bound=BaseModel)


class Record(BaseModel):
    """A response body read from a service's record by its attributes (`model_validate`)."""

    model_config = ConfigDict(from_attributes=True)


def fields_of(*records: object) -> dict[str, Any]:
    """The fields of these dataclass records side by side (a later one's wins a shared name):
    the flat shape a body shows of a view that holds a record beside values of its own."""
    return {f.name: getattr(r, f.name) for r in records if is_dataclass(r) for f in fields(r)}


class FlatRecord(Record):
    """A body read from a view that holds a record in its field `holds` (a dataclass): the
    record's fields shown beside the view's own, at one level. Read from anything else (the
    record itself), it reads that by its attributes."""

    holds: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, view: object) -> object:
        held = getattr(view, cls.holds, None)
        return fields_of(view, held) if is_dataclass(held) else view


class Page(BaseModel, Generic[Item]):
    """One page of a listing, in the listing's order, and how many there are in all over every
    page (of the statuses asked, for jobs; a listing never cut into pages gives its length).
    `Page[DocumentOut]` is titled `DocumentList` in the schema."""

    data: list[Item]
    count: int = Field(description="how many there are over all pages")

    @classmethod
    def model_parametrized_name(cls, params: tuple[Any, ...]) -> str:
        (item,) = params
        return f"{item.__name__.removesuffix('Out')}List"

    @classmethod
    def of(
        cls, records: Sequence[object], count: int, context: dict[str, Any] | None = None
    ) -> Self:
        """The page of these records, each read as the page's item model (with this validation
        `context`), and the total."""
        return cls.model_validate({"data": records, "count": count}, context=context)
