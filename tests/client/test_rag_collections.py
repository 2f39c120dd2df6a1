"""`rag` with collections from outside: uploads and syncs land in the collection asked for with
their metadata, a collection the user may not write is a failure row, and `rag collections ls`
shows what the service lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.conftest import ClientServer, Rag, Ran, make_key

pytestmark = pytest.mark.integration


def call(cs: ClientServer, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {cs.key}"}
    return httpx.request(method, f"{cs.server.url}{path}", headers=headers, timeout=30, **kw)


def make_collection(cs: ClientServer, name: str) -> dict[str, Any]:
    made = call(cs, "POST", "/collections", json={"name": name})
    assert made.status_code == 201, made.text
    return made.json()


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ok(ran: Ran) -> Any:
    assert ran.code == 0, ran.stderr + ran.stdout
    return ran.json()


def test_upload_puts_files_in_the_collection_with_their_metadata(
    client_server: ClientServer, tmp_path: Path
) -> None:
    made = make_collection(client_server, "handbooks")
    manual = write(tmp_path, "valve.txt", "The valve is checked every March.")
    ran = client_server.rag(
        "upload",
        str(manual),
        "--collection",
        "handbooks",
        "--meta",
        "department=plant",
        "--meta",
        "year=2026",
        "--wait",
        "--json",
    )
    (file,) = ok(ran)["files"]
    assert file["status"] == "done"
    shown = call(client_server, "GET", f"/documents/{file['document_id']}").json()
    assert shown["collection_id"] == made["collection_id"]
    assert shown["collection"] == "handbooks"
    assert shown["metadata"] == {"department": "plant", "year": "2026"}


def test_a_collection_the_user_may_not_write_is_a_failure_row_not_a_crash(
    client_server: ClientServer, tmp_path: Path
) -> None:
    server = client_server.server
    server.create_user("acme", "rhea", "Read-only 42 lighthouse", role="reader")
    reader = Rag(
        client_server.rag.executable,
        client_server.rag.home,
        {"RAG_URL": server.url, "RAG_API_KEY": make_key(server, "rhea", "reading")},
    )
    manual = write(tmp_path / "notes", "notice.txt", "The canteen closes at three.")
    ran = reader("upload", str(manual), "--collection", "general", "--json")
    assert ran.code == 1, ran.stderr
    (file,) = ran.json()["files"]
    assert file["status"] == "failed" and file["error_code"]

    synced = reader("sync", str(manual.parent), "--collection", "general", "--json")
    assert synced.code == 1, synced.stderr
    (failure,) = synced.json()["failed"]
    assert failure["source"] == "notice.txt" and failure["error_code"]
    human = reader("upload", str(manual), "--collection", "general", env={"COLUMNS": "300"})
    assert human.code == 1 and "notice.txt" in human.stdout  # the failure table


def test_a_sync_into_a_collection_the_user_may_not_read_fails_each_file_with_the_reason(
    client_server: ClientServer, tmp_path: Path
) -> None:
    server = client_server.server
    made = call(
        client_server, "POST", "/collections", json={"name": "board", "visibility": "restricted"}
    )
    assert made.status_code == 201, made.text
    server.create_user("acme", "milo", "Member-only 42 lighthouse", role="member")
    member = Rag(
        client_server.rag.executable,
        client_server.rag.home,
        {"RAG_URL": server.url, "RAG_API_KEY": make_key(server, "milo", "syncing")},
    )
    folder = tmp_path / "minutes"
    write(folder, "january.txt", "The board met on the ninth.")
    write(folder, "sub/february.txt", "The board met on the twelfth.")

    for extra in ((), ("--dry-run",), ("--delete",)):
        ran = member("sync", str(folder), "--collection", "board", *extra, "--json")
        assert ran.code == 1, ran.stderr  # some files failed: not a usage error (2)
        summary = ran.json()
        rows = {row["source"]: row for row in summary["failed"]}
        assert sorted(rows) == ["january.txt", "sub/february.txt"]
        assert {row["error_code"] for row in rows.values()} == {"not_found"}
        assert all("board" in row["error"] for row in rows.values())
        assert summary["uploaded"] == summary["deleted"] == summary["unchanged"] == []

    human = member("sync", str(folder), "--collection", "board", env={"COLUMNS": "300"})
    assert human.code == 1
    table = [line for line in human.stdout.splitlines() if "board" in line]
    assert any("january.txt" in line for line in table)  # one failure row per file
    assert any("sub/february.txt" in line for line in table)
    listed = call(client_server, "GET", "/documents", params={"collection": "board"}).json()
    assert listed["data"] == []  # nothing reached the collection

    empty = tmp_path / "nothing"
    empty.mkdir()
    none_to_fail = member("sync", str(empty), "--collection", "board", "--json")
    assert none_to_fail.code == 1  # no file to blame: the run's one error
    assert none_to_fail.json()["error"]["code"] == "not_found"


def test_sync_into_a_collection_compares_and_deletes_only_within_it(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    north = make_collection(client_server, "north-site")
    make_collection(client_server, "south-site")
    north_dir, south_dir = tmp_path / "north", tmp_path / "south"
    write(north_dir, "boiler.txt", "The north boiler is serviced in May.")
    write(south_dir, "pump.txt", "The south pump is serviced in June.")
    label = ("--label", "site")  # one folder label in both: the collection keeps them apart

    first = ok(
        rag("sync", str(north_dir), "--collection", "north-site", *label, "--wait", "--json")
    )
    assert [e["source"] for e in first["uploaded"]] == ["boiler.txt"]
    south = rag("sync", str(south_dir), "--collection", "south-site", *label, "--delete", "--json")
    assert ok(south)["deleted"] == []  # the north collection's boiler.txt is not this sync's
    again = ok(rag("sync", str(north_dir), "--collection", "north-site", *label, "--json"))
    assert again["unchanged"] == ["boiler.txt"] and again["uploaded"] == []

    listing = call(
        client_server, "GET", "/documents", params={"sync_root": "site", "collection": "north-site"}
    )
    assert listing.status_code == 200, listing.text
    assert [d["source"] for d in listing.json()["data"]] == ["boiler.txt"]
    assert {d["collection_id"] for d in listing.json()["data"]} == {north["collection_id"]}
    missing = call(client_server, "GET", "/documents", params={"collection": "nowhere"})
    assert missing.status_code == 404


def test_collections_ls_shows_what_the_service_lists(client_server: ClientServer) -> None:
    make_collection(client_server, "archive")
    listed = call(client_server, "GET", "/collections").json()
    assert ok(client_server.rag("collections", "ls", "--json")) == listed
    human = client_server.rag("collections", "ls")
    assert human.code == 0, human.stderr
    names = [line.split()[0] for line in human.stdout.splitlines() if line.strip()]
    assert set(names) == {c["name"] for c in listed["data"]} and "archive" in names
