"""jobs.error_code: a failed job's stable code in its own column, beside the detail in `error`.

Until now `error` held `code: message`. Existing rows are split; a row whose text has no code
(written before codes were stored) gets `ingestion_failed` and keeps its whole text. Downgrade
joins them back.

Created: 2026-12-05
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0010"
down_revision = "0009"

# The form the app wrote: a lower-case code, a colon and a space, then the detail.
_CODED = re.compile(r"([a-z][a-z0-9_]{0,63}): (.*)", re.DOTALL)
_UNCODED = "ingestion_failed"

_jobs = sa.table(
    "jobs",
    sa.column("job_id", sa.String),
    sa.column("error_code", sa.String),
    sa.column("error", sa.Text),
)


def _split(stored: str) -> tuple[str, str]:
    coded = _CODED.fullmatch(stored)
    return (coded.group(1), coded.group(2)) if coded else (_UNCODED, stored)


def upgrade() -> None:
    add_columns("jobs", sa.Column("error_code", sa.String(64), nullable=True))
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_jobs.c.job_id, _jobs.c.error).where(_jobs.c.error.is_not(None))
    ).all()
    for job_id, stored in rows:
        code, detail = _split(stored)
        connection.execute(
            sa.update(_jobs).where(_jobs.c.job_id == job_id).values(error_code=code, error=detail)
        )


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_jobs.c.job_id, _jobs.c.error_code, _jobs.c.error).where(
            _jobs.c.error_code.is_not(None)
        )
    ).all()
    for job_id, code, detail in rows:
        connection.execute(
            sa.update(_jobs).where(_jobs.c.job_id == job_id).values(error=f"{code}: {detail or ''}")
        )
    drop_columns("jobs", "error_code")
