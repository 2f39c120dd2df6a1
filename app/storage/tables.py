"""Every table of the service database, in one module that imports nothing else of the app but
the domain's names.

The repositories (users, documents, chunks, jobs, conversations) import their rows from here,
so no storage module needs another's to build the schema. A change here needs a migration in
`app/storage/migrations/versions` (docs/operations.md, "Database migrations"); a test compares
the two.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from app.domain import GENERAL_COLLECTION


class Base(DeclarativeBase):
    """Declarative base of every table in the service database."""


def table_of(row: type[Base]) -> Table:
    """A mapped class's table, for Core statements that skip the ORM's bookkeeping (hot paths:
    executemany, statements built once)."""
    table = row.__table__
    assert isinstance(table, Table)
    return table


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# --- users -------------------------------------------------------------------------------------


class UserRow(Base):
    """Who may log in, to which tenant, with which password hash (hashes only)."""

    __tablename__ = "users"
    # A name is unique within its tenant (two organisations may each have a "sara"); the index
    # on the name alone serves a login that gives no tenant (migration 0008).
    __table_args__ = (
        UniqueConstraint("tenant_id", "username", name="uq_users_tenant_id_username"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    username: Mapped[str] = mapped_column(String(64), index=True)
    password_hash: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # admin / member / reader (app.domain.Role); migration 0005 made every earlier user admin.
    role: Mapped[str] = mapped_column(String(16), server_default="member")
    disabled: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # Carried in every token as `sv`; bumping it ends every session of the user at once.
    session_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # A break-glass admin (made with the CLI) keeps password sign-in when the tenant's single
    # sign-on turns password sign-in off.
    break_glass: Mapped[bool] = mapped_column(Boolean, server_default=false())


class ApiKeyRow(Base):
    """An API key of a user: only its keyed hash is stored, never the key."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str] = mapped_column(String(40), index=True)
    name: Mapped[str] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(16))  # shown to people to tell keys apart
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # HMAC-SHA256, hex
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Space-separated scopes beyond the role (`keys:manage`: may make and revoke keys).
    scopes: Mapped[str] = mapped_column(String(200), default="", server_default=text("''"))
    # The key that made this one (revoked with it); None when a signed-in person made it.
    parent_key_id: Mapped[str | None] = mapped_column(String(40), nullable=True, index=True)
    # A JSON list of the collection ids the key is limited to; None: all its owner may read.
    collections: Mapped[str | None] = mapped_column(Text, nullable=True)


class RevokedTokenRow(Base):
    """A signed-out access token (its `jti`), refused until it would have expired anyway."""

    __tablename__ = "revoked_tokens"

    jti: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class AuditRow(Base):
    """Who did what in a tenant, and from where; never a secret or a question's text."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    action: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str | None] = mapped_column(String(40), nullable=True)  # who acted
    target_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # what it acted on
    client_ip: Mapped[str | None] = mapped_column(String(64), nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="{}")  # JSON of small, non-secret facts


# --- single sign-on ----------------------------------------------------------------------------


class SsoConfigRow(Base):
    """A tenant's identity provider: the client secret only encrypted, the rest as JSON."""

    __tablename__ = "sso_configs"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    issuer: Mapped[str] = mapped_column(String(512), index=True)
    client_id: Mapped[str] = mapped_column(String(255))
    client_secret_encrypted: Mapped[str] = mapped_column(Text)  # Fernet token, never the secret
    settings: Mapped[str] = mapped_column(Text)  # JSON: scopes, role and group maps, ...
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SsoIdentityRow(Base):
    """Which local user a provider's subject is, per tenant and issuer (`sub` is stable; a
    name or an email address can change hands)."""

    __tablename__ = "sso_identities"
    __table_args__ = (
        UniqueConstraint("tenant_id", "issuer", "subject", name="uq_sso_identities_subject"),
    )

    user_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    issuer: Mapped[str] = mapped_column(String(512))
    subject: Mapped[str] = mapped_column(String(255))


class SsoPendingRow(Base):
    """A sign-in sent to the provider and not back yet, found by its state's hash (one use)."""

    __tablename__ = "sso_pending"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    redirect_uri: Mapped[str] = mapped_column(String(1024))
    next_path: Mapped[str] = mapped_column(String(2048))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class SsoExchangeCodeRow(Base):
    """A one-time code the web app trades for the service's own token, by its hash."""

    __tablename__ = "sso_exchange_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(40))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


# --- collections, groups and grants -------------------------------------------------------------

# Every tenant's first collection (GENERAL_COLLECTION): its id and its name. Documents from before
# collections are in it, and every user of the tenant reads it.


