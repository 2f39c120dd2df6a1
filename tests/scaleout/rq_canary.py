"""Functions an rq message may name in the worker tests: each leaves a file behind when run, and
the module shows up in `sys.modules` once anything imports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def touch(path: str) -> None:
    """Create the file at `path`."""
    Path(path).touch()


def on_failure(job: Any, connection: Any, *exc_info: Any) -> None:
    """An rq failure callback: create the file the job's first argument names."""
    Path(job.args[0]).touch()
