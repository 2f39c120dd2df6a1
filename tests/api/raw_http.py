"""A raw HTTP/1.1 client for bodies no library should build: hundreds of megabytes, generated
block by block (never held in memory or stored), stopping as soon as the server answers."""

from __future__ import annotations

import select
import socket
from dataclasses import dataclass

BLOCK = b"a" * (1024 * 1024)


@dataclass
class RawReply:
    """What the server said, and how much of the body it took before saying it."""

    status: int | None
    head: bytes
    body: bytes
    bytes_sent: int


def _read_reply(conn: socket.socket) -> bytes:
    conn.settimeout(30)
    reply = b""
    while True:
        try:
            data = conn.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            break
        reply += data
    return reply


def stream_body(
    host: str,
    port: int,
    path: str,
    *,
    content_type: str,
    total_bytes: int,
    chunked: bool = True,
    headers: dict[str, str] | None = None,
    source_address: str | None = None,
) -> RawReply:
    """POST a generated body of `total_bytes` (chunked, or with Content-Length) and return the
    reply; sending stops when the server answers or hangs up."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Type: {content_type}"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total_bytes}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines.append("Connection: close")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    sent = 0
    bind = (source_address, 0) if source_address else None
    with socket.create_connection((host, port), timeout=10, source_address=bind) as conn:
        conn.sendall(request)
        try:
            while sent < total_bytes:
                if select.select([conn], [], [], 0)[0]:
                    break  # the server has answered (or hung up): stop sending
                block = BLOCK[: total_bytes - sent]
                conn.sendall(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                sent += len(block)
            else:
                if chunked:
                    conn.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the server stopped reading: what a refusal looks like from here
        reply = _read_reply(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else None
    return RawReply(status, head, body, sent)


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB, from /proc/<pid>/status."""
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]
