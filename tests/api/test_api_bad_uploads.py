"""Bad documents that pass the type check end as failed jobs with an actionable message, and
their upload file is removed; the service keeps working for everyone afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from app.storage.tables import ChunkRow
from testkit.builders import (
    BILLION_LAUGHS,
    BILLION_LAUGHS_REF,
    binary_blob,
    corrupt_pdf,
    docx_document,
    docx_zip_bomb,
    encrypted_pdf,
    external_entity,
    image_only_pdf,
    pptx_document,
    text_document,
    with_entity,
)
from tests.api.harness import ApiHarness, ApiUser

pytestmark = pytest.mark.integration

# file name, content, words the message must contain (what went wrong and what to do)
BAD_DOCUMENTS: dict[str, tuple[str, Callable[[], bytes], tuple[str, ...]]] = {
    "corrupt-pdf": ("scan.pdf", corrupt_pdf, ("damaged", "corrupt")),
    "encrypted-pdf": ("locked.pdf", encrypted_pdf, ("password",)),
    "empty-txt": ("empty.txt", lambda: b"", ("empty",)),
    "empty-pdf": ("empty.pdf", lambda: b"", ("empty",)),
    "whitespace-txt": ("blank.txt", lambda: b" \n\t\n  \n", ("empty", "text")),
    "docx-zip-bomb": ("bomb.docx", docx_zip_bomb, ("zip bomb", "compression")),
    "binary-txt": ("notes.txt", binary_blob, ("binary", "utf-8")),
    "image-only-pdf": ("photo.pdf", image_only_pdf, ("ocr", "text")),
    "docx-not-a-zip": ("renamed.docx", lambda: b"plain text renamed to docx", ("not a valid",)),
}


@pytest.fixture(scope="module")
def victim(api: ApiHarness) -> ApiUser:
    return api.add_user("bad-uploads")


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_a_bad_document_fails_its_job_with_an_actionable_message(
    api: ApiHarness, victim: ApiUser, case: str
) -> None:
    filename, build, words = BAD_DOCUMENTS[case]
    response = api.upload(victim, filename, build())
    assert response.status_code == 202, response.text
    job = api.wait_for_job(victim, response.json()["job_id"])
    assert job["status"] == "failed", job
    message = job["error"]
    assert message and len(message) > 20
    assert any(word in message.lower() for word in words), message
    assert "Traceback" not in message and "internal error" not in message
    assert job["chunks_indexed"] == 0
    assert api.uploads_left() == [], "the upload file must be removed when its job fails"
    document = api.client.get(f"/documents/{job['document_id']}", headers=victim.headers)
    assert document.status_code == 200 and document.json()["status"] == "failed"
    assert document.json()["chunks"] == 0


OFFICE_TEXT = {
    "docx": ("word/document.xml", docx_document),
    "pptx": ("ppt/slides/slide1.xml", pptx_document),
}


@pytest.mark.parametrize("attack", ["billion-laughs", "external-entity"])
@pytest.mark.parametrize("kind", sorted(OFFICE_TEXT))
def test_an_office_upload_declaring_entities_fails_and_leaks_nothing(
    api: ApiHarness, tmp_path: Path, kind: str, attack: str
) -> None:
    secret = f"host-secret-{kind}-{attack}-5f2c"
    secret_file = tmp_path / "hostname"  # a local file the server process can read
    secret_file.write_text(secret)
    doctype, reference = {
        "billion-laughs": (BILLION_LAUGHS, BILLION_LAUGHS_REF),
        "external-entity": (external_entity(str(secret_file)), "&xxe;"),
    }[attack]
    part, build = OFFICE_TEXT[kind]
    hostile = with_entity(
        build("Pump P-7 is serviced yearly."), part, doctype, "yearly", f"yearly {reference}"
    )
    user = api.add_user(f"xml-{kind}-{attack}")
    response = api.upload(user, f"hostile.{kind}", hostile)
    assert response.status_code == 202, response.text
    job = api.wait_for_job(user, response.json()["job_id"])
    assert job["status"] == "failed" and job["chunks_indexed"] == 0, job
    assert kind.upper() in job["error"] and "DTD" in job["error"], job["error"]
    assert secret not in job["error"] and "lollol" not in job["error"]
    with api.container.database.session() as session:
        texts = session.scalars(select(ChunkRow.text).where(ChunkRow.tenant_id == user.tenant))
        assert not [text for text in texts if secret in text or "lollol" in text]
    assert api.search(user, secret)["results"] == []
    assert api.uploads_left() == []


def test_a_failed_replacement_keeps_the_previous_version(api: ApiHarness) -> None:
    user = api.add_user("bad-replace")
    good = api.upload_and_wait(
        user, "manual.txt", text_document("The emergency exit is behind the red door.")
    )
    assert good["status"] == "done"
    bad = api.upload_and_wait(user, "manual.txt", binary_blob())
    assert bad["status"] == "failed"
    document = api.client.get(f"/documents/{good['document_id']}", headers=user.headers).json()
    assert document["status"] == "done" and document["chunks"] == good["chunks_indexed"]
    answer = api.query(user, "Where is the emergency exit?")
    assert "red door" in answer["answer"]
    assert api.uploads_left() == []


def test_the_service_still_works_after_every_bad_upload(api: ApiHarness, victim: ApiUser) -> None:
    job = api.upload_and_wait(
        victim, "fine.txt", text_document("Visitors sign in at the front desk.")
    )
    assert job["status"] == "done" and job["chunks_indexed"] == 1
    assert "front desk" in api.query(victim, "Where do visitors sign in?")["answer"]
    ready = api.client.get("/ready")
    assert ready.status_code == 200, ready.text
    assert api.uploads_left() == []
