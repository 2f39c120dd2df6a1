"""Unit tests of the API's own pieces: the streaming upload receiver, file-name sanitising,
request ids and the documented schema. No model, no store."""

from __future__ import annotations

import asyncio
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rag_client.sync import document_name
from starlette.requests import ClientDisconnect, Request

from app.api.errors import ApiError
from app.api.upload import receive_uploads
from app.config import Settings
from app.ingestion import SUPPORTED_EXTENSIONS
from app.main import _safe_request_id, create_app
from app.services.sync_uploads import source_of_path
from app.services.uploads import MAX_SOURCE_CHARS, sanitise_filename

pytestmark = pytest.mark.unit

BOUNDARY = "unit-boundary"


def _request(chunks: list[bytes], headers: dict[str, str]) -> tuple[Request, list[int]]:
    """A request whose body arrives in `chunks`; the list counts how many were read."""
    read = [0]

    async def receive() -> dict[str, Any]:
        index = read[0]
        read[0] += 1
        if index < len(chunks):
            return {"type": "http.request", "body": chunks[index], "more_body": True}
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/documents",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope, receive), read


def _file_part(filename: str, payload_chunks: list[bytes]) -> list[bytes]:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        "\r\n\r\n"
    ).encode()
    return [head, *payload_chunks, f"\r\n--{BOUNDARY}--\r\n".encode()]


def _receive(request: Request, dest: Path, max_bytes: int) -> Any:
    """The one file of a one-file upload, streamed to `dest`."""
    (upload,) = asyncio.run(
        receive_uploads(
            request, dest_dir=dest, max_bytes=max_bytes, accept_suffix=SUPPORTED_EXTENSIONS
        )
    )
    return upload


MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def test_upload_is_streamed_to_a_generated_name(tmp_path: Path) -> None:
    request, _ = _request(_file_part("../../Report.TXT", [b"hello ", b"world"]), MULTIPART)
    received = _receive(request, tmp_path, max_bytes=100)
    assert received.client_filename == "../../Report.TXT"
    assert received.path.parent == tmp_path and received.path.suffix == ".txt"
    assert "Report" not in received.path.name
    assert received.path.read_bytes() == b"hello world" and received.size_bytes == 11


def test_oversize_upload_stops_reading_at_the_limit(tmp_path: Path) -> None:
    chunks = _file_part("big.txt", [b"x" * 1024] * 1000)  # 1 MB arriving in 1 KB pieces
    request, read = _request(chunks, MULTIPART)  # no Content-Length: only counting can tell
    with pytest.raises(ApiError) as caught:
        _receive(request, tmp_path, max_bytes=10 * 1024)
    assert caught.value.status == 413
    assert read[0] <= 13, f"read {read[0]} of {len(chunks)} chunks before refusing"
    assert list(tmp_path.iterdir()) == []


def test_declared_oversize_length_is_refused_before_reading(tmp_path: Path) -> None:
    request, read = _request(
        _file_part("big.txt", [b"x"]), {**MULTIPART, "Content-Length": str(10**9)}
    )
    with pytest.raises(ApiError) as caught:
        _receive(request, tmp_path, max_bytes=1000)
    assert caught.value.status == 413 and read[0] == 0


def test_client_disconnect_mid_upload_leaves_no_file(tmp_path: Path) -> None:
    sent = [0]

    async def receive() -> dict[str, Any]:
        sent[0] += 1
        if sent[0] == 1:
            return {"type": "http.request", "body": _file_part("a.txt", [])[0], "more_body": True}
        if sent[0] < 5:
            return {"type": "http.request", "body": b"partial data", "more_body": True}
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/documents",
        "headers": [(b"content-type", MULTIPART["Content-Type"].encode())],
    }
    with pytest.raises(ClientDisconnect):
        _receive(Request(scope, receive), tmp_path, max_bytes=10_000)
    assert list(tmp_path.iterdir()) == []


