"""Schema migrations on a real SQLite file and a real PostgreSQL database (one per test): a
database from before migrations keeps its rows and the app reads them, a fresh one reaches the
same schema, a second run changes nothing, processes starting together migrate once, and the
newest revision matches the table models (a model change without a migration fails here)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from app import security
from app.domain import Chunk
from app.errors import ConfigurationError, Conflict, TenantRequired
from app.jobs.store import JobStore
from app.services.users import UserService
from app.storage.chunks import ChunkStore
from app.storage.db import Database, open_database
from app.storage.documents import DocumentStore
from app.storage.migrate import SchemaChange, current_revision
from app.storage.tables import Base
from app.storage.users import UserStore
from tests.fresh_database import fresh_postgres_database
from tests.storage.legacy_schema import PASSWORD_HASH, UPLOADED, create_legacy_database
from tests.storage.schema_revisions import head_revision, migrate_to

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[str]:
    """The URL of an empty database of its own: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{data_dir / 'service.db'}"
        return
    with fresh_postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield url


@pytest.fixture
def opened() -> Iterator[list[Database]]:
    """Databases a test opened, disposed of at its end."""
    databases: list[Database] = []
    yield databases
    for database in databases:
        database.dispose()


def _open(url: str, opened: list[Database]) -> Database:
    database = open_database(url)
    opened.append(database)
    return database


def _legacy(url: str, with_page_role: bool) -> None:
    engine = create_engine(url)
    create_legacy_database(engine, with_page_role)
    engine.dispose()


def _differences(database: Database) -> list[Any]:
    """What autogenerate would write into a new revision: empty when the models match."""
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_server_default": True})
        return list(compare_metadata(context, Base.metadata))


def _revision(database: Database) -> str | None:
    with database.engine.connect() as connection:
        return current_revision(connection)


def _chunk(chunk_id: str, role: str | None) -> Chunk:
    return Chunk(chunk_id, "acme", "doc-2", "new.pdf", 1, "1", 0, 0, 8, "new text", {}, role)  # type: ignore[arg-type]


def test_a_database_from_before_migrations_keeps_every_row(
    empty_url: str, opened: list[Database]
) -> None:
    _legacy(empty_url, with_page_role=True)
    database = _open(empty_url, opened)

    assert _revision(database) == head_revision()
    assert _differences(database) == []
    columns = {column["name"] for column in inspect(database.engine).get_columns("users")}
    assert "is_admin" not in columns

    user = UserStore(database).get_by_username("acme", "alice")
    assert user is not None
    assert (user.id, user.tenant_id, user.password_hash) == ("usr_old", "acme", PASSWORD_HASH)
    assert user.created_at == UPLOADED
    # Migration 0005: everyone who could do everything before roles is an admin of its tenant.
    assert (user.role, user.disabled, user.session_version) == ("admin", False, 0)
    document = DocumentStore(database).get("acme", "manual")
    assert document is not None
    assert (document.status, document.pages, document.chunks) == ("done", 3, 1)
    assert document.uploaded_at == UPLOADED
    assert document.uploaded_by is None  # nobody recorded uploaders before 0005
    chunks = ChunkStore(database)
    [old] = chunks.get("acme", ["c-old"])
    assert (old.text, old.page_label, old.page_role) == ("old chunk text", "ii", "contents")
    assert old.metadata == {"section": "Valves"}
    assert chunks.version("acme") == 7

    jobs = JobStore(database)
    job = jobs.get("acme", "job_old")
    assert job is not None and job.status == "queued" and job.created_at == UPLOADED
    claimed = jobs.claim_next()
    assert claimed is not None and claimed.job_id == "job_old"

    # New rows go in next to the old ones (a user insert no longer names is_admin).
    UserStore(database).add("acme", "bob", PASSWORD_HASH)
    users = UserStore(database).list("acme")
    assert [(u.username, u.role) for u in users] == [("alice", "admin"), ("bob", "member")]


