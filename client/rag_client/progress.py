"""Progress on stderr while files upload: a bar per file and one for all (rich)."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from rag_client.transfer import Sent, UploadRequest, UploadResult


class UploadProgress:
    """Bars for an upload of many files on stderr; silent when stderr is not a terminal. With
    --json too: stdout keeps its one JSON document, and nothing printed meanwhile is moved
    from stdout to the bars' stream."""

    def __init__(self, total_bytes: int, files: int) -> None:
        console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}", justify="left"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not console.is_terminal,
            transient=False,
            redirect_stdout=False,
        )
        self._overall = self._progress.add_task(f"all {files} files", total=total_bytes)
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> UploadProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def started(self, request: UploadRequest) -> Sent:
        """A bar for this file; the callback that moves it (and the overall bar)."""
        key = str(request.path)
        size = request.path.stat().st_size if request.path.exists() else 0
        with self._lock:
            task = self._progress.add_task(request.path.name[:40], total=size)
            self._tasks[key] = task

        def sent(count: int) -> None:
            self._progress.advance(task, count)
            self._progress.advance(self._overall, count)

        return sent

    def finished(self, request: UploadRequest, result: UploadResult) -> None:
        """Remove the file's bar (its bytes stay counted in the overall bar)."""
        with self._lock:
            task = self._tasks.pop(str(request.path), None)
        if task is not None:
            self._progress.remove_task(task)
