"""Behind a real reverse proxy (nginx, under /rag, saying https): each client is limited by its
own IP, a login lockout cannot be aimed at another user from another client, bcrypt work is
bounded with a fast 429, and absolute URLs carry the gateway's scheme and prefix. Forwarded
headers from anyone but the trusted proxy are ignored. The shipped example proxy
(docker/proxy/nginx.conf) sends HSTS over TLS and only there.

Clients are told apart by their source address: all of 127.0.0.0/8 is loopback on Linux, so a
client bound to 127.0.0.7 reaches nginx as 127.0.0.7, and nginx reaches the service as 127.0.0.1,
the only trusted proxy."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from reverse_proxy import Nginx, nginx_binary

from testkit.live_server import LiveServer, free_port
from tests.api.harness import ApiFactory, ApiHarness, assert_error_body
from tests.availability import needs

pytestmark = [
    pytest.mark.integration,
    needs(nginx_binary() is not None, "needs nginx (apt-get install nginx-light)"),
]

PASSWORD = "a long enough password"
ATTEMPTS_PER_IP = 6
FAILURES_PER_ACCOUNT = 2
USERS = ("alice", "bob", "carol", "dave")
EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "docker" / "proxy" / "nginx.conf"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("gateway") / "data",
        {
            "RAG_TRUSTED_PROXIES": "127.0.0.1",
            "RAG_RATE_LIMIT_AUTH_PER_MINUTE": str(ATTEMPTS_PER_IP),
            "RAG_LOGIN_FAILURES_PER_MINUTE": str(FAILURES_PER_ACCOUNT),
            "RAG_LOGIN_CONCURRENCY": "1",
            "RAG_LOGIN_QUEUE": "0",
        },
    )
    for name in USERS:
        server.create_user("gw", name, PASSWORD)
    with server.running():
        yield server


@pytest.fixture(scope="module")
def gateway(live: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    proxy = Nginx(tmp_path_factory.mktemp("nginx"), live.port)
    proxy.start()
    yield proxy
    proxy.stop()


def client_at(address: str, base_url: str) -> httpx.Client:
    """An HTTP client whose connections come from `address` (a loopback IP)."""
    return httpx.Client(
        base_url=base_url, transport=httpx.HTTPTransport(local_address=address), timeout=30
    )


def login(client: httpx.Client, username: str, password: str, **headers: str) -> httpx.Response:
    return client.post(
        "/auth/token", data={"username": username, "password": password}, headers=headers
    )


def test_a_lockout_cannot_be_aimed_at_another_user_from_another_client(gateway: Nginx) -> None:
    with (
        client_at("127.0.0.2", gateway.url) as attacker,
        client_at("127.0.0.3", gateway.url) as alice,
    ):
        for _ in range(FAILURES_PER_ACCOUNT):
            assert_error_body(login(attacker, "alice", "not her password"), 401, "unauthorized")
        locked = login(attacker, "alice", PASSWORD)  # even the right password, from there
        assert_error_body(locked, 429, "rate_limited")
        assert int(locked.headers["Retry-After"]) >= 1
        # The attacker keeps hammering; refused attempts are not failures and change nothing.
        for _ in range(2):
            assert_error_body(login(attacker, "ALICE", "guess again"), 429, "rate_limited")
        # Alice, from her own machine behind the same gateway, is not locked out.
        mine = login(alice, "alice", PASSWORD)
        assert mine.status_code == 200, mine.text
        assert mine.json()["token_type"] == "bearer"


def test_a_success_clears_the_failures_of_that_user_and_client(gateway: Nginx) -> None:
    with client_at("127.0.0.4", gateway.url) as bob:
        assert_error_body(login(bob, "bob", "typo in it"), 401, "unauthorized")
        assert login(bob, "bob", PASSWORD).status_code == 200
        assert_error_body(login(bob, "bob", "another typo"), 401, "unauthorized")
        assert login(bob, "bob", PASSWORD).status_code == 200


def test_behind_the_proxy_each_client_ip_has_its_own_bucket(gateway: Nginx) -> None:
    with client_at("127.0.0.5", gateway.url) as noisy, client_at("127.0.0.6", gateway.url) as quiet:
        for attempt in range(ATTEMPTS_PER_IP):
            # Other names each time, and a forged X-Forwarded-For: nginx appends the real
            # peer, and the service takes the rightmost address that is not a trusted proxy.
            response = login(
                noisy,
                f"nobody{attempt}",
                "whatever it is",
                **{"X-Forwarded-For": f"10.9.9.{attempt}"},
            )
            assert_error_body(response, 401, "unauthorized")
        assert_error_body(login(noisy, "carol", PASSWORD), 429, "rate_limited")
        assert login(quiet, "carol", PASSWORD).status_code == 200


def test_forwarded_headers_from_an_untrusted_peer_are_ignored(live: LiveServer) -> None:
    with client_at("127.0.0.7", live.url) as direct:
        for attempt in range(ATTEMPTS_PER_IP):
            spoofed = {"X-Forwarded-For": f"198.51.100.{attempt}"}
            assert_error_body(login(direct, f"x{attempt}", "guess guess", **spoofed), 401)
        refused = login(direct, "dave", PASSWORD, **{"X-Forwarded-For": "198.51.100.200"})
        assert_error_body(refused, 429, "rate_limited")
        # Nor does a forged prefix or scheme reach the URLs the service builds.
        spoof = {"X-Forwarded-Prefix": "/evil", "X-Forwarded-Proto": "https"}
        schema = direct.get("/openapi.json", headers=spoof).json()
        assert "servers" not in schema
        moved = direct.get("/documents/", headers=spoof, follow_redirects=False)
        assert moved.status_code == 307
        assert moved.headers["location"] == f"{live.url}/documents"


def test_urls_the_service_builds_carry_the_gateway_scheme_and_prefix(gateway: Nginx) -> None:
    with client_at("127.0.0.8", gateway.url) as client:
        schema = client.get("/openapi.json").json()
        assert schema["servers"][0]["url"] == "/rag"
        moved = client.get("/documents/", follow_redirects=False)
        assert moved.status_code == 307, moved.text
        host = gateway.url.removeprefix("http://").split("/")[0]
        assert moved.headers["location"] == f"https://{host}/rag/documents"
        token = login(client, "dave", PASSWORD)
        assert token.status_code == 200, token.text
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        listing = client.get("/documents", headers=headers)
        assert listing.status_code == 200 and listing.json()["count"] == 0
        # Under the prefix, uploads still get the upload cap and every other route the small one.
        text = b"The gas shut-off valve is behind the blue panel. " * 2000  # ~100 KB
        accepted = client.post("/documents", files={"file": ("gas.txt", text)}, headers=headers)
        assert accepted.status_code == 202, accepted.text
        refused = client.post("/search", content=text, headers=headers)
        assert_error_body(refused, 413, "payload_too_large")


def test_bcrypt_work_is_bounded_and_the_excess_is_refused(gateway: Nginx) -> None:
    # One password check at a time and none waiting: a burst of 8 logins from 8 clients
    # (8 fresh IP buckets) must be partly refused, not queued (that a full queue refuses
    # without waiting is tests/test_login_guard.py's claim; the times here are printed only).
    results: list[tuple[int, float, str | None]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def one(index: int) -> None:
        with client_at(f"127.0.1.{index + 1}", gateway.url) as client:
            start.wait()
            began = time.perf_counter()
            response = login(client, "alice", PASSWORD)
            elapsed = time.perf_counter() - began
            with lock:
                results.append((response.status_code, elapsed, response.headers.get("Retry-After")))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _, _ in results)
    print(
        f"\nburst of 8 logins, 1 bcrypt slot, no queue: {statuses}, "
        + ", ".join(f"{status}:{elapsed * 1000:.0f}ms" for status, elapsed, _ in sorted(results))
    )
    assert set(statuses) <= {200, 429}, statuses
    assert 200 in statuses and 429 in statuses, statuses
    for status, _, retry_after in results:
        if status == 429:
            assert retry_after is not None and int(retry_after) >= 1


def test_the_root_path_setting_serves_the_api_under_a_prefix(api_factory: ApiFactory) -> None:
    harness = api_factory(root_path="/rag")
    schema = harness.client.get("/rag/openapi.json").json()
    assert schema["servers"] == [{"url": "/rag"}]
    assert harness.client.get("/rag/health").json() == {"status": "ok"}
    # A gateway that strips the prefix before forwarding reaches the same routes.
    assert harness.client.get("/health").json() == {"status": "ok"}
    moved = harness.client.get("/documents/", follow_redirects=False)
    assert moved.headers["location"].endswith("/rag/documents")


@pytest.fixture(scope="module")
def behind_trusted_proxy(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(client_host="10.1.2.3", trusted_proxies="10.0.0.0/8")


@pytest.mark.parametrize("prefix", ["//evil.example", "https://evil.example", "/a?b=1", "/a b"])
def test_a_forwarded_prefix_that_is_not_a_plain_path_is_ignored(
    behind_trusted_proxy: ApiHarness, prefix: str
) -> None:
    harness = behind_trusted_proxy
    sane = harness.client.get("/openapi.json", headers={"X-Forwarded-Prefix": "/gw/"}).json()
    assert sane["servers"] == [{"url": "/gw"}]
    schema = harness.client.get("/openapi.json", headers={"X-Forwarded-Prefix": prefix}).json()
    assert "servers" not in schema


def example_site(tls_port: int, cert: Path, key: Path) -> str:
    """docker/proxy/nginx.conf as shipped, aimed at the live server, with the three TLS lines its
    comment documents switched on (each edit must apply: the test fails if the example changes)."""
    site = EXAMPLE_CONFIG.read_text()
    edits = {
        "listen 8080;": "listen 127.0.0.1:{port};",
        "http://api:8000/": "http://127.0.0.1:{upstream}/",
        "#   listen 8443 ssl;": f"listen 127.0.0.1:{tls_port} ssl;",
        "#   ssl_certificate     /etc/nginx/tls/fullchain.pem;": f"ssl_certificate {cert};",
        "#   ssl_certificate_key /etc/nginx/tls/privkey.pem;": f"ssl_certificate_key {key};",
    }
    for shipped, here in edits.items():
        assert site.count(shipped) == 1, f"{EXAMPLE_CONFIG} no longer has {shipped!r}"
        site = site.replace(shipped, here)
    return site


@pytest.fixture(scope="module")
def example_gateway(
    live: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """The example proxy with TLS on: its (plain, TLS) base URLs under /rag."""
    root = tmp_path_factory.mktemp("example-proxy")
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    tls_port = free_port()
    proxy = Nginx(root, live.port, site=example_site(tls_port, cert, key))
    proxy.start()
    yield proxy.url, f"https://127.0.0.1:{tls_port}/rag"
    proxy.stop()


def test_the_example_proxy_sends_hsts_over_tls_only(example_gateway: tuple[str, str]) -> None:
    plain_url, tls_url = example_gateway
    with httpx.Client(verify=False, timeout=30) as client:
        over_tls = client.get(f"{tls_url}/health")
        plain = client.get(f"{plain_url}/health")
        tls_error = client.post(f"{tls_url}/auth/token", data={"username": "x", "password": "y"})
    assert over_tls.status_code == plain.status_code == 200
    assert over_tls.headers.get_list("strict-transport-security") == ["max-age=31536000"]
    assert tls_error.status_code == 401  # `always`: error answers carry it too
    assert tls_error.headers.get_list("strict-transport-security") == ["max-age=31536000"]
    assert "strict-transport-security" not in plain.headers  # ignored over HTTP: not sent
    # The service's own header passes through the proxy once.
    for response in (over_tls, plain, tls_error):
        assert response.headers.get_list("x-content-type-options") == ["nosniff"]
