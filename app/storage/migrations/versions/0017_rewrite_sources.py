"""A question rewritten from earlier turns keeps the documents the rewrite may quote (the
documents those turns' answers cite), so it is shown only to who reads all of them now; anyone
else sees it as typed.

Conversation questions gain `rewrite_sources`; answer records gain the typed question and
`rewrite_sources`. Rows from before hold no sources, so a rewritten question among them shows
as typed. Answer records of conversation turns still stored learn their typed question here
(the answer's id is its message id, the question is the message before it); the record of a
turn no longer stored cannot be told from a /query answer and keeps showing its question.

Created: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0017"
down_revision = "0016"

_TYPED_OF_STORED_TURNS = """
UPDATE answer_records SET typed_question = (
    SELECT asked.content
    FROM conversation_messages AS answered
    JOIN conversation_messages AS asked
        ON asked.conversation_id = answered.conversation_id AND asked.seq = answered.seq - 1
    WHERE answered.message_id = answer_records.answer_id
        AND answered.tenant_id = answer_records.tenant_id
        AND answered.role = 'assistant'
        AND asked.role = 'user'
        AND asked.standalone_question IS NOT NULL
        AND asked.standalone_question <> asked.content
)
WHERE question IS NOT NULL
"""


def upgrade() -> None:
    add_columns("conversation_messages", sa.Column("rewrite_sources", sa.Text(), nullable=True))
    add_columns(
        "answer_records",
        sa.Column("typed_question", sa.Text(), nullable=True),
        sa.Column("rewrite_sources", sa.Text(), nullable=True),
    )
    op.execute(_TYPED_OF_STORED_TURNS)


def downgrade() -> None:
    drop_columns("answer_records", "rewrite_sources", "typed_question")
    drop_columns("conversation_messages", "rewrite_sources")
