"""Section paths (contextual headers): each chunk knows the chapter › section › subsection it sits
under, from a PDF's outline, DOCX heading styles or Markdown headings; the path is indexed with
the chunk but never becomes part of the text users and the LLM see."""

from __future__ import annotations

from pathlib import Path

import docx
import pytest
from fpdf import FPDF

from app.domain import SECTION_KEY, Chunk, HeadingMark, Page, indexed_text, section_path
from app.ingestion import LoadLimits, chunk_pages, load
from app.ingestion.section_paths import SectionPaths, locate_headings, path_for_span
from tests.ingestion.ingestion_builders import ninety_five_char_lines

pytestmark = pytest.mark.unit

PROSE = " ".join(ninety_five_char_lines(30, seed=7))


def outlined_pdf(path: Path) -> Path:
    """Three pages: chapter 1 with a section that runs over the page break, then chapter 2."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.start_section("1 Installing the service", level=0)
    pdf.cell(0, 8, "1 Installing the service", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 5, PROSE[:600])
    pdf.start_section("1.1 Configuring the proxy", level=1)
    pdf.cell(0, 8, "1.1 Configuring the proxy", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 5, PROSE[600:1400])
    pdf.add_page()  # the proxy section continues here, under no heading of its own
    pdf.multi_cell(0, 5, PROSE[1400:2200])
    pdf.add_page()
    pdf.start_section("2 Backups", level=0)
    pdf.cell(0, 8, "2 Backups", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 5, PROSE[:500])
    pdf.output(str(path))
    return path


def _chunks(pages: list[Page], size: int = 400, paths: bool = True) -> list[Chunk]:
    return chunk_pages(
        pages,
        tenant_id="t",
        document_id="d",
        source="s",
        chunk_size=size,
        chunk_overlap=60,
        section_paths=paths,
    )


def test_pdf_outline_gives_each_chunk_its_path_across_page_breaks(
    tmp_path: Path, limits: LoadLimits
) -> None:
    pages = load(outlined_pdf(tmp_path / "guide.pdf"), limits)
    assert [m.title for m in pages[0].headings] == [
        "Installing the service",
        "Configuring the proxy",
    ]
    assert [m.level for m in pages[0].headings] == [1, 2]
    # The subsection mark sits where its heading line is printed, not at the top of the page.
    second = pages[0].headings[1]
    assert pages[0].text[second.offset :].startswith("1.1 Configuring the proxy")
    chunks = _chunks(pages)
    by_page = {p: [section_path(c) for c in chunks if c.page == p] for p in (1, 2, 3)}
    assert by_page[1][0] == "Installing the service"
    assert by_page[1][-1] == "Installing the service › Configuring the proxy"
    # Page 2 has no heading: the section that crossed the page break goes on.
    assert set(by_page[2]) == {"Installing the service › Configuring the proxy"}
    assert set(by_page[3]) == {"Backups"}


def test_the_path_is_indexed_but_never_part_of_the_shown_text(
    tmp_path: Path, limits: LoadLimits
) -> None:
    pages = load(outlined_pdf(tmp_path / "guide.pdf"), limits)
    for chunk in _chunks(pages):
        page_text = pages[chunk.page - 1].text
        assert chunk.text == page_text[chunk.start : chunk.end]  # citations stay exact
        section = section_path(chunk)
        assert section is not None
        assert indexed_text(chunk) == f"{section}\n{chunk.text}"
    proxy = [c for c in _chunks(pages) if c.page == 2]
    assert proxy and all("Configuring the proxy" not in c.text for c in proxy)


def test_chunk_ids_are_stable_on_reingest_and_change_with_the_path(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = outlined_pdf(tmp_path / "guide.pdf")
    first, again = _chunks(load(path, limits)), _chunks(load(path, limits))
    assert [c.id for c in first] == [c.id for c in again]  # re-ingesting is an upsert
    assert len({c.id for c in first}) == len(first)
    # Without paths (a corpus ingested before them) the same text has other ids: re-ingesting
    # such a document replaces its chunks instead of keeping old vectors under the same id.
    plain = _chunks(load(path, limits), paths=False)
    assert [c.text for c in plain] == [c.text for c in first]
    assert not {c.id for c in plain} & {c.id for c in first}
    assert all(SECTION_KEY not in c.metadata for c in plain)


def test_docx_heading_styles_give_the_path(tmp_path: Path, limits: LoadLimits) -> None:
    document = docx.Document()
    document.add_heading("Refunds", level=1)
    document.add_paragraph("Refunds are issued within 14 days of the request. " * 3)
    document.add_heading("Card payments", level=2)
    document.add_paragraph("A card refund appears on the statement after five working days. " * 3)
    document.add_heading("Shipping", level=1)
    document.add_paragraph("Parcels leave the warehouse every weekday at noon. " * 3)
    path = tmp_path / "policy.docx"
    document.save(str(path))
    pages = load(path, limits)
    assert [(m.level, m.title) for m in pages[0].headings] == [
        (1, "Refunds"),
        (2, "Card payments"),
        (1, "Shipping"),
    ]
    paths = {section_path(c): c.text for c in _chunks(pages, size=200)}
    assert "five working days" in paths["Refunds › Card payments"]
    assert "every weekday at noon" in paths["Shipping"]


def test_markdown_headings_give_the_path_and_code_fences_do_not(
    tmp_path: Path, limits: LoadLimits
) -> None:
    text = (
        "# Operations\n\nIntro text for operators of the service.\n\n"
        "## 2.1 Restarting\n\nRestart the worker with the systemctl command shown below.\n\n"
        "```sh\n# not a heading: a shell comment\nsystemctl restart rag-worker\n```\n\n"
        "### Logs\n\nLogs are kept for thirty days under the data directory.\n"
    )
    path = tmp_path / "ops.md"
    path.write_text(text, encoding="utf-8")
    pages = load(path, limits)
    assert [(m.level, m.title) for m in pages[0].headings] == [
        (1, "Operations"),
        (2, "Restarting"),  # the section number is left out of the path
        (3, "Logs"),
    ]
    chunks = _chunks(pages, size=120)
    logs = [c for c in chunks if "thirty days" in c.text]
    assert section_path(logs[-1]) == "Operations › Restarting › Logs"
    assert "Operations" not in logs[-1].text


def test_plain_text_has_no_path(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("# not markdown\nA plain text file keeps its chunks as they were.\n")
    chunks = _chunks(load(path, limits))
    assert all(section_path(c) is None and indexed_text(c) == c.text for c in chunks)


def test_a_heading_not_found_in_the_text_keeps_the_order_of_the_sections() -> None:
    marks = locate_headings("Alpha\nbody\nGamma\nmore", [(1, "Alpha"), (2, "Beta"), (2, "Gamma")])
    assert [(m.offset, m.title) for m in marks] == [(0, "Alpha"), (0, "Beta"), (11, "Gamma")]


def test_a_chunk_takes_the_section_most_of_it_belongs_to() -> None:
    page = Page(1, "1", "x" * 100, headings=(HeadingMark(30, 1, "A"), HeadingMark(80, 2, "B")))
    regions = SectionPaths().enter(page)
    assert regions == [(0, ""), (30, "A"), (80, "A › B")]
    assert path_for_span(regions, 0, 60) == "A"  # 30 chars before A, 30 in A: the later wins
    assert path_for_span(regions, 0, 50) == ""
    assert path_for_span(regions, 0, 20) == ""
    assert path_for_span(regions, 60, 100) == "A › B"


KEYS_INTRO = (
    "Signing keys prove that a token was issued by this service and not forged. The signing "
    "keys live in the vault, one pair per deployment, and only administrators can read them. "
)
ROTATION_STEPS = (
    "Generate a new pair with the keytool command, upload the public half to the admin "
    "console, wait one hour for every node to fetch it, then delete the old pair. Nodes that "
    "were offline fetch the new half when they start. "
)
OPERATIONS = (
    "Logs are kept for a month. Backups run at night and are copied to a second region; a "
    "restore takes about an hour for a tenant of average size. "
)


def key_rotation_pdf(path: Path) -> Path:
    """Chapter "Signing keys" opens on page 1; its section "How to rotate" fills page 2, whose
    steps never say "signing keys": only the chapter above them does."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.start_section("4 Signing keys", level=0)
    pdf.multi_cell(0, 7, "4 Signing keys\n" + KEYS_INTRO * 3, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.start_section("4.1 How to rotate", level=1)
    pdf.multi_cell(0, 7, "4.1 How to rotate\n" + ROTATION_STEPS * 2, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.start_section("5 Operations", level=0)
    pdf.multi_cell(0, 7, "5 Operations\n" + OPERATIONS * 3, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


@pytest.mark.integration
def test_a_question_in_the_headings_words_finds_the_page_under_them(
    data_dir: Path, tmp_path: Path
) -> None:
    from app.config import load_settings
    from app.container import Container
    from app.services.local_files import ingest_local_file

    question = "How do I rotate the signing keys?"
    pdf = key_rotation_pdf(tmp_path / "admin.pdf")
    top_pages = {}
    for paths in (False, True):
        settings = load_settings(
            _env_file=None,
            data_dir=data_dir / str(paths),
            embedding_provider="use",
            section_paths="both" if paths else "off",
            # What the path does to the keyword arm shows under rank fusion; the default blend
            # keeps the dense arm's first (here the chapter page) on top either way.
            fusion="rrf",
        )
        container = Container(settings)
        ingest_local_file(container.document_deps, tenant_id="ops", path=pdf)
        hits = container.retriever.search("ops", question, 5).hits
        top_pages[paths] = [hit.chunk.page for hit in hits]
        if paths:
            assert hits[0].chunk.text.startswith("4.1 How to rotate")  # shown text: no chapter
    assert top_pages[True][0] == 2
    assert top_pages[False][0] != 2  # without the chapter above them, the steps lose


@pytest.mark.parametrize("paths", [True, False])
def test_the_keyword_arm_matches_the_path_only_when_it_indexes_it(
    tmp_path: Path, limits: LoadLimits, paths: bool
) -> None:
    from app.retrieval.keyword import KeywordIndex
    from tests.fakes import FakeEmbedder
    from tests.retrieval.memory_store import memory_corpus

    embedder = FakeEmbedder()
    corpus = memory_corpus(tmp_path / "rows", embedder)
    chunks = _chunks(load(outlined_pdf(tmp_path / "guide.pdf"), limits))
    corpus.replace_documents(
        tenant_id="t", documents=[("d", chunks, embedder.embed_documents([c.text for c in chunks]))]
    )
    index = KeywordIndex(corpus, tmp_path / "keyword", section_paths=paths)
    # "proxy" is printed on page 1 only; page 2 sits under that section without saying it.
    pages = {
        c.page
        for c in corpus.get_chunks(
            tenant_id="t", ids=[cid for cid, _ in index.search("t", "proxy", 20)]
        )
    }
    assert pages == ({1, 2} if paths else {1})
