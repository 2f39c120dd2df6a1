"""A file that needs more memory than the parse child may use fails its job as
`document_too_complex`, through the real app and worker, and nothing of it is indexed."""

from __future__ import annotations

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiFactory
from tests.large_pdf import large_uncompressed_pdf

pytestmark = pytest.mark.integration


def test_a_document_over_the_parse_memory_limit_fails_its_job_clearly(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(parse_max_memory_mb=64)  # below what the parse child needs for a PDF
    user = api.add_user("parse-limits")
    job = api.upload_and_wait(user, "manual.pdf", large_uncompressed_pdf())
    assert job["status"] == "failed"
    assert job["error"].startswith("document_too_complex:")
    assert "64 MB of memory" in job["error"]
    document = api.client.get(f"/documents/{job['document_id']}", headers=user.headers).json()
    assert document["status"] == "failed" and document["chunks"] == 0
    assert api.client.get("/stats", headers=user.headers).json()["chunks"] == 0
    assert api.uploads_left() == []
    # Plain text is parsed in the worker itself (linear, capped) and is not affected.
    assert api.upload_and_wait(user, "notes.txt", text_document("Pump notes."))["status"] == "done"
