"""`rag sync` and `rag upload` from outside: the real executable against a live server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from testkit.waiting import wait_until
from tests.client.conftest import ClientServer, Ran

pytestmark = pytest.mark.integration


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def listed(cs: ClientServer, label: str) -> dict[str, dict]:
    """The service's documents of a sync label, by name (read with httpx, not with rag)."""
    answer = httpx.get(
        f"{cs.server.url}/documents",
        params={"sync_root": label, "limit": 100},
        headers={"Authorization": f"Bearer {cs.key}"},
    )
    assert answer.status_code == 200, answer.text
    return {doc["source"]: doc for doc in answer.json()["data"]}


def ok(ran: Ran) -> dict:
    assert ran.code == 0, ran.stderr + ran.stdout
    return ran.json()


def forty_files(root: Path, prefix: str, text: Callable[[int], str]) -> list[str]:
    """Files prefix-00.txt to prefix-39.txt in `root`, the i-th holding text(i); their names."""
    names = [f"{prefix}-{i:02d}.txt" for i in range(40)]
    for i, name in enumerate(names):
        write(root, name, text(i))
    return names


def rerun_to_the_end(cs: ClientServer, root: Path, names: list[str]) -> dict:
    """Sync an interrupted folder again, waiting: every file sent or found unchanged, none
    failed, each indexed once; the sync's report."""
    rerun = ok(cs.rag("sync", str(root), "--wait", "--json"))
    assert rerun["failed"] == []
    assert len(rerun["uploaded"]) + len(rerun["unchanged"]) == len(names)
    assert sorted(listed(cs, root.name)) == names  # each file once
    return rerun


