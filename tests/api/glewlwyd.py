"""A real OpenID provider for the tests: Debian's Glewlwyd, started on a free loopback port with
its own SQLite database, configured through its admin API (an OIDC plugin with an RSA key,
clients, users with groups). A missing `glewlwyd` fails the tests (tests/availability.py).

Why Glewlwyd rather than LemonLDAP::NG: it is one C binary with a file config and an admin REST
API, so a test starts it headless in well under a second and drives it without a web server in
front; LemonLDAP::NG needs a web server with FastCGI and Perl handlers and a manager to write its
configuration.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import secrets
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from testkit.live_server import free_port
from tests.availability import unavailable

GLEWLWYD = "/usr/bin/glewlwyd"
SCHEMA = Path("/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz")
WEBAPP = Path("/usr/share/glewlwyd/webapp")
MODULES = Path("/usr/lib/glewlwyd")
INSTALL_HINT = "install it with `apt-get install -y glewlwyd` (scripts/install.sh does for dev)"
ADMIN_PASSWORD = "password"  # the default admin of Glewlwyd's own schema
PLUGIN = "oidc"
# Scopes whose access tokens carry them as `aud` (Glewlwyd's audience without resource
# indicators): one per tenant that accepts the provider's access tokens.
API_SCOPES = ("rag-api", "rag-b-api")
START_TIMEOUT_S = 20.0

_CONFIG = """\
port={port}
bind_address="127.0.0.1"
external_url="{url}"
login_url="login.html"
static_files_path="{webapp}"
static_files_prefix="webapp"
api_prefix="api"
allow_origin="*"
log_mode="file"
log_file="{log}"
log_level="WARNING"
cookie_secure=0
session_expiration=3600
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
login_api_enabled=true
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="{modules}/user"
client_module_path="{modules}/client"
user_auth_scheme_module_path="{modules}/scheme"
plugin_module_path="{modules}/plugin"
hash_algorithm="SHA512"
database = {{
  type = "sqlite3"
  path = "{database}"
}};
static_files_mime_types = (
  {{ extension = ".html" mime_type = "text/html" }},
  {{ extension = ".css" mime_type = "text/css" }},
  {{ extension = ".js" mime_type = "application/javascript" }},
  {{ extension = ".json" mime_type = "application/json" }},
  {{ extension = ".png" mime_type = "image/png" }},
  {{ extension = ".ico" mime_type = "image/x-icon" }},
  {{ extension = ".woff2" mime_type = "font/woff2" }},
  {{ extension = ".woff" mime_type = "font/woff" }},
  {{ extension = ".ttf" mime_type = "font/ttf" }}
);
"""


def _rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _public_pem(private_pem: str) -> str:
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def pkce_pair() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass
class Glewlwyd:
    """One running Glewlwyd with an admin session; `issuer` is what discovery announces."""

    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    started_in_s: float = 0.0
    admin: httpx.Client | None = None

    @property
    def url(self) -> str:
        """Glewlwyd's base URL (its web app lives under /webapp/)."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def issuer(self) -> str:
        """The OIDC plugin's issuer (the URL discovery hangs under)."""
        return f"{self.url}api/{PLUGIN}"

    @property
    def log_path(self) -> Path:
        """Glewlwyd's own log."""
        return self.workdir / "glewlwyd.log"

    def start(self) -> None:
        """Create its database and config, start it and wait until its API answers."""
        if not Path(GLEWLWYD).is_file():
            unavailable(f"no Glewlwyd at {GLEWLWYD}; {INSTALL_HINT}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        database = self.workdir / "glewlwyd.db"
        with sqlite3.connect(database) as connection:
            connection.executescript(gzip.decompress(SCHEMA.read_bytes()).decode())
        config = self.workdir / "glewlwyd.conf"
        config.write_text(
            _CONFIG.format(
                port=self.port,
                url=self.url.rstrip("/"),
                webapp=self._webapp(),
                modules=MODULES,
                database=database,
                log=self.log_path,
            )
        )
        began = time.monotonic()
        self.process = subprocess.Popen(
            [GLEWLWYD, "-c", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = began + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"glewlwyd exited: {self.log_text()}")
            try:
                if httpx.get(f"{self.url}config/", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"glewlwyd did not answer: {self.log_text()}")
            time.sleep(0.05)
        self.started_in_s = time.monotonic() - began
        self.admin = httpx.Client(base_url=f"{self.url}api/", timeout=10)
        self._ok(self.admin.post("auth/", json={"username": "admin", "password": ADMIN_PASSWORD}))
        self._configure()

    def _webapp(self) -> Path:
        """A copy of Glewlwyd's login web app whose config.json is a file: Debian's package
        links it to /etc/glewlwyd/config-2.7.json, a directory holding the file, so the page
        served as packaged never finds its configuration."""
        copy = self.workdir / "webapp"
        if copy.exists():
            return copy
        shutil.copytree(WEBAPP, copy)
        config = copy / "config.json"
        if config.is_dir():
            inner = config / "config.json"
            content = inner.read_bytes()
            shutil.rmtree(config)
            config.write_bytes(content)
        return copy

    def stop(self) -> None:
        """Stop the process (and the admin session)."""
        if self.admin is not None:
            self.admin.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_text(self) -> str:
        """What Glewlwyd logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @staticmethod
    def _ok(response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            raise RuntimeError(
                f"glewlwyd {response.request.url}: {response.status_code} {response.text}"
            )
        return response

    # --- configuration ------------------------------------------------------------------------

    def _configure(self) -> None:
        assert self.admin is not None
        # Users keep a multi-valued `groups` property (the database backend drops properties
        # its data format does not name).
        module = self._ok(self.admin.get("mod/user/database")).json()
        module["parameters"]["data-format"]["groups"] = {
            "multiple": True,
            "read": True,
            "write": True,
            "profile-read": True,
            "profile-write": False,
        }
        self._ok(self.admin.put("mod/user/database", json=module))
        self._ok(self.admin.put("mod/user/database/reset"))  # reloads the data format
        for scope in ("profile", "email", *API_SCOPES):
            self._ok(
                self.admin.post(
                    "scope/",
                    json={
                        "name": scope,
                        "display_name": scope,
                        "description": scope,
                        "password_required": True,
                        "password_max_age": 3600,
                        "scheme": {},
                    },
                )
            )
        # A scope is usable only through some way to sign in: the password for all of them.
        openid = self._ok(self.admin.get("scope/openid")).json()
        openid.update(password_required=True, password_max_age=3600)
        self._ok(self.admin.put("scope/openid", json=openid))
        key = _rsa_key_pem()
        self._ok(
            self.admin.post(
                "mod/plugin/",
                json={
                    "module": "oidc",
                    "name": PLUGIN,
                    "display_name": "Test provider",
                    "enabled": True,
                    "parameters": self._plugin_parameters(key),
                },
            )
        )

    def _plugin_parameters(self, key: str) -> dict[str, Any]:
        return {
            "iss": self.issuer,
            "jwt-type": "rsa",
            "jwt-key-size": "256",
            "key": key,
            "cert": _public_pem(key),
            "jwks-show": True,
            "access-token-duration": 600,
            "refresh-token-duration": 3600,
            "code-duration": 60,
            "refresh-token-rolling": False,
            "allow-non-oidc": True,
            "auth-type-code-enabled": True,
            "auth-type-code-revoke-replayed": True,
            "auth-type-token-enabled": False,
            "auth-type-id-token-enabled": False,
            "auth-type-none-enabled": False,
            "auth-type-password-enabled": True,
            "auth-type-client-enabled": True,
            "auth-type-device-enabled": False,
            "auth-type-refresh-enabled": True,
            "subject-type": "public",
            "scope": [],
            "additional-parameters": [{"user-parameter": "groups", "token-parameter": "groups"}],
            "claims": [
                {"name": "groups", "user-property": "groups", "type": "string", "mandatory": True},
            ],
            "name-claim": "mandatory",
            "email-claim": "mandatory",
            "scope-claim": "no",
            "allowed-scope": ["openid", "profile", "email", *API_SCOPES],
            "pkce-allowed": True,
            "pkce-method-plain-allowed": False,
            "session-management-allowed": True,
            "session-cookie-name": "GLEWLWYD_OIDC_SID",
            "session-cookie-expiration": 3600,
            "request-parameter-allow": False,
            "introspection-revocation-allowed": False,
            "register-client-allowed": False,
            "encrypt-out-token-allow": False,
            "oauth-dpop-allowed": False,
            "resource-allowed": False,
            "oauth-rar-allowed": False,
            "oauth-par-allowed": False,
            "address-claim": {"type": "no", "mandatory": False},
        }

    def add_client(
        self, client_id: str, secret: str, redirect_uri: str, *, scope: str = "rag-api"
    ) -> None:
        """A confidential client with the code, refresh, password and client-credentials
        grants; `scope` is what its client-credentials tokens get."""
        assert self.admin is not None
        self._ok(
            self.admin.post(
                "client/",
                json={
                    "client_id": client_id,
                    "name": client_id,
                    "confidential": True,
                    "enabled": True,
                    "client_secret": secret,
                    "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"],
                    "redirect_uri": [redirect_uri],
                    "authorization_type": [
                        "code",
                        "refresh_token",
                        "client_credentials",
                        "password",
                    ],
                    "scope": [scope],
                },
            )
        )

    def add_user(
        self, username: str, password: str, *, email: str, groups: list[str], name: str = ""
    ) -> None:
        """A user allowed the OIDC scopes, with provider groups."""
        assert self.admin is not None
        self._ok(
            self.admin.post(
                "user/",
                json={
                    "username": username,
                    "password": password,
                    "name": name or username,
                    "email": email,
                    "enabled": True,
                    "scope": ["g_profile", "openid", "profile", "email", *API_SCOPES],
                    "groups": groups,
                },
            )
        )

    def set_groups(self, username: str, groups: list[str]) -> None:
        """Replace a user's provider groups."""
        assert self.admin is not None
        user = self._ok(self.admin.get(f"user/{username}")).json()
        user["groups"] = groups
        user.pop("username", None)
        self._ok(self.admin.put(f"user/{username}", json=user))

    def set_enabled(self, username: str, enabled: bool) -> None:
        """Enable or disable a provider user."""
        assert self.admin is not None
        user = self._ok(self.admin.get(f"user/{username}")).json()
        user["enabled"] = enabled
        self._ok(self.admin.put(f"user/{username}", json=user))

    def grant(self, username: str, client_id: str, scopes: list[str]) -> None:
        """Record the user's consent to the client's scopes, as the consent page would (its
        own API for this answers 401 to a fresh session, so it goes into Glewlwyd's table)."""
        with sqlite3.connect(self.workdir / "glewlwyd.db") as connection:
            for scope in scopes:
                connection.execute(
                    "INSERT INTO g_client_user_scope (gs_id, gcus_username, gcus_client_id) "
                    "SELECT gs_id, ?, ? FROM g_scope WHERE gs_name = ?",
                    (username, client_id, scope),
                )

    # --- a person at the provider, without a browser ----------------------------------------

    def authorize(self, authorize_url: str, username: str, password: str) -> str:
        """Sign the user in at Glewlwyd, grant the client's scopes, follow the authorization
        URL and return where Glewlwyd redirects back (the callback URL with code and state)."""
        query = parse_qs(urlsplit(authorize_url).query)
        client_id = query["client_id"][0]
        scopes = query["scope"][0].split()
        with httpx.Client(base_url=f"{self.url}api/", timeout=10) as person:
            self._ok(person.post("auth/", json={"username": username, "password": password}))
            self.grant(username, client_id, scopes)
            # `g_continue` is what Glewlwyd's login page adds once the person signed in: without
            # it the authorization endpoint always shows the login page first.
            answer = person.get(authorize_url + "&g_continue")
            location = answer.headers.get("location", "")
            if answer.status_code != 302 or not location:
                raise RuntimeError(
                    f"no redirect from {authorize_url}: {answer.status_code} {answer.text}"
                )
            return location

    def client_credentials_token(self, client_id: str, secret: str, scope: str = "rag-api") -> str:
        """An access token of the client itself."""
        answer = httpx.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "scope": scope},
            auth=(client_id, secret),
            timeout=10,
        )
        return str(self._ok(answer).json()["access_token"])

    def password_token(
        self, client_id: str, secret: str, username: str, password: str, scope: str = "rag-api"
    ) -> str:
        """An access token of a user through the password grant."""
        answer = httpx.post(
            f"{self.issuer}/token",
            data={
                "grant_type": "password",
                "username": username,
                "password": password,
                "scope": scope,
            },
            auth=(client_id, secret),
            timeout=10,
        )
        return str(self._ok(answer).json()["access_token"])


@contextmanager
def running_glewlwyd(workdir: Path) -> Iterator[Glewlwyd]:
    """A started Glewlwyd, stopped at the end of the block."""
    provider = Glewlwyd(workdir)
    try:
        provider.start()
        yield provider
    finally:
        provider.stop()


def authorize_url(glewlwyd: Glewlwyd, client_id: str, redirect_uri: str, **extra: str) -> str:
    """An authorization request URL at Glewlwyd."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid profile email",
        "state": secrets.token_urlsafe(8),
        "nonce": secrets.token_urlsafe(8),
        **extra,
    }
    return f"{glewlwyd.issuer}/auth?{urlencode(params)}"