def test_a_database_from_before_page_role_gains_the_column(
    empty_url: str, opened: list[Database]
) -> None:
    _legacy(empty_url, with_page_role=False)
    database = _open(empty_url, opened)

    assert _differences(database) == []
    store = ChunkStore(database)
    [old] = store.get("acme", ["c-old"])
    assert old.text == "old chunk text"
    assert old.page_role is None  # a row from before page roles reads as a content page
    store.write_documents("acme", {"doc-2": [_chunk("c-new", "contents")]})
    assert [c.page_role for c in store.get("acme", ["c-old", "c-new"])] == [None, "contents"]


def test_a_fresh_database_gets_the_schema_of_the_models(
    empty_url: str, opened: list[Database]
) -> None:
    database = Database(empty_url)
    opened.append(database)
    assert _revision(database) is None
    change = database.migrate()
    assert change == SchemaChange(None, head_revision())
    assert change.changed
    assert _differences(database) == []
    assert set(inspect(database.engine).get_table_names()) == {
        *Base.metadata.tables,
        "alembic_version",
    }


def test_a_second_run_changes_nothing(empty_url: str, opened: list[Database]) -> None:
    _legacy(empty_url, with_page_role=False)
    first = _open(empty_url, opened)
    first_change = first.migrate()
    assert first_change == SchemaChange(head_revision(), head_revision())
    assert not first_change.changed
    again = _open(empty_url, opened)  # a restart
    assert again.migrate() == SchemaChange(head_revision(), head_revision())
    assert [c.text for c in ChunkStore(again).get("acme", ["c-old"])] == ["old chunk text"]
    assert _differences(again) == []


def test_processes_starting_together_migrate_once(empty_url: str, opened: list[Database]) -> None:
    starters = 4
    databases = [Database(empty_url) for _ in range(starters)]
    opened.extend(databases)
    start = threading.Barrier(starters)
    changes: list[SchemaChange] = []
    failures: list[BaseException] = []

    def start_up(database: Database) -> None:
        start.wait()
        try:
            changes.append(database.migrate())
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start_up, args=(db,)) for db in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sorted(change.before or "" for change in changes) == [""] + [head_revision()] * 3
    assert _differences(databases[0]) == []


def test_a_database_migrated_by_a_newer_release_is_refused(
    empty_url: str, opened: list[Database]
) -> None:
    database = _open(empty_url, opened)
    with database.engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(ConfigurationError, match="revision '9999'"):
        _open(empty_url, opened)


def test_every_revision_downgrades_and_upgrades_again(
    empty_url: str, opened: list[Database]
) -> None:
    database = _open(empty_url, opened)
    UserStore(database).add("acme", "alice", PASSWORD_HASH)
    migrate_to(database, "0002")  # users regain is_admin, False for the existing row
    assert _revision(database) == "0002"
    columns = {column["name"] for column in inspect(database.engine).get_columns("users")}
    assert "is_admin" in columns
    migrate_to(database, "base")
    assert set(inspect(database.engine).get_table_names()) == {"alembic_version"}
    assert database.migrate() == SchemaChange(None, head_revision())
    assert _differences(database) == []


def test_conversation_messages_from_before_their_size_are_measured_in_utf8_bytes(
    empty_url: str, opened: list[Database]
) -> None:
    database = _open(empty_url, opened)
    migrate_to(database, "0005")
    with database.engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO conversation_messages (message_id, conversation_id, tenant_id, seq, "
            "role, content, standalone_question, citations_json, refused, created_at) VALUES "
            "('m1', 'c1', 'acme', 0, 'user', 'ما هو؟', 'ما هو؟', NULL, NULL, "
            "'2026-12-01 10:00:00+00:00'), "
            "('m2', 'c1', 'acme', 1, 'assistant', 'Pump P-7 [1]', NULL, '[]', false, "
            "'2026-12-01 10:00:00+00:00')"
        )
    migrate_to(database, "head")
    with database.engine.connect() as connection:
        sizes = dict(
            connection.exec_driver_sql(
                "SELECT message_id, size_bytes FROM conversation_messages"
            ).all()
        )
    assert sizes == {"m1": 2 * len("ما هو؟".encode()), "m2": len("Pump P-7 [1]") + 2}
    assert _differences(database) == []


