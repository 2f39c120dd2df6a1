"""Bodies of the webhook routes: create, change, show (never the secret after creation)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from app.api.records import IsoTime, Record
from app.services.blocks.webhook_urls import MAX_URL_CHARS
from app.services.webhooks import EventType

MAX_DESCRIPTION_CHARS = 500


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=MAX_URL_CHARS)
    events: list[EventType] = Field(min_length=1, max_length=10)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)


class WebhookUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL_CHARS)
    events: list[EventType] | None = Field(default=None, min_length=1, max_length=10)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    enabled: bool | None = Field(default=None, description="true again re-enables a webhook")


class WebhookOut(Record):
    webhook_id: str
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    consecutive_failures: int
    disabled_reason: str | None
    created_by: str | None
    created_at: IsoTime
    updated_at: IsoTime


class WebhookCreated(WebhookOut):
    secret: str = Field(
        description="the signing secret (`whsec_` + base64), shown only in this answer"
    )


class DeliveryOut(Record):
    delivery_id: str = Field(description="the `webhook-id` header of every attempt")
    event_type: str
    status: str = Field(description="pending, delivered or failed (after 24 hours of retries)")
    attempts: int
    next_attempt_at: IsoTime | None
    last_status_code: int | None
    last_error: str | None
    created_at: IsoTime
    updated_at: IsoTime

    @field_validator("next_attempt_at")
    @classmethod
    def _only_while_pending(cls, moment: object, info: ValidationInfo) -> object:
        # A delivered or failed event is never attempted again.
        return moment if info.data.get("status") == "pending" else None
