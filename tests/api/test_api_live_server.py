"""Against a live server on loopback: a crash mid-ingestion loses and duplicates nothing, and an
oversize upload is refused while its body is still arriving."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.ingestion import LoadLimits, chunk_pages, load
from testkit.live_server import LiveServer

pytestmark = pytest.mark.integration

CHUNK_SIZE, CHUNK_OVERLAP = 300, 30
MAX_UPLOAD = 1024 * 1024
PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("live")
    server = LiveServer(
        root / "data",
        {
            "RAG_CHUNK_SIZE": str(CHUNK_SIZE),
            "RAG_CHUNK_OVERLAP": str(CHUNK_OVERLAP),
            "RAG_EMBEDDING_BATCH_SIZE": "8",  # several batches, so a crash can land mid-job
            "RAG_WORKER_POOL_SIZE": "1",
            "RAG_MAX_UPLOAD_BYTES": str(MAX_UPLOAD),
            "RAG_TEST_EMBED_GATE": str(root / "embed.gate"),
        },
        module="tests.api.gated_serve",
    )
    server.create_user("live", "operator", PASSWORD)
    with server.running():
        yield server


@pytest.fixture(scope="module")
def headers(live: LiveServer) -> dict[str, str]:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": "operator", "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def _manual(version: str, paragraphs: int) -> str:
    return "\n\n".join(
        f"Section {i} of the {version} maintenance manual: inspect valve V-{i:04d} for wear, "
        f"torque its flange bolts to {20 + i % 30} newton metres and record seal batch "
        f"{version}-{i * 7919 % 100000:05d} in the log before the next shift begins."
        for i in range(paragraphs)
    )


def _expected_chunks(path: Path) -> int:
    pages = load(path, LoadLimits())
    chunks = chunk_pages(
        pages,
        tenant_id="live",
        document_id="doc",
        source=path.name,
        chunk_size=CHUNK_SIZE,
        chunk_overlap=CHUNK_OVERLAP,
    )
    assert len({c.id for c in chunks}) == len(chunks)
    return len(chunks)


def _wait(live: LiveServer, headers: dict[str, str], job_id: str, timeout_s: float = 300) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = httpx.get(f"{live.url}/jobs/{job_id}", headers=headers).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish:\n{live.log()}")


def test_an_oversize_upload_is_refused_while_the_body_is_still_arriving(
    live: LiveServer, headers: dict[str, str]
) -> None:
    intended = 40 * MAX_UPLOAD
    boundary = "livebound"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    request = (
        "POST /documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {headers['Authorization']}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    block = b"z" * 65536
    sent = 0
    reply = b""
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as conn:
        conn.sendall(request + b"%x\r\n%s\r\n" % (len(head), head))
        try:
            while sent < intended:
                conn.sendall(b"%x\r\n%s\r\n" % (len(block), block))
                sent += len(block)
                if select.select([conn], [], [], 0)[0]:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server hung up on the rest of the body: what we want
        conn.settimeout(30)
        while b"\r\n\r\n" not in reply:
            data = conn.recv(65536)
            if not data:
                break
            reply += data
    assert reply.startswith(b"HTTP/1.1 413"), reply[:300]
    assert b'"payload_too_large"' in reply or b"\r\n\r\n" in reply
    assert sent < intended / 2, f"the server read {sent} bytes before refusing"
    assert not list((live.data_dir / "uploads").glob("*")), "a partial upload was left behind"


def test_a_crash_mid_ingestion_is_resumed_without_loss_or_duplicates(
    live: LiveServer, headers: dict[str, str], tmp_path: Path
) -> None:
    # v1 is indexed first, so the re-run after the crash must also remove v1's chunks.
    v1 = tmp_path / "manual.txt"
    v1.write_text(_manual("v1", 12))
    job = httpx.post(
        f"{live.url}/documents", files={"file": ("manual.txt", v1.read_bytes())}, headers=headers
    ).json()
    assert _wait(live, headers, job["job_id"])["status"] == "done"

    gate = Path(live.env()["RAG_TEST_EMBED_GATE"])
    gate.touch()  # before the upload: the job cannot run past the gate
    v2 = tmp_path / "v2" / "manual.txt"
    v2.parent.mkdir()
    v2.write_text(_manual("v2", 240))
    expected = _expected_chunks(v2)
    accepted = httpx.post(
        f"{live.url}/documents", files={"file": ("manual.txt", v2.read_bytes())}, headers=headers
    )
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]

    # Crash while the job is embedding: some batches done, not all. The gated server holds the
    # job right after a batch is reported, so the crash lands there every time.
    reached = gate.with_suffix(".reached")
    deadline = time.monotonic() + 300
    while not reached.exists():
        assert time.monotonic() < deadline, live.log()
        time.sleep(0.05)
    progress = httpx.get(f"{live.url}/jobs/{job_id}", headers=headers).json()
    p = progress["progress"]
    assert progress["status"] == "processing" and p["stage"] == "embedding", progress
    assert 0 < p["done"] < p["total"] == expected
    live.crash()
    gate.unlink()  # the restarted server runs the job to the end
    assert len(list((live.data_dir / "uploads").glob("*"))) == 1, "the upload must survive a crash"

    live.start()
    final = _wait(live, headers, job_id)  # the token from before the crash still works
    assert final["status"] == "done", final
    assert final["chunks_indexed"] == expected
    stats = httpx.get(f"{live.url}/stats", headers=headers).json()
    assert stats["documents"] == 1
    assert stats["chunks"] == expected, "chunks lost or duplicated by the crash and re-run"
    listing = httpx.get(f"{live.url}/documents", headers=headers).json()
    assert [(d["source"], d["chunks"], d["status"]) for d in listing["data"]] == [
        ("manual.txt", expected, "done")
    ]
    found = httpx.post(
        f"{live.url}/search", json={"query": "seal batch v1 V-0003", "k": 50}, headers=headers
    ).json()["results"]
    assert found and all("v1 maintenance" not in r["text"] for r in found)
    assert any("v2 maintenance" in r["text"] for r in found)
    assert not list((live.data_dir / "uploads").glob("*"))
