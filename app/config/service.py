"""The settings of where the service runs and what a request may carry: address, data directory,
logging, body and login limits, proxies, exact-match work per query.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, field_validator

from app.config.fields import setting, split_list


class ServiceSettings(BaseModel):
    """Where the service runs and what a request may carry: address, data directory, logging, body
    and login limits, proxies, exact-match work per query."""

    env: Literal["development", "production"] = setting(
        "production",
        group="service",
        description="development: a random per-process JWT secret is allowed (with a warning). "
        "`make run` sets it.",
    )
    host: str = setting("127.0.0.1", group="service", description="Address the API listens on.")
    port: int = setting(
        8000, group="service", description="Port the API listens on.", ge=1, le=65535
    )
    data_dir: Path = setting(
        Path("data"),
        group="service",
        description="All state (SQLite, Chroma, uploads, keyword indexes) lives here.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = setting(
        "INFO", group="service", description="Lowest level of the JSON log lines written."
    )
    max_body_bytes: int = setting(
        64 * 1024,
        group="http",
        unit="bytes",
        description="Largest JSON or form body (every route but POST /documents, which is capped "
        "at RAG_MAX_UPLOAD_BYTES plus 64 KiB of multipart framing). Enforced before "
        "authentication, on Content-Length and on chunked bodies as they arrive: larger bodies "
        "get 413.",
        ge=4096,
    )
    trusted_proxies: str = setting(
        "",
        group="http",
        description="Reverse proxies whose X-Forwarded-For / -Proto / -Prefix headers are "
        "believed, as a comma separated list of IPs or CIDRs, e.g. 10.0.0.0/8,127.0.0.1 (empty: "
        "the headers are ignored, the peer is the client).",
    )
    root_path: str = setting(
        "",
        group="http",
        description="Path prefix a gateway serves the API under (e.g. /rag); a trusted proxy's "
        "X-Forwarded-Prefix overrides it per request. Used for the OpenAPI servers URL, /docs "
        "and redirects.",
    )
    login_failures_per_minute: int = setting(
        5,
        group="http",
        unit="per minute",
        description="Wrong passwords for one user name from one client IP (the IP's own budget "
        "is RAG_RATE_LIMIT_AUTH_PER_MINUTE attempts); only failures count and a success clears "
        "them, so nobody can lock a user out from another client.",
        gt=0,
    )
    login_account_failures_per_minute: int = setting(
        20,
        group="http",
        unit="per minute",
        description="Wrong passwords for one account (a tenant's user name) from all clients "
        "together (an IPv6 client is its /64). Beyond it, clients that never logged in to that "
        "account get one password check per 1 s (2 s from twice as many failures, 4 s from "
        "four times, never slower) and 429 with Retry-After in between; the account's known "
        "clients are not slowed, so nobody can lock a user out this way either.",
        gt=0,
    )
    login_daily_failures_per_account: int = setting(
        100,
        group="http",
        unit="per 24 hours",
        description="Wrong passwords for one account (a tenant's user name) in 24 hours, from "
        "all clients together, after which clients that have not signed in to it in the last "
        "30 days are refused with 429 `account_locked` until the 24 hours from its first "
        "failure end (no password check); its own recent clients still sign in. Each lock is "
        "written once to the audit log (`login.locked`).",
        gt=0,
    )
    login_concurrency: int = setting(
        2,
        group="http",
        unit="checks",
        description="Password checks (bcrypt) running at once.",
        gt=0,
    )
    login_queue: int = setting(
        8,
        group="http",
        unit="logins",
        description="Logins that may wait about a second for a check; beyond that a login gets "
        "429 with Retry-After at once.",
        ge=0,
    )
    exact_max_terms: int = setting(
        16,
        group="http",
        unit="terms",
        description="Exact-match work per query: literal terms and quoted phrases looked up.",
        gt=0,
    )
    exact_max_phrases: int = setting(
        4, group="http", unit="phrases", description="Quoted phrases looked up per query.", gt=0
    )
    exact_max_scans: int = setting(
        4,
        group="http",
        unit="scans",
        description="Substring scans of the tenant's chunk texts per query.",
        ge=0,
    )
    exact_verify_budget: int = setting(
        400,
        group="http",
        unit="chunks",
        description="Chunk texts fetched to verify multi-word phrases, per query.",
        ge=0,
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: str) -> str:
        for entry in split_list(value):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
        return value

    @field_validator("root_path")
    @classmethod
    def _check_root_path(cls, value: str) -> str:
        value = value.rstrip("/")
        if value and (not value.startswith("/") or "//" in value or "?" in value):
            raise ValueError("must be empty or a path such as /rag")
        return value

    @property
    def trusted_proxy_list(self) -> list[str]:
        """RAG_TRUSTED_PROXIES as a list of IPs and CIDR networks."""
        return split_list(self.trusted_proxies)
