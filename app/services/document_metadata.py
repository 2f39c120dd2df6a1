"""A document's own metadata fields: what an uploader may attach, checked before it is stored.

A JSON object of at most 32 keys; a key matches `[a-z][a-z0-9_]{0,39}` and is not one of the
built-in fields every document has (`BUILT_IN_FIELDS`); a value is a string of at most 256
characters (an ISO date is written as one), a number, a boolean, or a list of at most 32 such
strings. Anything else is an `InvalidInput` that names the key and the problem.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from app.errors import InvalidInput

MAX_KEYS = 32
MAX_STRING = 256
MAX_LIST = 32
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,39}")
BUILT_IN_FIELDS = (
    "source",
    "document_id",
    "collection",
    "content_type",
    "language",
    "uploaded_at",
    "uploaded_by",
    "page",
)

MetadataValue = str | int | float | bool | list[str]


def checked_metadata(value: Any) -> dict[str, MetadataValue]:
    """The metadata as stored, or InvalidInput naming what is wrong with it."""
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object")
    if len(value) > MAX_KEYS:
        raise InvalidInput(f"metadata has {len(value)} keys; at most {MAX_KEYS} are allowed")
    checked: dict[str, MetadataValue] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise InvalidInput(
                f"metadata key {key!r} must match [a-z][a-z0-9_]{{0,39}} (lower-case letters, "
                "digits and underscores, starting with a letter)"
            )
        if key in BUILT_IN_FIELDS:
            raise InvalidInput(f"metadata key {key!r} is a built-in field and cannot be set")
        checked[key] = _checked_value(key, item)
    return checked


def parse_metadata(text: str | None) -> dict[str, MetadataValue]:
    """The upload form's `metadata` field (JSON text; empty or absent: no metadata)."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"metadata is not valid JSON: {exc.msg}") from None
    return checked_metadata(value)


def _checked_value(key: str, item: Any) -> MetadataValue:
    if isinstance(item, bool):
        return item
    if isinstance(item, int | float):
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"metadata {key!r}: a number must be finite")
        return item
    if isinstance(item, str):
        if len(item) > MAX_STRING:
            raise InvalidInput(f"metadata {key!r}: a string holds at most {MAX_STRING} characters")
        return item
    if isinstance(item, list):
        if len(item) > MAX_LIST:
            raise InvalidInput(f"metadata {key!r}: a list holds at most {MAX_LIST} strings")
        for element in item:
            if not isinstance(element, str) or len(element) > MAX_STRING:
                raise InvalidInput(
                    f"metadata {key!r}: a list holds strings of at most {MAX_STRING} characters"
                )
        return list(item)
    raise InvalidInput(
        f"metadata {key!r}: a value is a string, a number, a boolean or a list of strings"
    )