def test_sync_uploads_new_replaces_changed_and_deletes_gone_files(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    root = tmp_path / "manuals"
    write(root, "pump.txt", "The relief valve of the pump opens at 7 bar.")
    write(root, "guides/boiler.md", "# Boiler\n\nThe boiler is flushed every spring.")
    write(root, ".hidden.txt", "never synced")

    first = ok(rag("sync", str(root), "--wait", "--json"))
    assert sorted(e["source"] for e in first["uploaded"]) == ["guides/boiler.md", "pump.txt"]
    assert first["failed"] == [] and first["deleted"] == [] and first["replaced"] == []
    docs = listed(client_server, "manuals")
    assert set(docs) == {"guides/boiler.md", "pump.txt"}
    assert {d["status"] for d in docs.values()} == {"done"}
    pump_id = docs["pump.txt"]["document_id"]

    again = ok(rag("sync", str(root), "--json"))
    assert sorted(again["unchanged"]) == ["guides/boiler.md", "pump.txt"]
    assert again["uploaded"] == [] and again["replaced"] == []

    write(root, "pump.txt", "The relief valve of the pump now opens at 9 bar.")
    write(root, "notes.txt", "Spare gaskets are in the blue cabinet.")
    (root / "guides" / "boiler.md").unlink()

    dry = ok(rag("sync", str(root), "--delete", "--dry-run", "--json"))
    assert dry["dry_run"] is True
    assert [e["source"] for e in dry["uploaded"]] == ["notes.txt"]
    assert [e["source"] for e in dry["replaced"]] == ["pump.txt"]
    assert [e["source"] for e in dry["deleted"]] == ["guides/boiler.md"]
    assert set(listed(client_server, "manuals")) == {"guides/boiler.md", "pump.txt"}  # untouched

    done = ok(rag("sync", str(root), "--delete", "--wait", "--json"))
    assert [e["source"] for e in done["replaced"]] == ["pump.txt"]
    assert done["replaced"][0]["document_id"] == pump_id  # replaced in place
    assert [e["source"] for e in done["uploaded"]] == ["notes.txt"]
    assert [e["source"] for e in done["deleted"]] == ["guides/boiler.md"]
    assert set(listed(client_server, "manuals")) == {"notes.txt", "pump.txt"}

    found = ok(rag("search", "relief valve opens bar", "--json"))
    texts = [hit["text"] for hit in found["results"] if hit["source"] == "pump.txt"]
    assert texts and all("9 bar" in text for text in texts)  # the old version's chunks are gone


def test_a_sync_and_the_listings_ask_nothing_the_service_refuses(
    client_server: ClientServer, tmp_path: Path
) -> None:
    """`rag` pages its listings within the service's cap: the server logs no refused request
    (it logged a 422 for every listing when the client asked for 1,000 at a time)."""
    rag = client_server.rag
    root = tmp_path / "paged"
    write(root, "a.txt", "The anchor chain is inspected monthly.")
    write(root, "b.txt", "The bilge pump is tested before each voyage.")
    log = client_server.server.log_path
    start = log.stat().st_size
    ok(rag("sync", str(root), "--wait", "--json"))
    listed_names = {doc["source"] for doc in ok(rag("docs", "ls", "--json"))["data"]}
    assert {"a.txt", "b.txt"} <= listed_names
    ok(rag("jobs", "--json"))
    with log.open("rb") as server_log:
        server_log.seek(start)
        refused = [
            line for line in server_log.read().decode().splitlines() if '"status": 4' in line
        ]
    assert refused == []


def test_two_sync_roots_in_one_collection_never_delete_each_other(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    east, west = tmp_path / "east", tmp_path / "west"
    write(east, "east-a.txt", "East wing heating schedule.")
    write(east, "east-b.txt", "East wing lighting schedule.")
    write(west, "west-a.txt", "West wing heating schedule.")
    ok(rag("sync", str(east), "--label", "wing-east", "--delete", "--json"))
    ok(rag("sync", str(west), "--label", "wing-west", "--delete", "--json"))

    (east / "east-b.txt").unlink()
    result = ok(rag("sync", str(east), "--label", "wing-east", "--delete", "--json"))
    assert [e["source"] for e in result["deleted"]] == ["east-b.txt"]
    filtered = ("--include", "nothing-matches-*", "--delete", "--dry-run", "--json")
    left_out = ok(rag("sync", str(west), "--label", "wing-west", *filtered))
    assert left_out["deleted"] == []  # what the filters leave out is not deleted either
    assert set(listed(client_server, "wing-east")) == {"east-a.txt"}
    assert set(listed(client_server, "wing-west")) == {"west-a.txt"}


def test_sync_killed_halfway_then_run_again_duplicates_and_loses_nothing(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    root = tmp_path / "many"
    names = forty_files(
        root, "part", lambda i: f"Part {i} of the inventory: {i * 7} bolts in drawer {i}."
    )

    running = rag.popen("sync", str(root), "--concurrency", "1", "--json")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(listed(client_server, "many")) < 5:
        time.sleep(0.05)
    os.kill(running.pid, signal.SIGKILL)
    running.wait(timeout=30)
    partial = listed(client_server, "many")
    assert 5 <= len(partial) < len(names), "the sync should have been killed halfway"

    rerun = rerun_to_the_end(client_server, root, names)
    assert len(rerun["uploaded"]) <= len(names) - len(partial) + 1  # at most the one in flight
    assert {d["status"] for d in listed(client_server, "many").values()} == {"done"}
    assert ok(rag("sync", str(root), "--json"))["unchanged"] == names


def test_upload_reports_each_file_and_exit_code_one_when_some_fail(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    good = write(tmp_path, "castle.txt", "The Harrowgate castle was built in 1342.")
    empty = write(tmp_path, "empty.txt", "")
    odd = write(tmp_path, "tool.exe", "MZ")
    ran = rag("upload", str(good), str(empty), str(odd), "--wait", "--json")
    assert ran.code == 1, ran.stderr
    files = {Path(f["path"]).name: f for f in ran.json()["files"]}
    assert files["castle.txt"]["status"] == "done"
    assert files["empty.txt"]["status"] == "failed" and files["empty.txt"]["error_code"]
    assert files["tool.exe"]["error_code"] == "unsupported_file_type"
    assert ran.json()["failed"] == 2

    human = rag("upload", str(odd), env={"COLUMNS": "300"})  # one table row per line
    assert human.code == 1
    assert "tool.exe" in human.stdout and "not supported" in human.stdout  # the failure table


def test_ask_prints_the_answer_then_its_citations(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    root = tmp_path / "castles"
    write(root, "harrowgate.txt", "The Harrowgate castle was built in 1342 by the river guild.")
    ok(rag("sync", str(root), "--wait", "--json"))

    answered = rag("ask", "When was the Harrowgate castle built?")
    assert answered.code == 0, answered.stderr
    assert "1342" in answered.stdout
    assert "[1] harrowgate.txt p. 1" in answered.stdout

    streamed = rag("ask", "When was the Harrowgate castle built?", "--stream", "--json")
    body = ok(streamed)
    assert "1342" in body["answer"]
    assert body["citations"][0]["source"] == "harrowgate.txt"


def test_exit_code_two_and_one_json_error_for_bad_usage_and_keys(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    wrong_key = rag("docs", "ls", "--json", env={"RAG_API_KEY": "rag_not-a-real-key"})
    assert wrong_key.code == 2
    assert wrong_key.json()["error"]["code"]  # one JSON document, the error
    no_key = rag("docs", "ls", "--json", env={"RAG_API_KEY": ""})
    assert no_key.code == 2 and "rag login" in no_key.json()["error"]["message"]
    assert rag("sync", str(tmp_path / "missing")).code == 2
    assert rag("upload").code == 2
    assert rag("sync", str(tmp_path), "--watch", "--dry-run").code == 2


def test_watch_syncs_again_when_files_change(client_server: ClientServer, tmp_path: Path) -> None:
    rag = client_server.rag
    root = tmp_path / "watched"
    write(root, "first.txt", "The first buoy is green.")
    running = rag.popen("sync", str(root), "--watch", "--delete", "--json")
    try:
        assert wait_until(lambda: set(listed(client_server, "watched")) == {"first.txt"}, 60, 0.2)
        write(root, "second.txt", "The second buoy is red.")
        (root / "first.txt").unlink()
        assert wait_until(lambda: set(listed(client_server, "watched")) == {"second.txt"}, 60, 0.2)
    finally:
        running.send_signal(signal.SIGINT)
        running.wait(timeout=30)
    assert running.returncode == 0
    assert running.stdout is not None
    summaries = [json.loads(line) for line in running.stdout.read().decode().splitlines()]
    assert len(summaries) >= 2  # one JSON document per line, one per sync


def test_docs_and_jobs_commands(client_server: ClientServer, tmp_path: Path) -> None:
    rag = client_server.rag
    note = write(tmp_path, "gauge.txt", "The pressure gauge reads 4 bar at rest.")
    uploaded = ok(rag("upload", str(note), "--json"))
    (file,) = uploaded["files"]
    jobs = ok(rag("jobs", "--wait", "--json"))
    assert file["job_id"] in {job["job_id"] for job in jobs["data"]}
    assert all(job["status"] in ("done", "failed") for job in jobs["data"])

    shown = ok(rag("docs", "show", file["document_id"], "--json"))
    assert (shown["source"], shown["status"]) == ("gauge.txt", "done")
    assert shown["content_sha256"] == hashlib.sha256(note.read_bytes()).hexdigest()
    listed_names = [d["source"] for d in ok(rag("docs", "ls", "--json"))["data"]]
    assert "gauge.txt" in listed_names

    removed = rag("docs", "rm", file["document_id"], "doc_000000000000000000000000", "--json")
    assert removed.code == 1  # one of the two did not exist
    assert removed.json()["deleted"] == [file["document_id"]]
    assert removed.json()["failed"][0]["error_code"] == "not_found"
    assert rag("docs", "show", file["document_id"]).code == 1


def test_ctrl_c_stops_a_sync_and_a_rerun_finishes_it(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    root = tmp_path / "stopped"
    names = forty_files(
        root, "log", lambda i: f"Logbook entry {i}: wind {i % 8} Beaufort, {i * 3} nautical miles."
    )
    running = rag.popen("sync", str(root), "--concurrency", "1")
    assert wait_until(lambda: len(listed(client_server, "stopped")) >= 3, 60, 0.2)
    pressed = time.monotonic()
    running.send_signal(signal.SIGINT)
    running.wait(timeout=30)
    assert running.returncode == 130
    assert time.monotonic() - pressed < 5  # uploads in flight get a short grace, no more
    stopped_at = len(listed(client_server, "stopped"))
    time.sleep(1)
    # Nothing new is sent after Ctrl-C; an upload abandoned mid-request may still land.
    settled = len(listed(client_server, "stopped"))
    assert stopped_at <= settled <= stopped_at + 1 < len(names)

    rerun = rerun_to_the_end(client_server, root, names)
    assert len(rerun["unchanged"]) >= settled


def test_a_dry_run_says_what_the_sync_does_to_a_same_named_plain_upload(
    client_server: ClientServer, tmp_path: Path
) -> None:
    rag = client_server.rag
    elsewhere, folder = tmp_path / "elsewhere", tmp_path / "yard"
    first = ok(
        rag(
            "upload",
            str(write(elsewhere, "yard-gate.txt", "The yard gate opens at six.")),
            str(write(elsewhere, "yard-fence.txt", "The yard fence is painted green.")),
            "--json",
        )
    )
    gate_id = next(f["document_id"] for f in first["files"] if f["source"] == "yard-gate.txt")
    write(folder, "yard-gate.txt", "The yard gate opens at seven now.")
    write(folder, "yard-shed.txt", "The yard shed holds the mowers.")

    dry = ok(rag("sync", str(folder), "--label", "yard", "--delete", "--dry-run", "--json"))
    assert [e["source"] for e in dry["uploaded"]] == ["yard-shed.txt"]
    assert dry["replaced"] == [{"source": "yard-gate.txt", "document_id": gate_id}]
    assert dry["deleted"] == []  # the plain upload of yard-fence.txt is not this folder's

    done = ok(rag("sync", str(folder), "--label", "yard", "--delete", "--json"))
    assert [(e["source"], e["document_id"]) for e in done["replaced"]] == [
        ("yard-gate.txt", gate_id)
    ]
    assert [e["source"] for e in done["uploaded"]] == ["yard-shed.txt"]
    assert done["deleted"] == []
    assert set(listed(client_server, "yard")) == {"yard-gate.txt", "yard-shed.txt"}
