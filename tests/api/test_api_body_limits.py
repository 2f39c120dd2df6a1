"""Request bodies are capped before authentication: a 300 MB anonymous body costs the server
nothing, JSON and form routes take tens of KB, only POST /documents takes an upload's size, and
/auth/token takes a urlencoded form only."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from raw_http import rss_kib, stream_body

from testkit.live_server import LiveServer
from tests.api.harness import ApiHarness, assert_error_body

pytestmark = pytest.mark.integration

HUGE = 300 * 1024 * 1024
MAX_GROWTH_KIB = 100 * 1024
SMALL_CAP = 16 * 1024


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("body-limits") / "data")
    with server.running():
        yield server


class _PeakRss:
    """Samples the server's resident memory every few milliseconds while a request runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss_kib(pid)[0]
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_kib(self.pid)[0])
            self._stop.wait(0.005)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.after = rss_kib(self.pid)[0]


@pytest.mark.parametrize(
    ("path", "content_type", "chunked"),
    [
        ("/search", "application/json", True),
        ("/auth/token", "application/x-www-form-urlencoded", True),
        ("/search", "application/json", False),
        ("/auth/token", "application/x-www-form-urlencoded", False),
        ("/query", "application/json", True),
    ],
)
def test_an_anonymous_300_mb_body_is_refused_and_the_server_does_not_grow(
    live: LiveServer, path: str, content_type: str, chunked: bool
) -> None:
    assert live.process is not None
    with _PeakRss(live.process.pid) as rss:
        reply = stream_body(
            "127.0.0.1",
            live.port,
            path,
            content_type=content_type,
            total_bytes=HUGE,
            chunked=chunked,
        )
    growth = rss.peak - rss.before
    print(
        f"\n{path} ({'chunked' if chunked else 'Content-Length'}): status {reply.status}, "
        f"client sent {reply.bytes_sent / 2**20:.1f} MiB of {HUGE / 2**20:.0f} MiB; server RSS "
        f"before {rss.before / 1024:.1f} MiB, peak {rss.peak / 1024:.1f} MiB "
        f"(+{growth / 1024:.1f} MiB), after {rss.after / 1024:.1f} MiB"
    )
    assert reply.status in (413, 401), reply.head
    if reply.status == 413:
        assert b'"payload_too_large"' in reply.body, reply.body
    assert growth < MAX_GROWTH_KIB, f"server RSS grew by {growth} KiB"
    assert reply.bytes_sent < HUGE // 10, "the server kept reading a refused body"
    assert httpx.get(f"{live.url}/health").status_code == 200


@pytest.fixture(scope="module")
def capped(api_factory) -> ApiHarness:  # type: ignore[no-untyped-def]
    return api_factory(max_body_bytes=SMALL_CAP, max_upload_bytes=256 * 1024)


def test_a_json_body_over_the_cap_is_413_before_authentication(capped: ApiHarness) -> None:
    body = b'{"query": "' + b"x" * SMALL_CAP + b'"}'
    for path in ("/search", "/query", "/query/stream"):
        response = capped.client.post(
            path, content=body, headers={"Content-Type": "application/json"}
        )
        error = assert_error_body(response, 413, "payload_too_large")
        assert str(SMALL_CAP) in error["message"]


def test_a_body_under_the_cap_still_reaches_the_route(capped: ApiHarness) -> None:
    user = capped.add_user("caps")
    capped.upload_and_wait(user, "a.txt", b"The boiler room key hangs by the door.")
    hits = capped.search(user, "where is the boiler room key? " + "please " * 200)
    assert hits["results"], hits


def test_only_uploads_get_the_upload_cap(capped: ApiHarness) -> None:
    user = capped.add_user("caps-upload")
    text = ("Spare fuses are in the grey cabinet. " * 4000).encode()[: 200 * 1024]
    assert len(text) > SMALL_CAP
    job = capped.upload_and_wait(user, "fuses.txt", text)
    assert job["status"] == "done", job
    too_big = capped.upload(user, "big.txt", b"y" * (300 * 1024))
    error = assert_error_body(too_big, 413, "payload_too_large")
    assert str(256 * 1024) in error["message"]
    # Any other route refuses the same body size.
    other = capped.client.post(
        "/documents/some-id", files={"file": ("fuses.txt", text)}, headers=user.headers
    )
    assert_error_body(other, 413, "payload_too_large")


@pytest.mark.parametrize(
    "send",
    [
        {"json": {"username": "alice", "password": "correct horse"}},
        {"files": {"username": (None, "alice"), "password": (None, "correct horse")}},
        {"content": b"username=alice&password=x", "headers": {"Content-Type": "text/plain"}},
    ],
    ids=["json", "multipart", "text"],
)
def test_the_token_route_takes_a_urlencoded_form_only(
    capped: ApiHarness, send: dict[str, object]
) -> None:
    response = capped.client.post("/auth/token", **send)  # type: ignore[arg-type]
    error = assert_error_body(response, 415, "unsupported_media_type")
    assert "application/x-www-form-urlencoded" in error["message"]


def test_a_urlencoded_login_with_a_charset_is_accepted(capped: ApiHarness) -> None:
    user = capped.add_user("caps-login", login=False)
    response = capped.client.post(
        "/auth/token",
        content=f"username={user.username}&password={user.password}".replace(" ", "+"),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    assert response.status_code == 200, response.text
