"""User names unique per tenant, not across tenants: two organisations may each have a "sara".

Existing rows are untouched: names were unique across tenants until now, so each still names one
user and a login without a tenant finds it. The name keeps an index of its own for that login.

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"

# SQLite keeps the old constraint unnamed; batch mode rebuilds the table and needs a name for
# it, which this convention gives (PostgreSQL has named it `users_username_key` itself).
_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _constraint_on(columns: list[str]) -> str:
    """The name of the users table's unique constraint over exactly these columns."""
    for constraint in sa.inspect(op.get_bind()).get_unique_constraints("users"):
        if constraint["column_names"] == columns:
            return constraint["name"] or _NAMES["uq"] % {
                "table_name": "users",
                "column_0_name": columns[0],
            }
    raise RuntimeError(f"the users table has no unique constraint on {columns}")


def upgrade() -> None:
    old = _constraint_on(["username"])
    with op.batch_alter_table("users", naming_convention=_NAMES) as batch:
        batch.drop_constraint(old, type_="unique")
        batch.create_unique_constraint("uq_users_tenant_id_username", ["tenant_id", "username"])
        batch.create_index("ix_users_username", ["username"])


def downgrade() -> None:
    # Fails (IntegrityError) while two tenants share a name: rename one of them first.
    with op.batch_alter_table("users", naming_convention=_NAMES) as batch:
        batch.drop_index("ix_users_username")
        batch.drop_constraint("uq_users_tenant_id_username", type_="unique")
        batch.create_unique_constraint("uq_users_username", ["username"])