@given(st.text(min_size=0, max_size=400))
def test_sanitised_file_names_are_safe_display_names(raw: str) -> None:
    name = sanitise_filename(raw)
    assert name and len(name) <= MAX_SOURCE_CHARS
    assert "/" not in name and "\\" not in name
    assert not any(ord(c) < 32 or ord(c) == 127 for c in name)
    assert not name.startswith((".", " ")), "no hidden files, no leading blanks"
    assert name == sanitise_filename(name), "sanitising must be idempotent"


# Characters that reorder how the rest of a name reads: "invoice<U+202E>fdp.txt" shows in a
# list or a citation as "invoicetxt.pdf".
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.mark.parametrize("control", list(BIDI_CONTROLS))
def test_a_name_cannot_reorder_how_it_reads(control: str) -> None:
    assert sanitise_filename(f"invoice{control}fdp.txt") == "invoice_fdp.txt"
    assert source_of_path(f"bills/invoice{control}fdp.txt") == "bills/invoice_fdp.txt"
    # `rag sync` names a file the same way, or it would upload it again on every run.
    assert document_name(f"bills/invoice{control}fdp.txt") == "bills/invoice_fdp.txt"
    # Marks that only set the direction of a name in Arabic stay.
    assert sanitise_filename("\u0644\u200f\u0645.txt") == "\u0644\u200f\u0645.txt"


@given(
    st.text(alphabet=string.ascii_letters + string.digits + " -_()", min_size=1, max_size=300),
    st.sampled_from(sorted(SUPPORTED_EXTENSIONS)),
)
def test_sanitising_keeps_the_supported_suffix(stem: str, suffix: str) -> None:
    assert sanitise_filename(f"C:\\tmp\\x/{stem}{suffix.upper()}").endswith(suffix)


@given(st.one_of(st.none(), st.text(max_size=100)))
def test_request_ids_are_echoed_only_when_short_and_printable(raw: str | None) -> None:
    result = _safe_request_id(raw)
    if raw and len(raw) <= 64 and raw.isascii() and raw.isprintable():
        assert result == raw
    else:
        assert len(result) == 16 and all(c in "0123456789abcdef" for c in result)


def test_openapi_documents_the_configured_caps(settings: Settings) -> None:
    custom = settings.model_copy(update={"max_k": 7, "max_question_chars": 300, "max_page_size": 9})
    schema = create_app(custom, start_workers=False).openapi()
    models = schema["components"]["schemas"]
    for model, field in (("SearchIn", "query"), ("QueryIn", "question")):
        assert models[model]["properties"][field]["maxLength"] == 300
        ks = models[model]["properties"]["k"]["anyOf"]
        assert [o["maximum"] for o in ks if o.get("type") == "integer"] == [7]
    limit = next(
        p for p in schema["paths"]["/documents"]["get"]["parameters"] if p["name"] == "limit"
    )
    assert [o["maximum"] for o in limit["schema"]["anyOf"] if o.get("type") == "integer"] == [9]


def test_openapi_documents_the_error_body_for_every_error_status(settings: Settings) -> None:
    schema = create_app(settings, start_workers=False).openapi()
    error_ref = "#/components/schemas/ErrorOut"
    # Single sign-on's browser steps answer a person with a page (text/html), not JSON.
    pages = ("/auth/sso/{tenant}/start", "/auth/sso/callback")
    public = ("/health", "/ready", "/auth/token", "/auth/sso/options", *pages)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if not status.startswith(("4", "5")) or (path == "/ready" and status == "503"):
                    continue
                if path in pages and status != "422":  # a malformed query is JSON, as everywhere
                    assert set(response["content"]) == {"text/html"}, (method, path, status)
                    continue
                content = response["content"]["application/json"]["schema"]
                assert content == {"$ref": error_ref}, (method, path, status)
            # /auth/token and the code exchange answer 401 to wrong credentials or codes, the
            # browser steps a page when the provider's answer cannot be verified.
            says_401 = path not in public or path in ("/auth/token", "/auth/sso/exchange", *pages)
            assert ("401" in operation["responses"]) == says_401, (method, path)
