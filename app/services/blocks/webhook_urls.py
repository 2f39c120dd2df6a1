"""Where a webhook may point: not at the service's own network (SSRF).

A URL whose host resolves to a loopback, private, link-local (cloud metadata, 169.254.169.254),
shared, multicast or otherwise non-global address is refused, when the webhook is made and
again at every delivery (a name may resolve elsewhere later: DNS rebinding). A delivery then
connects to the address that was checked, not to a second lookup. RAG_WEBHOOK_ALLOW_PRIVATE
lifts the rule (tests, a closed network); production also requires https.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.errors import InvalidInput

# host, port -> the addresses it resolves to (socket.getaddrinfo, reduced)
Resolver = Callable[[str, int], list[str]]
MAX_URL_CHARS = 2048


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (IPv4 and IPv6)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in found})


@dataclass(frozen=True)
class UrlRules:
    """What webhook URLs may be: https only (production), private addresses or not."""

    require_https: bool
    allow_private: bool
    resolver: Resolver = resolve


@dataclass(frozen=True)
class Target:
    """A checked URL and the address to connect to (None: connect by name, private allowed)."""

    url: str
    host: str
    address: str | None


def _refused(reason: str) -> InvalidInput:
    return InvalidInput(f"webhook url refused: {reason}")


def check_url(url: str, rules: UrlRules) -> Target:
    """The URL's target when the rules allow it; InvalidInput saying why not."""
    if len(url) > MAX_URL_CHARS:
        raise _refused(f"longer than {MAX_URL_CHARS} characters")
    parts = urlsplit(url)
    allowed_schemes = ("https",) if rules.require_https else ("http", "https")
    if parts.scheme not in allowed_schemes:
        raise _refused(f"use {' or '.join(allowed_schemes)}")
    if not parts.hostname or parts.username or parts.password:
        raise _refused("give a host name, without user or password")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _refused("the port is not a number from 1 to 65535") from None
    host = parts.hostname
    if rules.allow_private:
        return Target(url, host, None)
    try:
        addresses = rules.resolver(host, port)
    except OSError:
        raise _refused(f"{host} does not resolve") from None
    if not addresses:
        raise _refused(f"{host} does not resolve")
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        if not address.is_global:
            raise _refused(
                f"{host} resolves to {address}, a loopback, private, link-local or other "
                "non-public address"
            )
    return Target(url, host, addresses[0])