def test_users_from_before_names_per_tenant_still_log_in_without_a_tenant(
    empty_url: str, opened: list[Database]
) -> None:
    database = _open(empty_url, opened)
    old_password = "their password from before"
    hashed = security.hash_password(old_password, 4)
    migrate_to(database, "0007")  # names unique across tenants
    with database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO users (id, tenant_id, username, password_hash, created_at, role, "
                "disabled, session_version) VALUES (:id, :tenant, :name, :hash, :at, 'admin', "
                "false, 0)"
            ),
            [
                {"id": "usr_a", "tenant": "acme", "name": "alice", "hash": hashed, "at": UPLOADED},
                {"id": "usr_b", "tenant": "globex", "name": "bob", "hash": hashed, "at": UPLOADED},
            ],
        )
    migrate_to(database, "head")
    assert _differences(database) == []
    users = UserService(UserStore(database), 4)
    # Every existing login works as it did, with no tenant.
    assert users.authenticate("alice", old_password).tenant_id == "acme"
    assert users.authenticate("Bob", old_password).tenant_id == "globex"
    # Now another tenant may take the name; the same tenant still may not.
    users.create_user(tenant_id="globex", username="alice", password="a new long password for her")
    with pytest.raises(Conflict):
        users.create_user(tenant_id="acme", username="alice", password="yet another long password")
    # A name in two tenants needs its tenant: alice of acme names it and gets in.
    with pytest.raises(TenantRequired):
        users.authenticate("alice", old_password)
    assert users.authenticate("alice", old_password, tenant="acme").id == "usr_a"
    assert users.authenticate("alice", "a new long password for her", tenant="globex")


def test_job_errors_from_before_their_code_column_are_split_and_joined_back(
    empty_url: str, opened: list[Database]
) -> None:
    database = _open(empty_url, opened)
    stored = {
        "job_coded": "encrypted_document: the PDF is encrypted: upload a copy",
        "job_plain": "Parser crashed: bad xref",  # written before codes were stored
        "job_ok": None,
    }
    migrate_to(database, "0009")
    with database.engine.begin() as connection:
        for job_id, error in stored.items():
            connection.execute(
                text(
                    "INSERT INTO jobs (job_id, tenant_id, document_id, source, stored_path, "
                    "size_bytes, status, progress_done, progress_total, progress_stage, "
                    "chunks_indexed, pages, error, attempts, created_at, updated_at) VALUES "
                    "(:job_id, 'acme', 'doc', 'a.pdf', '/gone', 1, 'failed', 0, 0, 'failed', "
                    "0, 0, :error, 1, '2026-12-01 10:00:00+00:00', '2026-12-01 10:00:00+00:00')"
                ),
                {"job_id": job_id, "error": error},
            )
    migrate_to(database, "head")
    jobs = JobStore(database)
    split = {
        job_id: (job.error_code, job.error)
        for job_id in stored
        if (job := jobs.get("acme", job_id)) is not None
    }
    assert split == {
        "job_coded": ("encrypted_document", "the PDF is encrypted: upload a copy"),
        "job_plain": ("ingestion_failed", "Parser crashed: bad xref"),
        "job_ok": (None, None),
    }
    assert _differences(database) == []
    migrate_to(database, "0009")
    with database.engine.connect() as connection:
        joined = dict(connection.execute(text("SELECT job_id, error FROM jobs")).all())
    assert joined == {
        "job_coded": "encrypted_document: the PDF is encrypted: upload a copy",
        "job_plain": "ingestion_failed: Parser crashed: bad xref",
        "job_ok": None,
    }
