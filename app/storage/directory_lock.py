"""One process owns an embedded Chroma directory: an exclusive advisory lock enforces it.

A second process (say, the CLI while the server runs) fails fast with a clear message instead of
corrupting the store. The OS releases the lock when the owner dies, so a crash never leaves a
stale lock behind. Within one process the lock is shared, so several components may open it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from app.errors import ConfigurationError

_held: dict[Path, int] = {}
_guard = threading.Lock()


def lock_directory(directory: Path) -> None:
    """Take (or share, within this process) the exclusive lock on `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = (directory / ".owner.lock").resolve()
    with _guard:
        if path in _held:
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigurationError(
                f"{directory} is in use by another process (the API server?); one process owns an "
                "embedded Chroma directory: stop it, use the HTTP API, or run a Chroma server "
                "(RAG_VECTOR_BACKEND=chroma-http)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        _held[path] = fd
