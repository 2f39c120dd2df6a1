"""The cited page: PDF page pictures with the passage highlighted, any page's text with the
passage's offsets, the kept original PDF, and the 404/409/422 cases, across two tenants."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image

from testkit.builders import docx_document, pdf_document, text_document
from tests.api.harness import ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

PAGE_ONE = "Cover page of the GANNET maintenance handbook, edition 3."
PAGE_TWO = (
    "Safety first. The GANNET mast bolts are tightened to 45 newton metres with the blue "
    "torque wrench. Check the bolts again after the first storm of the season."
)


def _is_highlight(pixel: tuple[int, int, int]) -> bool:
    """A pixel of white paper tinted by the translucent yellow highlight."""
    r, g, b = pixel
    return r > 240 and 200 < g < 240 and b < 170


def _highlighted_pixels(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for pixel in image.getdata() if _is_highlight(pixel))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def owner(api: ApiHarness) -> ApiUser:
    return api.add_user("pages-a")


@pytest.fixture(scope="module")
def intruder(api: ApiHarness) -> ApiUser:
    return api.add_user("pages-b")


@pytest.fixture(scope="module")
def handbook(api: ApiHarness, owner: ApiUser) -> dict[str, Any]:
    job = api.upload_and_wait(owner, "handbook.pdf", pdf_document(PAGE_ONE, PAGE_TWO))
    assert job["status"] == "done", job
    return dict(job)


def _cited(api: ApiHarness, user: ApiUser, question: str) -> dict[str, Any]:
    answer = api.query(user, question)
    assert answer["citations"], answer
    citation: dict[str, Any] = answer["citations"][0]
    return citation


def _page_text(api: ApiHarness, user: ApiUser, passage: dict[str, Any]) -> dict[str, Any]:
    """The text of a cited or found passage's page, with the passage's offsets."""
    response = api.client.get(
        f"/documents/{passage['document_id']}/pages/{passage['page']}/text",
        params={"chunk": passage["chunk_id"]},
        headers=user.headers,
    )
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def test_a_citation_opens_its_pdf_page_with_the_passage_highlighted(
    api: ApiHarness, owner: ApiUser, handbook: dict[str, Any]
) -> None:
    citation = _cited(api, owner, "What torque are the GANNET mast bolts tightened to?")
    assert citation["page"] == 2 and len(citation["chunk_id"]) == 32
    url = f"/documents/{citation['document_id']}/pages/2.png"
    plain = api.client.get(url, headers=owner.headers)
    marked = api.client.get(url, params={"chunk": citation["chunk_id"]}, headers=owner.headers)
    for response in (plain, marked):
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(marked.content))
    assert max(image.size) <= api.settings.page_image_max_px
    assert image.size[1] > image.size[0]  # an A4 page, portrait
    assert int(marked.headers["X-Highlight-Boxes"]) >= 2  # the passage spans several lines
    assert 0.0 < float(marked.headers["X-Highlight-Top"]) < 0.2  # printed near the page's top
    assert "X-Highlight-Top" not in plain.headers
    assert _highlighted_pixels(plain.content) == 0
    assert _highlighted_pixels(marked.content) > 2000


def test_a_search_hit_opens_its_page_with_the_passage_highlighted(
    api: ApiHarness, owner: ApiUser, handbook: dict[str, Any]
) -> None:
    found = api.client.post(
        "/search", json={"query": "GANNET mast bolts torque", "k": 3}, headers=owner.headers
    )
    assert found.status_code == 200, found.text
    hit = found.json()["results"][0]
    assert hit["page"] == 2 and "45 newton metres" in hit["text"]
    page = _page_text(api, owner, hit)
    assert page["text"][page["highlight"]["start"] : page["highlight"]["end"]] == hit["text"]


def test_the_highlight_sits_where_the_passage_is_printed(
    api: ApiHarness, owner: ApiUser, handbook: dict[str, Any]
) -> None:
    citation = _cited(api, owner, "What torque are the GANNET mast bolts tightened to?")
    response = api.client.get(
        f"/documents/{citation['document_id']}/pages/2.png",
        params={"chunk": citation["chunk_id"]},
        headers=owner.headers,
    )
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    tinted = [
        (x, y)
        for y in range(0, image.height, 2)
        for x in range(0, image.width, 2)
        if _is_highlight(image.getpixel((x, y)))  # type: ignore[arg-type]
    ]
    left, top = min(x for x, _ in tinted), min(y for _, y in tinted)
    right, bottom = max(x for x, _ in tinted), max(y for _, y in tinted)
    # The tinted boxes cover printed text (dark strokes inside them), in the upper part of the
    # page where fpdf2 starts printing, and most of the text width (the passage spans lines).
    inked = sum(
        1
        for y in range(top, bottom + 1)
        for x in range(left, right + 1)
        if image.getpixel((x, y))[0] < 160  # type: ignore[index]
    )
    assert inked > 300, (left, top, right, bottom)
    assert top < image.height * 0.2
    assert right - left > image.width * 0.5


def test_page_text_shows_the_passage_in_its_surrounding_text(
    api: ApiHarness, owner: ApiUser
) -> None:
    notes = text_document(
        "Warehouse rules for the PLOVER site.",
        "Forklifts must be charged overnight in bay 7. The charger key is kept by the PLOVER "
        "shift lead.",
    )
    job = api.upload_and_wait(owner, "plover-notes.txt", notes)
    assert job["status"] == "done", job
    citation = _cited(api, owner, "Where must the PLOVER forklifts be charged?")
    assert citation["source"] == "plover-notes.txt"
    page = _page_text(api, owner, citation)
    start, end = page["highlight"]["start"], page["highlight"]["end"]
    assert "bay 7" in page["text"][start:end]
    assert page["text"].startswith("Warehouse rules")
    image = api.client.get(
        f"/documents/{citation['document_id']}/pages/1.png", headers=owner.headers
    )
    error = assert_error_body(image, 409, "page_unavailable")
    assert "not a PDF" in error["message"]


def test_another_tenants_page_is_a_404_exactly_like_a_missing_one(
    api: ApiHarness, owner: ApiUser, intruder: ApiUser, handbook: dict[str, Any]
) -> None:
    doc = handbook["document_id"]
    theirs = api.client.get(f"/documents/{doc}/pages/1.png", headers=intruder.headers)
    missing = api.client.get(
        "/documents/doc_000000000000000000000000/pages/1.png", headers=intruder.headers
    )
    assert_error_body(theirs, 404, "not_found")
    assert theirs.json() == missing.json()
    text = api.client.get(f"/documents/{doc}/pages/1/text", headers=intruder.headers)
    assert_error_body(text, 404, "not_found")
    assert api.client.get(f"/documents/{doc}/pages/1.png").status_code == 401


def test_bad_page_and_chunk_values_are_clear_errors(
    api: ApiHarness, owner: ApiUser, handbook: dict[str, Any]
) -> None:
    doc = handbook["document_id"]
    beyond = api.client.get(f"/documents/{doc}/pages/3.png", headers=owner.headers)
    assert "2 page" in assert_error_body(beyond, 404, "not_found")["message"]
    assert_error_body(api.client.get(f"/documents/{doc}/pages/0.png", headers=owner.headers), 422)
    assert_error_body(api.client.get(f"/documents/{doc}/pages/two.png", headers=owner.headers), 422)
    malformed = api.client.get(
        f"/documents/{doc}/pages/1.png", params={"chunk": "../../etc"}, headers=owner.headers
    )
    assert_error_body(malformed, 422, "validation_error")
    citation = _cited(api, owner, "What torque are the GANNET mast bolts tightened to?")
    wrong_page = api.client.get(
        f"/documents/{doc}/pages/1.png",
        params={"chunk": citation["chunk_id"]},
        headers=owner.headers,
    )
    assert "not a passage of page 1" in assert_error_body(wrong_page, 422)["message"]


def test_the_original_pdf_is_kept_until_the_document_is_deleted(
    api: ApiHarness, owner: ApiUser
) -> None:
    job = api.upload_and_wait(owner, "temporary.pdf", pdf_document("A short-lived GREBE memo."))
    doc = job["document_id"]
    kept = api.container.originals.path(tenant_id=owner.tenant, document_id=doc)
    assert kept.read_bytes().startswith(b"%PDF")
    assert api.uploads_left() == []  # the upload itself is gone; only the kept copy remains
    assert api.client.get(f"/documents/{doc}/pages/1.png", headers=owner.headers).status_code == 200
    assert api.client.delete(f"/documents/{doc}", headers=owner.headers).status_code == 204
    assert not kept.exists()
    gone = api.client.get(f"/documents/{doc}/pages/1.png", headers=owner.headers)
    assert_error_body(gone, 404, "not_found")


def test_a_docx_keeps_no_copy_and_shows_its_text(api: ApiHarness, owner: ApiUser) -> None:
    job = api.upload_and_wait(owner, "memo.docx", docx_document("The HERON memo is short."))
    doc = job["document_id"]
    assert not api.container.originals.path(tenant_id=owner.tenant, document_id=doc).exists()
    page = api.client.get(f"/documents/{doc}/pages/1/text", headers=owner.headers)
    assert page.status_code == 200 and "HERON memo" in page.json()["text"]
    assert page.json()["highlight"] is None


def test_a_replaced_pdf_never_shows_the_old_picture(api: ApiHarness, owner: ApiUser) -> None:
    first = api.upload_and_wait(owner, "notice.pdf", pdf_document("Short notice."))
    url = f"/documents/{first['document_id']}/pages/1.png"
    old = api.client.get(url, headers=owner.headers)
    assert old.status_code == 200
    assert api.client.get(url, headers=owner.headers).content == old.content  # cached, same
    second = api.upload_and_wait(
        owner,
        "notice.pdf",
        pdf_document("A much longer notice. " * 40 + "Signed, the KESTREL desk."),
    )
    assert second["document_id"] == first["document_id"] and second["status"] == "done"
    new = api.client.get(url, headers=owner.headers)
    assert new.status_code == 200 and new.content != old.content

    # More printed text: more dark pixels than the one-line picture had.
    def ink(png: bytes) -> int:
        pixels = Image.open(io.BytesIO(png)).convert("RGB").getdata()
        return sum(1 for red, _green, _blue in pixels if red < 128)  # type: ignore[misc]

    assert ink(new.content) > 5 * ink(old.content)


def test_a_pdf_that_failed_to_index_says_so_instead_of_asking_to_wait(
    api: ApiHarness, owner: ApiUser
) -> None:
    job = api.upload_and_wait(owner, "damaged.pdf", b"%PDF-1.4 this is not really a PDF")
    assert job["status"] == "failed", job
    response = api.client.get(f"/documents/{job['document_id']}/pages/1.png", headers=owner.headers)
    error = assert_error_body(response, 409, "page_unavailable")
    # Its job's reason is the one to act on; "still being indexed" would have the reader wait.
    assert "failed to index" in error["message"] and "/jobs?status=failed" in error["message"]
    assert "still being indexed" not in error["message"]
