"""PDFium in a child process, like parsing (app/ingestion/timeout.py): a hostile PDF that makes
PDFium loop, crash or allocate gigabytes costs one stopped child, never the API process. An
uploaded image is turned into its kept PDF in such a child too: its frames are user pixels.

The child runs under the same OS limits as the parse child (`app.child_process`): RLIMIT_AS
and RLIMIT_CPU from `RenderLimits`, and a lower CPU priority, so a long render yields the cores
to requests that answer in milliseconds. It is stopped after `timeout_s` of wall time.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app.child_process import (
    LIMIT_EXIT_CODES,
    CpuLimitReached,
    apply_resource_limits,
    caused_by_memory,
    lift_memory_limit,
    reap_child,
)
from app.rendering.image_pdf import PixelCaps, image_to_pdf
from app.rendering.pdf_page import (
    TOO_COMPLEX,
    UNREADABLE,
    PageOutOfRange,
    PageRenderFailed,
    Passage,
    RenderedPage,
    RenderLimits,
    page_count,
    render_page,
)

log = logging.getLogger(__name__)

# forkserver, because forking a threaded server can deadlock the child; the child imports
# PDFium itself (~60 ms).
_CONTEXT = multiprocessing.get_context("forkserver")
_KILL_GRACE_S = 2.0
# PDFium paints in C, where SIGXCPU cannot interrupt it: the hard CPU limit follows soon.
_CPU_GRACE_S = 1
# Added to the child's nice value: the interactive requests of other tenants come first.
_NICENESS = 10


def _child(
    work: Callable[..., Any], args: tuple[Any, ...], limits: RenderLimits, conn: Connection
) -> None:
    try:
        os.nice(_NICENESS)
        apply_resource_limits(limits.max_memory_bytes, limits.max_cpu_s, _CPU_GRACE_S)
        conn.send(("ok", work(*args)))
    except PageOutOfRange as exc:
        conn.send(("out_of_range", exc.page_count))
    except PageRenderFailed as exc:
        memory = caused_by_memory(exc)
        if memory:
            lift_memory_limit()
        reason = "too_complex" if memory else exc.reason
        conn.send(("failed", reason, TOO_COMPLEX if memory else exc.message, repr(exc.__cause__)))
    except MemoryError:
        lift_memory_limit()  # the report itself needs a little memory
        conn.send(("failed", "too_complex", TOO_COMPLEX, "memory limit"))
    except CpuLimitReached:
        conn.send(("failed", "too_complex", TOO_COMPLEX, "CPU time limit"))
    except BaseException as exc:  # reported, never lost with the child
        conn.send(("failed", "unreadable", UNREADABLE, repr(exc)))
    finally:
        conn.close()


def _run(work: Callable[..., Any], args: tuple[Any, ...], limits: RenderLimits) -> Any:
    """`work(*args)` in a limited child; its result, or the error it reported, raised here."""
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(
        target=_child, args=(work, args, limits, sender), name="rag-render", daemon=True
    )
    started = time.monotonic()
    process.start()
    sender.close()  # a dead child then reads as end-of-file
    try:
        if not receiver.poll(limits.timeout_s):
            raise PageRenderFailed(
                "timeout",
                f"drawing this PDF page took longer than {limits.timeout_s:g} s and was stopped",
            )
        try:
            message = receiver.recv()
        except EOFError:
            process.join(_KILL_GRACE_S)
            log.warning("render child died", extra={"exit_code": process.exitcode})
            if process.exitcode in LIMIT_EXIT_CODES:
                raise PageRenderFailed("too_complex", TOO_COMPLEX) from None
            raise PageRenderFailed("unreadable", UNREADABLE) from None
    finally:
        receiver.close()
        reap_child(process, started, _KILL_GRACE_S)
    if message[0] == "out_of_range":
        raise PageOutOfRange(message[1])
    if message[0] == "failed":
        _, reason, public, detail = message
        log.warning("page not drawn", extra={"reason": reason, "detail": detail})
        raise PageRenderFailed(reason, public)
    return message[1]


def render_page_isolated(
    path: Path, page_number: int, limits: RenderLimits, passage: Passage | None = None
) -> RenderedPage:
    """`render_page` in a limited child process (PageRenderFailed when it cannot finish)."""
    rendered: RenderedPage = _run(render_page, (path, page_number, limits, passage), limits)
    return rendered


def page_count_isolated(path: Path, limits: RenderLimits) -> int:
    """`page_count` in a limited child process (PageRenderFailed when PDFium cannot open it)."""
    count: int = _run(page_count, (path,), limits)
    return count


def image_to_pdf_isolated(source: Path, target: Path, limits: RenderLimits, caps: PixelCaps) -> int:
    """`image_to_pdf` in a limited child process: the uploaded image's frames, decoded one at a
    time, written as the PDF `target`; its page count (PageRenderFailed when it cannot finish)."""
    pages: int = _run(image_to_pdf, (source, target, caps), limits)
    return pages
