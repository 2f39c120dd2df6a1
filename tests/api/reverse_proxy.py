"""A real nginx in front of a live server, as a gateway would be: on its own free port, under a
path prefix, terminating "TLS" (it says X-Forwarded-Proto: https) and adding the usual
X-Forwarded-* headers. Needs the Debian package `nginx-light` (or any nginx on PATH)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from testkit.live_server import free_port

_CONFIG = """
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
{user}
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    client_max_body_size 0;  # the service enforces its own caps
{site}
}}
"""

# The gateway's site: "{port}", "{upstream}" and "{prefix}" are filled in by `Nginx.start`.
_SITE = """
    server {
        listen 127.0.0.1:{port};
        location {prefix}/ {
            proxy_pass http://127.0.0.1:{upstream}/;
            proxy_http_version 1.1;
            proxy_request_buffering off;
            proxy_buffering off;
            proxy_redirect off;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto https;
            proxy_set_header X-Forwarded-Prefix {prefix};
        }
    }
"""


def nginx_binary() -> str | None:
    """Path of nginx, if installed."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


@dataclass
class Nginx:
    """One nginx process proxying `prefix`/ to the upstream port."""

    root: Path
    upstream_port: int
    prefix: str = "/rag"
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    site: str = _SITE  # server blocks (and maps) inside `http`, with the placeholders above

    @property
    def url(self) -> str:
        """Base URL of the gateway, prefix included."""
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def start(self) -> None:
        """Write the config, start nginx in the foreground and wait until it proxies."""
        binary = nginx_binary()
        assert binary, "nginx is not installed (apt-get install nginx-light)"
        self.port = free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        # As root, nginx would hand its workers to `nobody`, who cannot use this temp dir.
        user = "user root;" if os.geteuid() == 0 else ""
        config = self.root / "nginx.conf"
        site = (
            self.site.replace("{port}", str(self.port))
            .replace("{upstream}", str(self.upstream_port))
            .replace("{prefix}", self.prefix)
        )
        config.write_text(_CONFIG.format(root=self.root, user=user, site=site))
        self.process = subprocess.Popen(
            [binary, "-p", str(self.root), "-c", str(config), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "stderr.log").open("wb"),
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.root / "stderr.log").read_text()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("nginx did not start proxying within 30 s")

    def stop(self) -> None:
        """Stop nginx and its worker."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
            self.process = None
