"""What API tests share: apps on the real stack, users in tenants, tokens, uploads, jobs, and the
checks of error bodies and event streams. Imported as `tests.api.harness` (a module named
`conftest` would clash with the other test folders' conftest files in one pytest run).

Apps are module-scoped (one warm-up and one set of bcrypt-12 users per test module) and run the
real components: Chroma in a temp dir, the shipped `use` embedder, the `extractive` LLM.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.config import Settings, load_settings
from app.container import Container

# A strong key the tests know, so they can forge tokens the way an attacker would (or could not).
TEST_JWT_SECRET = "k3Y-for-API-tests-only-Zq8vN2pL7wXc4RtY9uBm1sDf6GhJ0"
DEFAULT_PASSWORD = "correct horse battery staple"
JOB_TIMEOUT_S = 180.0
FINISHED = ("done", "failed")

_names = itertools.count(1)


def api_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for the real stack in `data_dir`; generous abuse limits unless overridden."""
    values: dict[str, Any] = {
        "_env_file": None,
        "data_dir": data_dir,
        "embedding_provider": "use",
        "llm_provider": "extractive",
        "env": "development",
        "jwt_secret": TEST_JWT_SECRET,
        "bcrypt_rounds": 12,
        "rate_limit_auth_per_minute": 10_000,
        "login_failures_per_minute": 10_000,
        "login_account_failures_per_minute": 10_000,
        "login_daily_failures_per_account": 10_000,
        "rate_limit_query_per_minute": 100_000,
        "rate_limit_conversations_per_minute": 100_000,
        "rate_limit_keys_per_minute": 100_000,
        "max_keys_per_user": 100_000,
        "worker_pool_size": 2,
    }
    values.update(overrides)
    return load_settings(**values)


@dataclass
class ApiUser:
    """A user of one tenant with a bearer token."""

    tenant: str
    username: str
    password: str
    token: str
    user_id: str

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header of this user."""
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class ApiHarness:
    """One running app, its TestClient and helpers that act like a client would."""

    app: FastAPI
    client: TestClient
    settings: Settings
    users: list[ApiUser] = field(default_factory=list)

    @property
    def container(self) -> Container:
        """The app's components (for setup only: assertions go through HTTP)."""
        container: Container = self.app.state.container
        return container

    def add_user(self, tenant: str, *, login: bool = True, role: str | None = None) -> ApiUser:
        """Create a user in `tenant` (without a role: admin if first, else member); its token
        comes from /auth/token (or the codec)."""
        username = f"user{next(_names)}-{tenant}"
        record = self.container.users.create_user(
            tenant_id=tenant, username=username, password=DEFAULT_PASSWORD, role=role
        )
        if login:
            token = self.login(username, DEFAULT_PASSWORD)
        else:
            token = self.container.token_codec.issue(record.id, tenant).access_token
        user = ApiUser(tenant, username, DEFAULT_PASSWORD, token, record.id)
        self.users.append(user)
        return user

    def login(self, username: str, password: str) -> str:
        """A token for valid credentials (asserts the login works)."""
        response = self.client.post(
            "/auth/token", data={"username": username, "password": password}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["token_type"] == "bearer"
        assert body["expires_in"] == self.settings.jwt_ttl_s
        token: str = body["access_token"]
        return token

    def upload(
        self, user: ApiUser, filename: str, content: bytes, collection: str | None = None
    ) -> Any:
        """POST /documents with one file (into `collection`, else general); returns the
        response."""
        return self.client.post(
            "/documents",
            files={"file": (filename, content)},
            data={} if collection is None else {"collection": collection},
            headers=user.headers,
        )

    def wait_for_job(self, user: ApiUser, job_id: str, timeout_s: float = JOB_TIMEOUT_S) -> Any:
        """Wait on /jobs/{id} (its long poll) until done or failed; returns the last job body."""
        deadline = time.monotonic() + timeout_s
        while True:
            wait = max(min(5.0, deadline - time.monotonic()), 0.0)
            response = self.client.get(f"/jobs/{job_id}?wait={wait:.2f}", headers=user.headers)
            assert response.status_code == 200, response.text
            job = response.json()
            if job["status"] in FINISHED:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job still {job['status']} after {timeout_s} s: {job}")

    def upload_and_wait(
        self, user: ApiUser, filename: str, content: bytes, collection: str | None = None
    ) -> Any:
        """Upload a file (into `collection`, else general) and wait for its job to end;
        returns the final job body."""
        response = self.upload(user, filename, content, collection)
        assert response.status_code == 202, response.text
        accepted = response.json()
        assert accepted["status"] == "queued"
        return self.wait_for_job(user, accepted["job_id"])

    def uploads_left(self) -> list[Path]:
        """Files still waiting in data_dir/uploads (none once every job has ended)."""
        folder = self.settings.data_dir / "uploads"
        return sorted(folder.iterdir()) if folder.exists() else []

    def search(self, user: ApiUser, query: str, **extra: Any) -> Any:
        """POST /search; asserts 200 and returns the body."""
        response = self.client.post("/search", json={"query": query, **extra}, headers=user.headers)
        assert response.status_code == 200, response.text
        return response.json()

    def query(self, user: ApiUser, question: str, **extra: Any) -> Any:
        """POST /query; asserts 200 and returns the body."""
        response = self.client.post(
            "/query", json={"question": question, **extra}, headers=user.headers
        )
        assert response.status_code == 200, response.text
        return response.json()


ApiFactory = Callable[..., ApiHarness]


def sse_events(response: Any) -> list[tuple[str, Any]]:
    """A 200 server-sent-events response's events, in order: (event name, parsed data)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def assert_error_body(response: Any, status: int, code: str | None = None) -> dict[str, str]:
    """The response has `status` and the shared error body; returns its `error` object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    # Server errors (5xx) also name the request id, to find the details in the logs.
    expected = {"code", "message", "request_id"} if status >= 500 else {"code", "message"}
    assert set(error) == expected, body
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, body
    result: dict[str, str] = error
    return result
