"""A key made by a key limited to some collections is limited to them too.

Until now such a key could be made with no limit, or with collections its maker did not read,
and then read every collection its owner reads. The service no longer makes such keys; this
step narrows the ones already made: a made key without a limit takes its maker's, and one with
a limit keeps only the collections its maker was limited to (none left: it reads nothing).
Keys made by a person, or by an unlimited key, are left as they are. The downgrade leaves the
narrowed limits in place: widening them again would reopen what they could read.

Created: 2026-12-06
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"

_MADE_BY_LIMITED_KEYS = sa.text(
    "SELECT made.key_id, made.collections, maker.collections FROM api_keys AS made "
    "JOIN api_keys AS maker ON maker.key_id = made.parent_key_id "
    "WHERE maker.collections IS NOT NULL"
)
_LIMIT = sa.text("UPDATE api_keys SET collections = :collections WHERE key_id = :key_id")


def upgrade() -> None:
    connection = op.get_bind()
    for key_id, own, makers in connection.execute(_MADE_BY_LIMITED_KEYS).all():
        allowed = set(json.loads(makers))
        narrowed = allowed if own is None else allowed & set(json.loads(own))
        limit = json.dumps(sorted(narrowed))
        if limit != own:
            connection.execute(_LIMIT, {"collections": limit, "key_id": key_id})


def downgrade() -> None:
    pass
