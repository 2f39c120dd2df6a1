"""Bodies of the account, API key, user administration and audit log endpoints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.collection_schemas import (
    MAX_SCOPE_COLLECTIONS,
    CollectionRef,
    names_a_collection,
)
from app.api.records import IsoTime, Record
from app.domain import KEY_SCOPES, KeyScope, Role
from app.services.api_keys import KEY_MAX_DAYS, KEY_NAME_MAX_CHARS

# Form bounds only: the services check the real rules (3-64 name characters, 12+ password
# characters, at most 72 bytes for bcrypt) and say which one failed.
USERNAME_FIELD_CHARS = 64
PASSWORD_FIELD_CHARS = 1024


class MeOut(BaseModel):
    user_id: str
    username: str
    tenant_id: str
    role: Role = Field(description="the role this request acts with (a key's, if weaker)")
    credential: Literal["token", "key"]
    key_id: str | None = Field(description="the API key's id when called with a key")
    scopes: list[KeyScope] = Field(description="the API key's scopes (none with a token)")


class LogoutIn(BaseModel):
    """POST /auth/logout has no body fields. A client that sent `{"all": true}` and got a 204
    would believe every session ended while only this one did: any field is refused."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and data:
            raise ValueError(
                f"sign-out takes no body fields (got {', '.join(sorted(map(str, data)))}); "
                "to end every session of the user, ask POST /auth/logout?all=true"
            )
        return data


class PasswordChangeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    current_password: str = Field(min_length=1, max_length=PASSWORD_FIELD_CHARS)
    new_password: str = Field(min_length=1, max_length=PASSWORD_FIELD_CHARS)


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=KEY_NAME_MAX_CHARS, description="what it is for")
    role: Role | None = Field(default=None, description="at most yours; default: yours")
    expires_in_days: int | None = Field(
        default=None,
        ge=1,
        le=KEY_MAX_DAYS,
        description="default: never expires; required when a key makes the key (which then "
        "expires no later than its maker)",
    )
    scopes: list[KeyScope] = Field(
        default=[],
        max_length=len(KEY_SCOPES),
        description="`keys:manage`: the key may make and revoke keys (given by an admin "
        "signed in with a token only)",
    )
    collections: list[CollectionRef] | None = Field(
        default=None,
        min_length=1,  # a key limited to no collection would read nothing, silently
        max_length=MAX_SCOPE_COLLECTIONS,
        description="limit the key to these collections (ids or names, each one you read); "
        "it reads them with your permissions at the time of use. Default: all you read",
    )

    @field_validator("collections", mode="before")
    @classmethod
    def _names_a_collection(cls, value: Any) -> Any:
        return names_a_collection(value, "for a key that reads every collection you read")


class KeyOut(Record):
    key_id: str
    name: str
    role: Role
    prefix: str = Field(description="the key's first characters, to tell keys apart")
    user_id: str = Field(description="the key's owner")
    created_at: IsoTime
    expires_at: IsoTime | None
    last_used_at: IsoTime | None = Field(description="to the minute; null if never used")
    scopes: list[KeyScope]
    parent_key_id: str | None = Field(description="the key that made it (revoked with it)")
    collections: list[str] | None = Field(
        default=None, description="collection ids the key is limited to (null: not limited)"
    )


class KeyCreatedOut(Record):
    key_id: str
    name: str
    role: Role
    prefix: str
    key: str = Field(description="the key itself: shown only in this response, store it now")
    created_at: IsoTime
    expires_at: IsoTime | None
    scopes: list[KeyScope]
    collections: list[str] | None = Field(
        default=None, description="collection ids the key is limited to (null: not limited)"
    )


class KeyList(BaseModel):
    data: list[KeyOut]


class UserIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=USERNAME_FIELD_CHARS)
    password: str = Field(min_length=1, max_length=PASSWORD_FIELD_CHARS)
    role: Role = "member"


class UserPatch(BaseModel):
    # At least one field (422 "nothing to change" otherwise).
    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    role: Role | None = None
    disabled: bool | None = Field(
        default=None, description="true ends the user's sessions and deletes its API keys"
    )
    password: str | None = Field(
        default=None,
        min_length=1,
        max_length=PASSWORD_FIELD_CHARS,
        description="a new password; ends the user's sessions and deletes its API keys",
    )


class UserOut(Record):
    user_id: str = Field(validation_alias="id")  # the record's `id`
    username: str
    role: Role
    disabled: bool
    created_at: IsoTime


class AuditEntryOut(Record):
    id: int
    at: IsoTime
    action: str
    user_id: str | None = Field(description="who acted (null: an operator or an unknown name)")
    target_id: str | None = Field(description="the user, key or document acted on")
    client_ip: str | None
    detail: dict[str, Any]
