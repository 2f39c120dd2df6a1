"""Streaming multipart receiver: the upload goes straight to disk and the size limit is enforced
while the body is read, so an oversize upload is refused before it is stored.

A request may carry several `file` fields (one job each); the size limit applies to all of them
together, and `reserve_slot` is called before each file after the first is written, so a tenant
over its job queue quota is refused before that file reaches the disk.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fastapi import Request
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool

from app.api.errors import ApiError
from app.services.uploads import ReceivedFile

FILE_FIELD = "file"
# A text field beside the files (a hash, a path, a label, the documents' metadata as JSON).
MAX_TEXT_FIELD_BYTES = 16 * 1024
MULTIPART_OVERHEAD = 64 * 1024  # boundaries and part headers around the file


class _Abort(Exception):
    def __init__(self, error: ApiError) -> None:
        self.error = error


@dataclass
class _PartState:
    dest_dir: Path
    max_bytes: int
    accept_suffix: frozenset[str]
    max_files: int = 1
    reserve_slot: Callable[[], object] | None = None
    text_fields: frozenset[str] = frozenset()  # the non-file fields kept (others are ignored)
    texts: dict[str, str] = field(default_factory=dict)
    text_name: str | None = None  # the text field being read
    text_value: bytearray = field(default_factory=bytearray)
    header_field: bytearray = field(default_factory=bytearray)
    header_value: bytearray = field(default_factory=bytearray)
    headers: dict[str, bytes] = field(default_factory=dict)
    handle: BinaryIO | None = None
    uploads: list[ReceivedFile] = field(default_factory=list)
    total_bytes: int = 0

    def on_part_begin(self) -> None:
        self.headers = {}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.headers[self.header_field.decode("latin-1").lower()] = bytes(self.header_value)
        self.header_field.clear()
        self.header_value.clear()

    def on_headers_finished(self) -> None:
        _, params = parse_options_header(self.headers.get("content-disposition", b""))
        if params.get(b"name") != FILE_FIELD.encode():
            name = params.get(b"name", b"").decode("utf-8", errors="replace")
            if name in self.text_fields:
                if name in self.texts:
                    raise _Abort(ApiError(422, "validation_error", f"field {name!r} given twice"))
                self.text_name = name
                self.text_value.clear()
            return
        raw_name = params.get(b"filename")
        if raw_name is None:
            raise _Abort(ApiError(422, "validation_error", "field 'file' must be a file upload"))
        filename = raw_name.decode("utf-8", errors="replace")
        suffix = Path(filename.replace("\\", "/")).suffix.lower()
        if suffix not in self.accept_suffix:
            allowed = ", ".join(sorted(self.accept_suffix))
            raise _Abort(
                ApiError(
                    415,
                    "unsupported_file_type",
                    f"files of type {suffix or '(none)'!r} are not supported; use one of {allowed}",
                )
            )
        if len(self.uploads) >= self.max_files:
            raise _Abort(
                ApiError(
                    422,
                    "validation_error",
                    f"at most {self.max_files} files per request; send the rest in another one",
                )
            )
        if self.uploads and self.reserve_slot is not None:
            self.reserve_slot()  # the first file's slot was reserved before the body was read
        path = self.dest_dir / f"{secrets.token_hex(16)}{suffix}"
        self.handle = path.open("wb")
        self.uploads.append(ReceivedFile(path=path, client_filename=filename, size_bytes=0))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.text_name is not None:
            self.text_value += data[start:end]
            if len(self.text_value) > MAX_TEXT_FIELD_BYTES:
                message = f"field {self.text_name!r} is longer than {MAX_TEXT_FIELD_BYTES} bytes"
                raise _Abort(ApiError(422, "validation_error", message))
            return
        if self.handle is None or not self.uploads:
            return
        self.uploads[-1].size_bytes += end - start
        self.total_bytes += end - start
        if self.total_bytes > self.max_bytes:
            raise _Abort(too_large(self.max_bytes))
        self.handle.write(data[start:end])

    def on_part_end(self) -> None:
        if self.text_name is not None:
            try:
                self.texts[self.text_name] = self.text_value.decode("utf-8")
            except UnicodeDecodeError:
                message = f"field {self.text_name!r} is not UTF-8 text"
                raise _Abort(ApiError(422, "validation_error", message)) from None
            self.text_name = None
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def discard(self) -> None:
        if self.handle is not None:
            self.handle.close()
        for upload in self.uploads:
            upload.path.unlink(missing_ok=True)


def upload_body_cap(max_bytes: int) -> int:
    """The largest request body an upload of at most `max_bytes` may need."""
    return max_bytes + MULTIPART_OVERHEAD


def too_large(max_bytes: int) -> ApiError:
    """The 413 error for an upload over the limit."""
    return ApiError(
        413,
        "payload_too_large",
        f"the upload is larger than the limit of {max_bytes} bytes (all files of a request "
        "together)",
    )


async def receive_uploads(
    request: Request,
    *,
    dest_dir: Path,
    max_bytes: int,
    accept_suffix: frozenset[str],
    max_files: int = 1,
    reserve_slot: Callable[[], object] | None = None,
    texts: dict[str, str] | None = None,
) -> list[ReceivedFile]:
    """Stream every multipart field `file` (at most `max_files`, `max_bytes` in all) to
    `dest_dir`, calling `reserve_slot` before each file after the first; 413/415/422 ApiError on
    bad input, and whatever `reserve_slot` raises. On any failure nothing is left on disk.

    The text fields named by the keys of `texts` (each at most once, up to 16 KiB) are read into
    it; other non-file fields are ignored."""
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise ApiError(422, "validation_error", "send multipart/form-data with a field 'file'")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > upload_body_cap(max_bytes):
        raise too_large(max_bytes)

    dest_dir.mkdir(parents=True, exist_ok=True)
    wanted = frozenset(texts or ())
    state = _PartState(dest_dir, max_bytes, accept_suffix, max_files, reserve_slot, wanted)
    callbacks = {
        name: getattr(state, name)
        for name in (
            "on_part_begin",
            "on_header_field",
            "on_header_value",
            "on_header_end",
            "on_headers_finished",
            "on_part_data",
            "on_part_end",
        )
    }
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in request.stream():
            # In a worker thread: the callbacks write files and may reserve job slots in the
            # database, neither of which may block the event loop. The stream ends with an
            # empty chunk, which needs no thread.
            if chunk:
                await run_in_threadpool(parser.write, chunk)
        parser.finalize()
    except _Abort as abort:
        state.discard()
        raise abort.error from None
    except (MultipartParseError, ValueError) as exc:
        state.discard()
        raise ApiError(422, "validation_error", f"malformed multipart body: {exc}") from None
    except BaseException:
        state.discard()
        raise
    if not state.uploads:
        raise ApiError(422, "validation_error", "field 'file' is required")
    if state.handle is not None:  # body ended inside the part
        state.discard()
        raise ApiError(422, "validation_error", "malformed multipart body: truncated file part")
    if texts is not None:
        texts.clear()
        texts.update(state.texts)
    return state.uploads