class CollectionRow(Base):
    """A named set of a tenant's documents (a knowledge base) and who may read it."""

    __tablename__ = "collections"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_collections_tenant_id_name"),)

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(String(500), server_default=text("''"))
    # tenant: every user of the tenant reads it; restricted: only its grants do.
    visibility: Mapped[str] = mapped_column(String(16), server_default="tenant")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class GroupRow(Base):
    """A named group of a tenant's users, the usual holder of grants."""

    __tablename__ = "user_groups"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_user_groups_tenant_id_name"),)

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    group_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(String(500), server_default=text("''"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class GroupMemberRow(Base):
    """One user's membership of one group."""

    __tablename__ = "group_members"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    group_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(40), primary_key=True, index=True)


class CollectionGrantRow(Base):
    """A permission (read, write, manage) on a collection for a group or a user."""

    __tablename__ = "collection_grants"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    principal_kind: Mapped[str] = mapped_column(String(8), primary_key=True)  # group / user
    principal_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    permission: Mapped[str] = mapped_column(String(8))


class AccessVersionRow(Base):
    """A tenant's access version, bumped with every change to who may read or write what."""

    __tablename__ = "access_versions"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


# --- documents and their chunks ----------------------------------------------------------------


class DocumentRow(Base):
    """One uploaded document of a tenant, replaced on re-upload."""

    __tablename__ = "documents"
    # A collection holds one document of a name: re-uploading the name there replaces it.
    __table_args__ = (
        UniqueConstraint(
            "tenant_id", "collection_id", "source", name="uq_documents_tenant_collection_source"
        ),
    )

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    document_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    source: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    pages: Mapped[int] = mapped_column(Integer, default=0)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    # Pages of the current version that were OCR'd (read or not): the tenant's OCR page quota.
    ocr_pages: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    content_sha256: Mapped[str] = mapped_column(String(64))
    uploaded_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The user id of whoever uploaded the current version; NULL before migration 0005 or from
    # the CLI.
    uploaded_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # The label of the folder a `rag sync` uploaded it from (NULL: not from a sync): a sync
    # with --delete removes only documents of its own label.
    sync_root: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # The collection the document belongs to (every tenant has `general`, migration 0012).
    collection_id: Mapped[str] = mapped_column(
        String(40), server_default=GENERAL_COLLECTION, index=True
    )
    # A JSON object of the uploader's metadata fields (app/services/document_metadata.py).
    metadata_json: Mapped[str] = mapped_column(Text, server_default=text("'{}'"))
    # The language detected in its indexed text (ISO 639-1; NULL: not told, or indexed before
    # languages were detected).
    language: Mapped[str | None] = mapped_column(String(8), nullable=True)


class ChunkRow(Base):
    """A chunk's record (text, location, metadata); its vector lives in the vector index."""

    __tablename__ = "chunks"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    chunk_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    document_id: Mapped[str] = mapped_column(String(64), index=True)
    source: Mapped[str] = mapped_column(String(255))
    page: Mapped[int] = mapped_column(Integer)
    page_label: Mapped[str] = mapped_column(String(64))
    chunk_index: Mapped[int] = mapped_column(Integer)
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    extra: Mapped[str] = mapped_column(Text, default="{}")  # JSON of Chunk.metadata
    # Added after the first release (migration 0002), so rows from before it are NULL; None also
    # means a content page.
    page_role: Mapped[str | None] = mapped_column(String(32), nullable=True, default=None)


class CorpusVersionRow(Base):
    """A tenant's corpus version, bumped with every change to its chunks."""

    __tablename__ = "corpus_versions"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


# --- ingestion jobs ----------------------------------------------------------------------------


class JobRow(Base):
    """A durable background job: the ingestion of one upload, or the deletion of a collection
    with its documents."""

    __tablename__ = "jobs"

    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    document_id: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(255))
    stored_path: Mapped[str] = mapped_column(String(1024))
    size_bytes: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    progress_stage: Mapped[str] = mapped_column(String(32), default="queued")
    chunks_indexed: Mapped[int] = mapped_column(Integer, default=0)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    # Why the job (or its last attempt) failed: a stable code, and the detail for operators.
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # A JSON list of what a done job could not do (pages OCR could not read); NULL: none.
    warnings: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # `index` (an upload: document_id, source, stored_path) or `collection_delete` (the
    # collection `collection_id`, named `source`, and its documents; no upload).
    kind: Mapped[str] = mapped_column(String(24), default="index", server_default="index")
    collection_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # The user who asked for a job that is not an upload (a deletion), who may follow it.
    requested_by: Mapped[str | None] = mapped_column(String(40), nullable=True)


class TenantTurnRow(Base):
    """When each tenant last had a job claimed: the tie-break of fair scheduling."""

    __tablename__ = "job_tenant_turns"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    served_at: Mapped[datetime] = mapped_column(UTCDateTime())


