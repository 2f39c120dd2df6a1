"""Columns most tables of the revisions share, spelled once.

Revisions are frozen, and these run inside them: a helper must keep making exactly the column it
makes today. A revision that needs another form of one (another length, another nullability)
writes its own `sa.Column`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

UTC_TIME = sa.DateTime(timezone=True)


def string_key(name: str, length: int) -> sa.Column[Any]:
    """A string column that is the primary key, or one part of it."""
    return sa.Column(name, sa.String(length), primary_key=True)


def tenant_column(*, key: bool = False, index: bool | None = None) -> sa.Column[Any]:
    """`tenant_id`, the tenant a row belongs to: a part of the primary key (`key`), or required."""
    if key:
        return string_key("tenant_id", 64)
    return sa.Column("tenant_id", sa.String(64), nullable=False, index=index)


def timestamp(name: str, *, nullable: bool = False, index: bool | None = None) -> sa.Column[Any]:
    """A time with its zone (stored as UTC), required unless `nullable`."""
    return sa.Column(name, UTC_TIME, nullable=nullable, index=index)
