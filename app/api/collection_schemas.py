"""Bodies of the collection, group and grant endpoints, and the search scope fields that
/search, /query, conversations and /v1/chat/completions take."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.records import FlatRecord, IsoTime, Record
from app.storage.collections import Grant, Permission, Visibility

NAME_CHARS = 64
DESCRIPTION_CHARS = 500
ID_CHARS = 80  # an id or a name
MAX_SCOPE_COLLECTIONS = 200
MAX_GRANTS = 500
# A collection named in a request's scope, by id or name.
CollectionRef = Annotated[str, Field(max_length=ID_CHARS)]


def names_a_collection(value: Any, left_out: str) -> Any:
    """Refuse an empty `collections` list: it would read nothing and answer as if nothing
    matched. `left_out` says what leaving the field out does instead."""
    if isinstance(value, list) and not value:
        raise ValueError(f"name at least one collection, or leave collections out {left_out}")
    return value


class ScopeFields(BaseModel):
    """`collections` and `filters`: narrow what a search or an answer may read."""

    collections: list[CollectionRef] | None = Field(
        default=None,
        max_length=MAX_SCOPE_COLLECTIONS,
        description="ids or names of collections to search; only ever narrows what you may "
        "read (a collection you may not read is 404, like a missing one). Default: every "
        "collection you read",
    )
    filters: dict[str, Any] | None = Field(
        default=None,
        description='a metadata filter tree: {"field": {"$eq": value}}, $ne $in $nin $gt $gte '
        "$lt $lte $contains, combined with $and, $or, $not, at most 4 levels (docs/api.md, "
        "Filters)",
    )

    @field_validator("collections", mode="before")
    @classmethod
    def _names_a_collection(cls, value: Any) -> Any:
        return names_a_collection(value, "to read every collection you read")


class CollectionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_CHARS)
    description: str = Field(default="", max_length=DESCRIPTION_CHARS)
    visibility: Visibility = Field(
        default="tenant",
        description="tenant: every user of the tenant reads it; restricted: only its grants",
    )


class CollectionPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=NAME_CHARS)
    description: str | None = Field(default=None, max_length=DESCRIPTION_CHARS)
    visibility: Visibility | None = None


class CollectionOut(FlatRecord):
    """Read from a view: the collection beside its reader's counts and permission."""

    holds = "collection"

    collection_id: str
    name: str
    description: str
    visibility: Visibility
    documents: int = Field(description="documents in it")
    chunks: int = Field(description="indexed passages in it")
    permission: Permission = Field(description="your permission on it")
    created_at: IsoTime
    updated_at: IsoTime


class CollectionDeleting(BaseModel):
    collection_id: str
    status: Literal["deleting"]
    documents: int = Field(description="documents being deleted before the collection goes")
    job_id: str = Field(description="the job deleting them: GET /jobs/{job_id} shows how far")


class GrantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group_id: str | None = Field(default=None, max_length=ID_CHARS, description="id or name")
    user_id: str | None = Field(default=None, max_length=ID_CHARS)
    permission: Permission

    @model_validator(mode="after")
    def _one_holder(self) -> GrantIn:
        if (self.group_id is None) == (self.user_id is None):
            raise ValueError("a grant names exactly one of group_id and user_id")
        return self

    def as_grant(self) -> Grant:
        """This grant as the service takes it (a group still by id or name)."""
        if self.group_id is not None:
            return Grant("group", self.group_id, self.permission)
        assert self.user_id is not None  # _one_holder: exactly one of them
        return Grant("user", self.user_id, self.permission)


class GrantsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grants: list[GrantIn] = Field(max_length=MAX_GRANTS)


class GrantOut(Record):
    group_id: str | None = None
    user_id: str | None = None
    permission: Permission

    @model_validator(mode="before")
    @classmethod
    def _holder(cls, grant: object) -> object:
        # A grant names its holder's kind and id; the body has an id field for each kind.
        if isinstance(grant, Grant):
            return {
                f"{grant.principal_kind}_id": grant.principal_id,
                "permission": grant.permission,
            }
        return grant


class AccessOut(FlatRecord):
    """Read from a collection's grants: the collection's id and visibility, and the grants."""

    holds = "collection"

    collection_id: str
    visibility: Visibility
    grants: list[GrantOut]


class GroupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_CHARS)
    description: str = Field(default="", max_length=DESCRIPTION_CHARS)


class GroupPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=NAME_CHARS)
    description: str | None = Field(default=None, max_length=DESCRIPTION_CHARS)


class GroupOut(FlatRecord):
    """Read from a group with its members."""

    holds = "group"

    group_id: str
    name: str
    description: str
    members: list[str] = Field(description="user ids")
    created_at: IsoTime


class DocumentPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collection: str | None = Field(
        default=None, max_length=ID_CHARS, description="move to this collection (id or name)"
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="replace the document's own metadata fields"
    )
