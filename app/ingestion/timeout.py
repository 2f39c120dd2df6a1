"""Parse untrusted files in a child process with a hard time limit and OS resource limits.

A hostile PDF can make a parser loop for minutes; a thread cannot be stopped, a process can.
The child sends back either the pages or the typed error (class name and message), which is
raised again in the parent as the same class, so callers see the same errors as from `load`.

The child also runs under RLIMIT_AS (memory) and RLIMIT_CPU (CPU seconds) from `LoadLimits`:
a decompression or object-graph bomb fails with DocumentTooComplex instead of exhausting the
machine. Past the soft CPU limit the child gets SIGXCPU (reported as DocumentTooComplex);
a parser stuck in C code is killed at the hard limit a little later, reported the same way.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app import errors
from app.child_process import (
    LIMIT_EXIT_CODES,
    CpuLimitReached,
    apply_resource_limits,
    caused_by_memory,
    lead_process_group,
    lift_memory_limit,
    reap_child,
    stop_child,
)
from app.domain import OcrLayout, Page
from app.errors import CorruptDocument, DocumentTooComplex, IngestionError, JobPaused, ParseTimeout
from app.ingestion.dispatch import load
from app.ingestion.loaders import LOADER_MODULES
from app.ingestion.ocr_checkpoint import append_page, read_pages
from app.ingestion.ocr_progress import set_ocr_pages, set_ocr_reporter
from app.ingestion.parse_limits import LoadLimits
from app.ingestion.parse_turn import ParseTurn

# forkserver: forking a process that runs threads (web server, worker pool) can deadlock the
# child on a lock held by another thread; the fork server is a clean single-threaded parent.
_CONTEXT = multiprocessing.get_context("forkserver")
# The fork server imports the parsers once; each child then starts with them loaded.
_CONTEXT.set_forkserver_preload(["app.ingestion.dispatch", *LOADER_MODULES])
_KILL_GRACE_S = 2.0


def too_complex(limits: LoadLimits, resource_name: str) -> DocumentTooComplex:
    """The error for a file whose parsing needed more memory or CPU time than allowed."""
    if resource_name == "memory" and limits.max_memory_bytes:
        limit = f"{limits.max_memory_bytes // (1024 * 1024)} MB of memory"
    elif resource_name == "cpu" and limits.max_cpu_s:
        limit = f"{limits.max_cpu_s} s of CPU time"
    else:
        limit = "its memory or CPU limit"
    return DocumentTooComplex(
        f"document_too_complex: parsing this file needed more than {limit} and was stopped; "
        "the file may be malformed or built to exhaust the parser. Try a simpler export of it"
    )


def _parse_in_child(
    path: str, limits: LoadLimits, conn: Connection, known: dict[int, OcrLayout]
) -> None:
    try:
        lead_process_group()
        apply_resource_limits(limits.max_memory_bytes, limits.max_cpu_s)
        set_ocr_reporter(lambda done, total: conn.send(("ocr", done, total)))
        set_ocr_pages(known, lambda key, layout: conn.send(("page", key, layout)))
        conn.send(("ok", load(Path(path), limits)))
    except MemoryError:
        lift_memory_limit()  # the report itself needs a little memory
        conn.send(("error", "DocumentTooComplex", too_complex(limits, "memory").message))
    except CpuLimitReached:
        conn.send(("error", "DocumentTooComplex", too_complex(limits, "cpu").message))
    except IngestionError as exc:
        if caused_by_memory(exc):  # a loader wrapped the MemoryError as a damaged file
            lift_memory_limit()
            conn.send(("error", "DocumentTooComplex", too_complex(limits, "memory").message))
        else:
            conn.send(("error", type(exc).__name__, exc.message))
    except BaseException as exc:  # anything else is reported, never lost with the child
        conn.send(
            ("error", "CorruptDocument", f"the file could not be read ({type(exc).__name__})")
        )
    finally:
        conn.close()


def _error_from(name: str, message: str) -> IngestionError:
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, IngestionError):
        return cls(message)
    return CorruptDocument(message)


# Plain text is decoded by our own linear-time code under the size caps: no parser to stall, so
# it skips the child process (which costs ~0.1 s warm, far more than parsing a text file).
_IN_PROCESS_EXTENSIONS = frozenset({".txt", ".md", ".markdown"})


OcrProgress = Callable[[int, int], None]


def _ignore_ocr(done: int, total: int) -> None:
    return None


def load_with_timeout(
    path: Path,
    limits: LoadLimits,
    timeout_s: float,
    ocr_progress: OcrProgress | None = None,
    turn: ParseTurn | None = None,
) -> list[Page]:
    """`load(path, limits)` in a child process, killed after `timeout_s` (raises ParseTimeout).

    While the child OCRs pages it reports them (`ocr_progress(done, total)`), and each page
    read extends the time limit by the OCR page limit: a long scan is bounded per page.
    Plain-text files are read in this process (see `_IN_PROCESS_EXTENSIONS`).

    With a job's `turn`, its deadline bounds the whole parse too (JobTimedOut, the child
    stopped); each page OCR'd is kept in its checkpoint and not read again by a later call, and
    after a turn of pages, when another tenant's job waits, the child is stopped and JobPaused
    raised: the job goes back to the queue and resumes from the pages kept.
    """
    ocr_progress = ocr_progress or _ignore_ocr
    turn = turn or ParseTurn()
    turn.check()
    if path.suffix.lower() in _IN_PROCESS_EXTENSIONS:
        return load(path, limits)
    known = read_pages(turn.checkpoint) if turn.checkpoint is not None else {}
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(
        target=_parse_in_child,
        args=(str(path), limits, sender, known),
        name="rag-parse",
        daemon=True,
    )
    started = time.monotonic()
    process.start()
    sender.close()  # the parent keeps only its end, so a dead child reads as end-of-file
    deadline = started + timeout_s
    read_now = 0  # pages OCR'd in this call (not kept from an earlier turn)
    try:
        while True:
            job_left = turn.seconds_left()
            wait_s = deadline - time.monotonic()
            if job_left is not None and job_left < wait_s:
                wait_s = job_left
            message = _next_message(receiver, process, limits, wait_s)
            if message[0] == "page":
                if turn.checkpoint is not None:
                    append_page(turn.checkpoint, message[1], message[2])
                read_now += 1
                if turn.should_yield(read_now):
                    raise JobPaused(f"paused after {read_now} pages read in this turn")
                continue
            if message[0] != "ocr":
                break
            # Two passes per page at most (eng+ara, then ara), each within the page limit.
            deadline = max(deadline, time.monotonic() + 2 * limits.ocr.page_timeout_s)
            ocr_progress(message[1], message[2])
    except ParseTimeout:
        stop_child(process, _KILL_GRACE_S)
        left = turn.seconds_left()
        if left is not None and left <= 0:
            raise turn.timed_out() from None
        raise ParseTimeout(
            f"parsing the file took longer than {timeout_s:g} s and was stopped; "
            "the file may be malformed or too complex. Try a simpler export of it"
        ) from None
    except BaseException:  # paused, out of time, or a progress callback's error: stop it first,
        stop_child(process, _KILL_GRACE_S)  # so it is not left writing into a closed pipe
        raise
    finally:
        receiver.close()
        reap_child(process, started, _KILL_GRACE_S)
    if message[0] == "ok":
        pages: list[Page] = message[1]
        return pages
    raise _error_from(message[1], message[2])


def _next_message(
    receiver: Connection,
    process: multiprocessing.process.BaseProcess,
    limits: LoadLimits,
    wait_s: float,
) -> tuple[Any, ...]:
    """The child's next message; ParseTimeout when none comes within `wait_s`."""
    if not receiver.poll(max(wait_s, 0.0)):
        raise ParseTimeout("no answer in time")
    try:
        message: tuple[Any, ...] = receiver.recv()
    except EOFError:
        process.join(_KILL_GRACE_S)
        if process.exitcode in LIMIT_EXIT_CODES:
            raise too_complex(limits, "cpu" if limits.max_cpu_s else "memory") from None
        raise CorruptDocument(
            f"the parser stopped unexpectedly (exit code {process.exitcode}) on this file; "
            "it may be malformed. Try a simpler export of it"
        ) from None
    return message
