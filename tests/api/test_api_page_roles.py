"""/search says which hits are contents or index pages, and ranks the answering page first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.harness import ApiFactory, ApiHarness
from tests.page_role_pdf import FIRST_SECTION_PAGE, INDEX_PAGE, SECTIONS, write_manual
from tests.stage_evidence import STAGE_KEYS

pytestmark = pytest.mark.integration


def test_search_returns_page_role(api: ApiHarness, tmp_path: Path) -> None:
    user = api.add_user("roles")
    manual = write_manual(tmp_path / "pump-manual.pdf").read_bytes()
    api.upload_and_wait(user, "pump-manual.pdf", manual)
    body = api.search(user, SECTIONS[1][0], k=10)
    results = body["results"]
    roles = {r["page"]: r["page_role"] for r in results}
    assert results[0]["page"] == FIRST_SECTION_PAGE + 1
    assert results[0]["page_role"] is None
    assert roles.get(2) == "contents"  # demoted, still returned, and labelled
    assert roles.get(INDEX_PAGE, "index") == "index"
    assert all("page_role" in r for r in results)
    # The per-stage evidence keeps its shape.
    assert set(results[0]["stages"]) == STAGE_KEYS


def test_search_shows_the_section_path_as_a_breadcrumb_only(
    api_factory: ApiFactory, tmp_path: Path
) -> None:
    api = api_factory(section_paths="both")
    user = api.add_user("sections")
    manual = write_manual(tmp_path / "pump-manual.pdf").read_bytes()
    api.upload_and_wait(user, "pump-manual.pdf", manual)
    top = api.search(user, SECTIONS[1][0], k=10)["results"][0]
    assert top["page"] == FIRST_SECTION_PAGE + 1
    assert top["section"] == SECTIONS[1][0]  # the outline title, its number left out
    assert top["text"].startswith(f"2 {SECTIONS[1][0]}")  # the text is the page's own
