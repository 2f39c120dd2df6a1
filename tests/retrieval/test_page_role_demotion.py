"""Contents and index pages repeat every heading; the retriever ranks the page that answers
above them, and still returns them (real PDF indexed the CLI's way, real Chroma, real `use`
model)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.container import Container
from app.providers.embeddings import build_embedder
from app.providers.types import Embedder, ProviderOverrides
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.services.local_files import ingest_local_file
from tests.page_role_pdf import FIRST_SECTION_PAGE, SECTIONS, write_manual

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def use_embedder() -> Embedder:
    return build_embedder(load_settings(_env_file=None, embedding_provider="use"))


@pytest.fixture
def manual_retriever(
    data_dir: Path, tmp_path: Path, use_embedder: Embedder
) -> tuple[HybridRetriever, Settings]:
    settings = load_settings(_env_file=None, data_dir=data_dir, embedding_provider="use")
    container = Container(settings, ProviderOverrides(embedder=use_embedder))
    pdf = write_manual(tmp_path / "pump-manual.pdf")
    ingest_local_file(container.document_deps, tenant_id="marina", path=pdf)
    return build_retriever(settings, use_embedder, container.corpus, None), settings


@pytest.mark.parametrize("headings", [True, False], ids=["default", "demotion-alone"])
@pytest.mark.parametrize("section", range(len(SECTIONS)))
def test_the_section_page_outranks_the_contents_page_that_repeats_its_title(
    manual_retriever: tuple[HybridRetriever, Settings], section: int, headings: bool
) -> None:
    retriever, settings = manual_retriever
    assert settings.page_role_shift > 0  # demotion is on by default
    # Heading promotion would also put the section page first; demotion must do it alone too.
    retriever.config = replace(retriever.config, promote_headings=headings)
    question = SECTIONS[section][0]
    result = retriever.search("marina", question, 10)
    pages = [(hit.chunk.page, hit.chunk.page_role) for hit in result.hits]
    assert pages[0] == (FIRST_SECTION_PAGE + section, None), pages
    # Demoted, not dropped: "where is X covered" still finds the contents page.
    assert (2, "contents") in pages


def test_without_demotion_the_contents_page_wins_some_questions(
    manual_retriever: tuple[HybridRetriever, Settings],
) -> None:
    retriever, _ = manual_retriever
    # Fused by rank (score fusion alone already keeps it off the top on this small manual).
    retriever.config = replace(
        retriever.config, page_role_shift=0, promote_headings=False, fusion="rrf"
    )
    top_pages = [retriever.search("marina", title, 5).hits[0].chunk.page for title, _ in SECTIONS]
    # What the demotion fixes: the contents page (2) repeats every title verbatim.
    assert 2 in top_pages
