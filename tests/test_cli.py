"""The command line, run as a user runs it: a real process on a temp data directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from tests.fresh_database import fresh_postgres_database
from tests.storage.legacy_schema import create_legacy_database
from tests.storage.schema_revisions import head_revision

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


def cli(
    data_dir: Path, *args: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "RAG_DATA_DIR": str(data_dir),
        "RAG_EMBEDDING_PROVIDER": "use",
        "RAG_ENV": "development",
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=300,
    )


def create_user(
    data_dir: Path,
    name: str,
    *role: str,
    tenant: str = "acme",
    password: str = "a-very-long-password",
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """`create-user`, the password on stdin as an operator gives it."""
    args = ("create-user", "--tenant", tenant, "--username", name, "--password-stdin", *role)
    return cli(data_dir, *args, stdin=f"{password}\n", **env)


def test_ingest_then_search_prints_pages_and_json(tmp_path: Path) -> None:
    doc = tmp_path / "valves.md"
    doc.write_text(
        "# Valves\n\nThe SR-33 relief valve opens at 4.2 bar.\n\n"
        "# Pumps\n\nThe P-7 pump delivers 30 litres per minute.\n",
        encoding="utf-8",
    )
    bad = tmp_path / "empty.txt"
    bad.write_bytes(b"")
    ingested = cli(tmp_path / "data", "ingest", "--tenant", "acme", str(doc), str(bad))
    assert ingested.returncode == 1  # one file failed, and the exit status says so
    assert "valves.md: 1 pages" in ingested.stdout
    assert "empty.txt: FAILED" in ingested.stderr

    found = cli(
        tmp_path / "data", "search", "--tenant", "acme", "SR-33 opening pressure?", "--json"
    )
    assert found.returncode == 0, found.stderr
    rows = json.loads(found.stdout)
    assert rows[0]["source"] == "valves.md"
    assert rows[0]["page"] == 1 and rows[0]["page_label"] == "1"
    assert "4.2 bar" in rows[0]["text"]

    other = cli(
        tmp_path / "data", "search", "--tenant", "globex", "SR-33 opening pressure?", "--json"
    )
    assert json.loads(other.stdout) == []  # another tenant sees nothing

    text = cli(tmp_path / "data", "search", "--tenant", "acme", "P-7 pump flow", "-k", "1")
    assert "valves.md" in text.stdout and "p.1" in text.stdout


def test_search_by_document_lists_each_document_once(tmp_path: Path) -> None:
    long = tmp_path / "pump-manual.txt"
    long.write_text(
        "\n\n".join(
            f"Step {i}: check the P-7 pump impeller and its seal before the next start. " * 4
            for i in range(1, 9)
        ),
        encoding="utf-8",
    )
    short = tmp_path / "notes.txt"
    short.write_text("The garden pump impeller was replaced in May.", encoding="utf-8")
    ingested = cli(tmp_path / "data", "ingest", "--tenant", "acme", str(long), str(short))
    assert ingested.returncode == 0, ingested.stderr

    args = ("search", "--tenant", "acme", "pump impeller seal", "-k", "5", "--json")
    by_chunk = json.loads(cli(tmp_path / "data", *args).stdout)
    assert [r["source"] for r in by_chunk].count("pump-manual.txt") >= 2
    found = cli(tmp_path / "data", *args, "--group", "document")
    assert found.returncode == 0, found.stderr
    rows = {r["source"]: r for r in json.loads(found.stdout)}
    assert sorted(rows) == ["notes.txt", "pump-manual.txt"]
    assert rows["pump-manual.txt"]["other_chunks"] >= 1 and rows["notes.txt"]["other_chunks"] == 0
    refused = cli(tmp_path / "data", *args, "--group", "page")
    assert refused.returncode == 2 and "invalid choice" in refused.stderr


def test_user_commands(tmp_path: Path) -> None:
    created = create_user(tmp_path / "data", "alice")
    assert created.returncode == 0, created.stderr
    short = create_user(tmp_path / "data", "bob", password="short")
    assert short.returncode == 1 and "at least 12" in short.stderr
    listed = cli(tmp_path / "data", "list-users", "--tenant", "acme")
    assert "alice" in listed.stdout and "bob" not in listed.stdout
    assert cli(tmp_path / "data", "delete-user", "--username", "alice").returncode == 0
    assert "alice" not in cli(tmp_path / "data", "list-users").stdout
    assert cli(tmp_path / "data", "delete-user", "--username", "alice").returncode == 1


def test_roles_disabling_and_keys_from_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    secret = {"RAG_JWT_SECRET": "cli-test-secret-Zq8vN2pL7wXc4RtY9uBm1sDf6GhJ0"}

    assert "(admin)" in create_user(data, "alice").stdout  # the tenant's first user
    assert "(member)" in create_user(data, "carol").stdout  # later ones: member by default
    assert "(reader)" in create_user(data, "bob", "--role", "reader").stdout
    unknown = create_user(data, "dave", "--role", "owner")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
    listed = cli(data, "list-users", "--tenant", "acme").stdout
    assert "alice\tadmin\tenabled" in listed and "bob\treader\tenabled" in listed

    last = cli(data, "set-role", "--username", "alice", "--role", "member")
    assert last.returncode == 1 and "at least one enabled admin" in last.stderr
    assert cli(data, "disable-user", "--username", "alice").returncode == 1
    assert cli(data, "set-role", "--username", "carol", "--role", "admin").returncode == 0
    disabled = cli(data, "disable-user", "--username", "alice")
    assert disabled.returncode == 0 and "alice is disabled" in disabled.stdout
    assert "alice\tadmin\tdisabled" in cli(data, "list-users").stdout
    assert "enabled" in cli(data, "disable-user", "--username", "alice", "--enable").stdout

    key = cli(data, "create-key", "--username", "bob", "--name", "nightly sync", **secret)
    assert key.returncode == 0, key.stderr
    assert key.stdout.startswith("rag_") and len(key.stdout.strip()) == 47
    assert key.stdout.strip() not in key.stderr
    above = cli(data, "create-key", "--username", "bob", "--name", "x", "--role", "admin", **secret)
    assert above.returncode == 1 and "cannot be above its owner's" in above.stderr
    throwaway = cli(data, "create-key", "--username", "bob", "--name", "x")
    assert throwaway.returncode == 1 and "RAG_JWT_SECRET" in throwaway.stderr


def test_a_name_in_two_tenants_is_named_with_its_tenant(tmp_path: Path) -> None:
    data = tmp_path / "data"

    assert create_user(data, "sam").returncode == 0
    assert create_user(data, "sam-admin").returncode == 0
    assert create_user(data, "gus", tenant="globex").returncode == 0  # its admin
    second = create_user(data, "sam", tenant="globex")
    assert second.returncode == 0, second.stderr  # names are unique per tenant only
    # Weak passwords are refused with their own codes.
    common = create_user(data, "rita", password="Password123456")
    assert common.returncode == 1 and "password_too_common" in common.stderr
    own = create_user(data, "rita", password="rita-long-enough-1")
    assert own.returncode == 1 and "password_contains_username" in own.stderr

    ambiguous = cli(data, "set-role", "--username", "sam", "--role", "reader")
    assert ambiguous.returncode == 1
    assert "tenant_required" in ambiguous.stderr and "--tenant" in ambiguous.stderr
    named = cli(data, "set-role", "--username", "sam", "--tenant", "globex", "--role", "reader")
    assert named.returncode == 0, named.stderr
    assert "globex\tsam\treader" in cli(data, "list-users").stdout
    assert cli(data, "delete-user", "--username", "sam").returncode == 1  # which one?
    assert cli(data, "delete-user", "--username", "sam", "--tenant", "acme").returncode == 0
    listed = cli(data, "list-users").stdout
    assert "acme\tsam\t" not in listed and "globex\tsam\t" in listed
    # Now only one tenant has the name: no tenant needed.
    assert cli(data, "disable-user", "--username", "sam").returncode == 0


def test_invalid_setting_is_reported_by_name(tmp_path: Path) -> None:
    result = cli(tmp_path / "data", "list-users", RAG_CHUNK_OVERLAP="5000")
    assert result.returncode == 1
    assert "RAG_CHUNK_OVERLAP" in result.stderr


def test_migrate_reports_what_it_did_and_keeps_rows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = cli(data, "migrate")
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"database schema migrated from nothing to {head_revision()}\n"
    again = cli(data, "migrate")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"database schema already at {head_revision()}\n"


def test_migrate_upgrades_a_postgresql_database_from_before_migrations(
    tmp_path: Path, postgres_url: str
) -> None:
    with fresh_postgres_database(postgres_url) as url:
        engine = create_engine(url)
        create_legacy_database(engine, with_page_role=False)
        migrated = cli(tmp_path / "data", "migrate", RAG_DATABASE_URL=url)
        assert migrated.returncode == 0, migrated.stderr
        assert migrated.stdout == f"database schema migrated from nothing to {head_revision()}\n"
        listed = cli(tmp_path / "data", "list-users", RAG_DATABASE_URL=url)
        assert listed.stdout.startswith("acme\talice\t")  # the old row, read by the new code
        with engine.connect() as connection:
            connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
            connection.commit()
        engine.dispose()
        refused = cli(tmp_path / "data", "migrate", RAG_DATABASE_URL=url)
        assert refused.returncode == 1
        assert "revision '9999'" in refused.stderr and "newer release" in refused.stderr


def test_migrate_names_an_unreachable_database(tmp_path: Path) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:9/none"  # port 9 (discard): nothing listens
    result = cli(tmp_path / "data", "migrate", RAG_DATABASE_URL=url)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach the database:")


def test_reindex_re_embeds_a_tenant_indexed_with_another_model(tmp_path: Path) -> None:
    from app.config import load_settings
    from app.domain import Chunk, chunk_id, document_id
    from testkit.indexing import build_corpus
    from tests.fakes import FakeEmbedder

    data_dir = tmp_path / "data"
    fake = FakeEmbedder()
    corpus = build_corpus(load_settings(_env_file=None, data_dir=data_dir), fake)
    text = "The SR-33 relief valve opens at 4.2 bar."
    doc = document_id("acme", "valves.txt")
    chunk = Chunk(chunk_id("acme", doc, 1, text), "acme", doc, "valves.txt", 1, "1", 0, 0, 41, text)
    corpus.replace_documents(
        tenant_id="acme", documents=[(doc, [chunk], fake.embed_documents([text]))]
    )
    corpus.index.client.close()  # type: ignore[attr-defined]  # the CLI process opens it next

    refused = cli(data_dir, "search", "--tenant", "acme", "relief valve")
    assert refused.returncode == 1 and "reindex --tenant acme" in refused.stderr

    done = cli(data_dir, "reindex", "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    assert "re-indexed 1 chunks of tenant acme" in done.stdout
    found = cli(data_dir, "search", "--tenant", "acme", "relief valve", "--json")
    assert found.returncode == 0, found.stderr
    assert [row["text"] for row in json.loads(found.stdout)] == [text]
    again = cli(data_dir, "reindex", "--tenant", "acme")
    assert "re-indexed 0 chunks" in again.stdout


def test_a_misspelt_setting_is_named_before_the_command_acts(tmp_path: Path) -> None:
    # RAG_DATADIR is not RAG_DATA_DIR: the user lands in the data directory the other names.
    made = create_user(tmp_path / "data", "ops", RAG_DATADIR=str(tmp_path / "elsewhere"))
    assert made.returncode == 0, made.stderr
    assert "warning: unknown setting ignored: RAG_DATADIR (did you mean RAG_DATA_DIR?)" in (
        made.stderr
    )
    assert "unknown setting" not in cli(tmp_path / "data", "list-users").stderr
