"""Drive the running compose stack the way a user would; called by scripts/docker/check.sh.

    python scripts/docker/flow.py --compose "docker compose -p ragcheck ..." --url URL [--proxy URL]

Creates a user inside the api container, gets a token, uploads a PDF whose job the worker
container runs, searches, asks, deletes; checks non-root users, health, the secrets of Redis and
Chroma, the published ports, and that `down` / `up` keeps users and documents. Prints one line per
step with its duration and exits non-zero at the first failure.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fpdf import FPDF

TENANT = "docker-check"
USERNAME = "checker"
PASSWORD = "docker-check-password-42"
FACT = "The Zephyr-9 pump must be serviced every 412 hours with blue grease."
QUESTION = "How often must the Zephyr-9 pump be serviced?"
SERVICES = ("api", "worker", "chroma", "redis", "postgres")


class CheckFailed(Exception):
    """A check that did not hold; its message says what was seen."""


def expect(condition: bool, message: str) -> None:
    """Fail the check with `message` unless `condition` holds."""
    if not condition:
        raise CheckFailed(message)


class Stack:
    """The compose project under test, reached through its command line and published ports."""

    def __init__(self, compose: str, url: str, proxy: str | None) -> None:
        self.compose = shlex.split(compose)
        self.url = url.rstrip("/")
        self.proxy = proxy.rstrip("/") if proxy else None
        self.http = httpx.Client(timeout=120)
        self.token = ""

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run `docker compose <args>`; its stdout."""
        done = subprocess.run(
            [*self.compose, *args], input=stdin, capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            raise CheckFailed(f"compose {' '.join(args)} failed: {done.stderr.strip()[-800:]}")
        return done.stdout

    def container_ids(self) -> dict[str, str]:
        """Service name -> container id of the running services."""
        ids = {}
        for service in (*SERVICES, "proxy"):
            cid = self.run("ps", "-q", service, check=False).strip()
            if cid:
                ids[service] = cid.splitlines()[0]
        return ids

    def headers(self) -> dict[str, str]:
        """The bearer token header of the check user."""
        return {"Authorization": f"Bearer {self.token}"}

    def login(self, base: str | None = None) -> str:
        """A token for the check user, from `base` (the api by default)."""
        reply = self.http.post(
            f"{base or self.url}/auth/token", data={"username": USERNAME, "password": PASSWORD}
        )
        expect(reply.status_code == 200, f"/auth/token answered {reply.status_code}: {reply.text}")
        token: str = reply.json()["access_token"]
        return token

    def upload(self, path: Path) -> dict[str, Any]:
        """Upload a file and wait for its job to finish; the final job record."""
        with path.open("rb") as handle:
            reply = self.http.post(
                f"{self.url}/documents",
                headers=self.headers(),
                files={"file": (path.name, handle, "application/pdf")},
            )
        expect(reply.status_code == 202, f"upload answered {reply.status_code}: {reply.text}")
        job_id = reply.json()["job_id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            job: dict[str, Any] = self.http.get(
                f"{self.url}/jobs/{job_id}", headers=self.headers()
            ).json()
            if job["status"] in ("done", "failed"):
                expect(job["status"] == "done", f"job failed: {job.get('error')}")
                return job
            time.sleep(1)
        raise CheckFailed(f"job {job_id} not finished after 600 s")

    def search_hits(self, query: str) -> list[dict[str, Any]]:
        """The /search results for `query`."""
        reply = self.http.post(f"{self.url}/search", headers=self.headers(), json={"query": query})
        expect(reply.status_code == 200, f"/search answered {reply.status_code}: {reply.text}")
        hits: list[dict[str, Any]] = reply.json()["results"]
        return hits


def make_pdf(path: Path, lines: list[str]) -> Path:
    """A one-page PDF holding `lines`."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in lines:
        pdf.multi_cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def wait_ready(stack: Stack, timeout_s: float = 600) -> None:
    """Block until /ready answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if stack.http.get(f"{stack.url}/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise CheckFailed(f"/ready not 200 after {timeout_s:.0f} s")


# --- the steps ---


def step_health(stack: Stack) -> str:
    """Every service's container runs and its health check passes."""
    states = {}
    for service, cid in stack.container_ids().items():
        out = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Health.Status}}", cid],
            capture_output=True,
            text=True,
            check=True,
        )
        states[service] = out.stdout.strip()
    missing = [s for s in SERVICES if s not in states]
    expect(not missing, f"services not running: {missing}")
    unhealthy = {s: v for s, v in states.items() if v != "healthy"}
    expect(not unhealthy, f"not healthy: {unhealthy}")
    return ", ".join(f"{s}={v}" for s, v in sorted(states.items()))