class BatchMemberRow(Base):
    """A processing job that was claimed in a batch, and the batch (its first job's id)."""

    __tablename__ = "job_batch_members"

    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    batch_id: Mapped[str] = mapped_column(String(40), index=True)


# --- webhooks ----------------------------------------------------------------------------------


class WebhookRow(Base):
    """An endpoint an admin registered to hear of a tenant's document events."""

    __tablename__ = "webhooks"

    webhook_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[str] = mapped_column(Text)  # a JSON list of event types
    description: Mapped[str | None] = mapped_column(String(500), nullable=True)
    # The signing key (Standard Webhooks `whsec_...`): the service must sign with it, so it is
    # kept as given out; the API shows it once, at creation.
    secret: Mapped[str] = mapped_column(String(200))
    created_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    disabled_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class WebhookDeliveryRow(Base):
    """One event for one webhook: delivered at least once, retried with backoff until then."""

    __tablename__ = "webhook_deliveries"

    delivery_id: Mapped[str] = mapped_column(String(40), primary_key=True)  # `webhook-id`
    webhook_id: Mapped[str] = mapped_column(String(40), index=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    event_type: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)  # the exact JSON that is signed and sent
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending, delivered, failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


# --- conversations -----------------------------------------------------------------------------

# A conversation's title is its first question, shortened to this many characters.
CONVERSATION_TITLE_CHARS = 120


class ConversationRow(Base):
    """A conversation of one user of a tenant (its messages are kept in their own table)."""

    __tablename__ = "conversations"

    conversation_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str] = mapped_column(String(64), index=True)
    title: Mapped[str] = mapped_column(String(CONVERSATION_TITLE_CHARS), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class ConversationMessageRow(Base):
    """One question or answer of a conversation, in its place (`seq`)."""

    __tablename__ = "conversation_messages"
    # Two turns stored at once into one conversation cannot both take the same place.
    __table_args__ = (UniqueConstraint("conversation_id", "seq"),)

    message_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(32), index=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)  # the tenant's stored bytes
    seq: Mapped[int] = mapped_column(Integer)  # order within the conversation
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    # user messages: the question retrieval ran on; assistant messages: citations and refusal
    standalone_question: Mapped[str | None] = mapped_column(Text, nullable=True)
    # user messages: the documents the rewrite may quote (JSON list; NULL: written before
    # they were kept, so a rewritten question shows as typed)
    rewrite_sources: Mapped[str | None] = mapped_column(Text, nullable=True)
    citations_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    refused: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # UTF-8 bytes of its text, standalone question and citations: the conversation_bytes quota
    size_bytes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


# --- answer quality: the answer record, feedback, evaluation sets and runs ---------------------


class AnswerRecordRow(Base):
    """A short record of one answer: who asked, what it cited and retrieved, how long it took.

    Kept RAG_ANSWER_LOG_DAYS; with 0 only the ids are kept (so feedback can still be given by
    the person who got the answer), never the question.
    """

    __tablename__ = "answer_records"

    answer_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str] = mapped_column(String(40), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    question: Mapped[str | None] = mapped_column(Text, nullable=True)
    refused: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    cache: Mapped[str | None] = mapped_column(String(8), nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    corpus_version: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cited: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list
    retrieved: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list
    timings: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON object
    total_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    # A conversation's rewritten question: as typed, and the documents the rewrite may quote
    # (JSON list; NULL with a typed question: not known).
    typed_question: Mapped[str | None] = mapped_column(Text, nullable=True)
    rewrite_sources: Mapped[str | None] = mapped_column(Text, nullable=True)


class AnswerFeedbackRow(Base):
    """One person's judgement of one answer (changed in place when they rate it again)."""

    __tablename__ = "answer_feedback"
    __table_args__ = (UniqueConstraint("tenant_id", "answer_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    answer_id: Mapped[str] = mapped_column(String(32), index=True)
    user_id: Mapped[str] = mapped_column(String(40))
    rating: Mapped[str] = mapped_column(String(8))
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    helpful_markers: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of ints
    expected: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of objects
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class EvaluationSetRow(Base):
    """A tenant's own questions with the pages that answer them."""

    __tablename__ = "evaluation_sets"

    set_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(200))
    items: Mapped[str] = mapped_column(Text)  # JSON list of items
    item_count: Mapped[int] = mapped_column(Integer)
    created_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class EvaluationRunRow(Base):
    """One run of a set: a durable background job, then its per-item results and aggregate."""

    __tablename__ = "evaluation_runs"

    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    set_id: Mapped[str] = mapped_column(String(32), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    answers: Mapped[bool] = mapped_column(Boolean)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    corpus_version: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    documents: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON {id: sha256}
    settings: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON object
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON object
    results: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # JSON list of the collection ids its starter's credential read (None: made before runs
    # recorded it, so only callers who read every collection see it).
    collections: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