def step_non_root(stack: Stack) -> str:
    """The api and worker (and chroma) processes run as a non-root user."""
    users = {}
    for service in ("api", "worker", "chroma"):
        users[service] = stack.run("exec", "-T", service, "id", "-u").strip()
        expect(users[service] != "0", f"{service} runs as root")
    return ", ".join(f"{s} uid={u}" for s, u in users.items())


def step_private_ports(stack: Stack) -> str:
    """Only the api and the proxy publish ports; the backends refuse callers without the secret."""
    for service in ("postgres", "redis", "chroma", "worker"):
        cid = stack.container_ids()[service]
        ports = subprocess.run(
            ["docker", "inspect", "-f", "{{json .NetworkSettings.Ports}}", cid],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        published = [b for v in (json.loads(ports) or {}).values() if v for b in v]
        expect(not published, f"{service} publishes {published}")
    noauth = stack.run("exec", "-T", "redis", "redis-cli", "ping", check=False).strip()
    expect("NOAUTH" in noauth, f"redis answered without its password: {noauth!r}")
    probe = (
        "import httpx; print(httpx.get('http://chroma:8000/api/v2/tenants/default_tenant')"
        ".status_code)"
    )
    status = stack.run("exec", "-T", "api", "python", "-c", probe).strip()
    expect(status in ("401", "403"), f"chroma answered {status} without its token")
    return f"backends unpublished; redis without password: NOAUTH; chroma without token: {status}"


def step_user_and_token(stack: Stack) -> str:
    """Create the user with the CLI inside the api container, then log in over HTTP."""
    stack.run(
        "exec",
        "-T",
        "api",
        "python",
        "-m",
        "app.cli",
        "create-user",
        "--tenant",
        TENANT,
        "--username",
        USERNAME,
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    stack.token = stack.login()
    return "user created in the api container; token issued"


def step_upload(stack: Stack, pdf: Path) -> dict[str, Any]:
    """Upload the PDF; its job must be run by the worker container."""
    job = stack.upload(pdf)
    expect(job["chunks_indexed"] > 0, f"job indexed no chunks: {job}")
    worker_logs = stack.run("logs", "--no-color", "worker")
    api_logs = stack.run("logs", "--no-color", "api")
    expect(job["job_id"] in worker_logs, "the worker container's log does not name the job")
    expect("job done" not in api_logs, "the api container ran an ingestion job itself")
    return job


def step_search(stack: Stack, document_id: str) -> str:
    """The uploaded fact is the top search hit."""
    hits = stack.search_hits("Zephyr-9 pump blue grease")
    expect(bool(hits), "search found nothing")
    top = hits[0]
    expect(top["document_id"] == document_id, f"top hit is another document: {top}")
    expect("412 hours" in top["text"], f"top hit lacks the fact: {top['text'][:200]}")
    return f"top hit page {top['page']} of {top['source']}"


def step_query(stack: Stack) -> str:
    """The local LLM answers from the document, with a citation."""
    reply = stack.http.post(
        f"{stack.url}/query", headers=stack.headers(), json={"question": QUESTION}, timeout=700
    )
    expect(reply.status_code == 200, f"/query answered {reply.status_code}: {reply.text}")
    body = reply.json()
    expect(not body["refused"], f"the service refused: {body['answer']!r}")
    expect("412" in body["answer"], f"answer lacks the fact: {body['answer']!r}")
    expect(bool(body["citations"]), "answer has no citation")
    return f"answer {body['answer'][:80]!r}, {len(body['citations'])} citation(s)"


def step_delete(stack: Stack, document_id: str) -> str:
    """Deleting the document removes it from search."""
    reply = stack.http.delete(f"{stack.url}/documents/{document_id}", headers=stack.headers())
    expect(reply.status_code == 204, f"delete answered {reply.status_code}: {reply.text}")
    hits = stack.search_hits("Zephyr-9 pump blue grease")
    expect(all(h["document_id"] != document_id for h in hits), "deleted document still found")
    return "document deleted and gone from search"


def step_proxy(stack: Stack) -> str:
    """Through the proxy's /rag/ prefix: readiness and login."""
    assert stack.proxy is not None
    ready = stack.http.get(f"{stack.proxy}/rag/ready")
    expect(ready.status_code == 200, f"proxy /rag/ready answered {ready.status_code}")
    stack.login(f"{stack.proxy}/rag")
    return f"{stack.proxy}/rag/ready 200 and /rag/auth/token issued a token"


def step_restart_keeps_data(stack: Stack, pdf: Path, again: Path) -> str:
    """`down` then `up`: the user, the document and its chunks are still there, and the new
    worker indexes an upload (the Prometheus check then sees a job done since the restart: one
    done only before it may fall between two scrapes, and the restart resets the counters)."""
    kept = stack.upload(pdf)
    stack.run("down")
    stack.run("up", "-d", "--no-build", "--wait", "--wait-timeout", "600")
    wait_ready(stack)
    stack.token = stack.login()
    hits = stack.search_hits("Zephyr-9 pump blue grease")
    expect(
        any(h["document_id"] == kept["document_id"] for h in hits),
        "the document uploaded before `down` is gone after `up`",
    )
    stack.upload(again)
    return "user, document and chunks survived down/up (named volumes); the new worker indexes"


def main() -> int:
    """Run every step in order; print a line per step; non-zero at the first failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--compose", required=True, help="the docker compose command prefix")
    parser.add_argument("--url", required=True, help="the api's published base URL")
    parser.add_argument("--proxy", help="the proxy's published base URL (proxy profile)")
    parser.add_argument("--workdir", type=Path, required=True, help="scratch folder")
    args = parser.parse_args()
    stack = Stack(args.compose, args.url, args.proxy)
    pdf = make_pdf(args.workdir / "zephyr-manual.pdf", ["Maintenance manual", FACT])
    kept_pdf = make_pdf(args.workdir / "kept-manual.pdf", ["Kept manual", FACT])
    document: dict[str, Any] = {}

    def upload() -> str:
        document.update(step_upload(stack, pdf))
        job, chunks = document["job_id"][:8], document["chunks_indexed"]
        return f"job {job} done by the worker container: {chunks} chunks"

    def ready() -> str:
        wait_ready(stack)
        return "/ready 200"

    steps: list[tuple[str, Callable[[], str]]] = [
        ("ready", ready),
        ("health checks", lambda: step_health(stack)),
        ("non-root", lambda: step_non_root(stack)),
        ("secrets and ports", lambda: step_private_ports(stack)),
        ("user and token", lambda: step_user_and_token(stack)),
        ("upload + worker job", upload),
        ("search", lambda: step_search(stack, document["document_id"])),
        ("query (local LLM)", lambda: step_query(stack)),
        ("delete", lambda: step_delete(stack, document["document_id"])),
    ]
    if stack.proxy:
        steps.append(("proxy /rag/", lambda: step_proxy(stack)))
    steps.append(("down/up keeps data", lambda: step_restart_keeps_data(stack, kept_pdf, pdf)))
    for name, run in steps:
        started = time.monotonic()
        try:
            detail = run()
        except (CheckFailed, httpx.HTTPError) as exc:
            print(f"FAIL  {name:<22} {time.monotonic() - started:7.1f} s  {exc}", flush=True)
            return 1
        print(f"ok    {name:<22} {time.monotonic() - started:7.1f} s  {detail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
