"""A PDF's outline (bookmarks) gives every chunk under it a section path and starts a new chunk
at each section, through the pipeline an upload takes with the default settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, FloatObject, NameObject, NullObject, NumberObject

from app.config import load_settings
from app.domain import Chunk, HeadingMark, Page, section_path
from app.ingestion import LoadLimits, chunk_pages, load
from app.ingestion.page_roles import detect_page_role
from app.services.blocks.pipeline import PipelineConfig, parse_file
from tests.availability import require
from tests.ingestion.ingestion_builders import ninety_five_char_lines

pytestmark = pytest.mark.unit

R_ADMIN = Path("/usr/share/R/doc/manual/R-admin.pdf")


def _prose(seed: int, lines: int) -> str:
    return " ".join(ninety_five_char_lines(lines, seed=seed))


# (level, heading printed on the page, a sentence only its section holds, prose lines)
SECTIONS = [
    (0, "1 Networking", "The gateway listens on port 8443 by default.", 6),
    (1, "1.1 Proxy settings", "Set the upstream proxy with the relay flag.", 9),
    (1, "1.2 Firewall rules", "Open the inbound range before the first sync.", 8),
    (0, "2 Storage", "Snapshots are written to the cold tier nightly.", 7),
    (1, "2.1 Quotas", "A tenant over quota is refused with code Q17.", 9),
]
PATHS = [
    "Networking",
    "Networking › Proxy settings",
    "Networking › Firewall rules",
    "Storage",
    "Storage › Quotas",
]
PREFACE = "This preface comes before any bookmark and belongs to no section."
# Printed in chapter 1's text before the heading it names: the title's first occurrence on the
# page, which is not where that section starts.
MENTION = "Proxy settings are described further down this page, after the overview."


def outlined_manual(path: Path) -> Path:
    """A preface page without a bookmark, then two chapters with two-level bookmarks; sections
    start mid-page, and chapter 1 names its subsection before that subsection's heading."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 5, PREFACE + " " + _prose(99, 8), new_x="LMARGIN", new_y="NEXT")
    for number, (level, heading, fact, lines) in enumerate(SECTIONS):
        if level == 0:
            pdf.add_page()
        # Bookmarked without its number (as gnuplot's are): the title alone is then also the
        # start of MENTION, printed earlier on the page.
        pdf.start_section(heading.split(" ", 1)[1], level=level)
        pdf.cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
        body = f"{fact} {_prose(number, lines)}"
        if number == 0:
            body = f"{body}\n{MENTION} {_prose(50, 3)}"
        pdf.multi_cell(0, 5, body, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def _parse(path: Path, section_chunks: bool = False) -> list[Chunk]:
    """The chunks an upload of the file gets with the default settings (or RAG_SECTION_CHUNKS)."""
    settings = load_settings(_env_file=None, section_chunks=section_chunks)
    config = PipelineConfig.from_settings(settings)
    return parse_file(path, tenant_id="t", source=path.name, config=config).chunks


@pytest.mark.parametrize("section_chunks", [False, True])
def test_each_chunk_carries_the_path_of_the_section_it_sits_in(
    tmp_path: Path, section_chunks: bool
) -> None:
    chunks = _parse(outlined_manual(tmp_path / "manual.pdf"), section_chunks)
    for (_, heading, fact, _), path in zip(SECTIONS, PATHS, strict=True):
        holding = [c for c in chunks if fact in c.text]
        assert holding, fact
        assert {section_path(c) for c in holding} == {path}, heading
    # The mention of "Proxy settings" in chapter 1's text is not where that section starts.
    mention = [c for c in chunks if MENTION[:40] in c.text]
    assert {section_path(c) for c in mention} == {"Networking"}


def test_pages_before_the_first_bookmark_have_no_path(tmp_path: Path) -> None:
    chunks = _parse(outlined_manual(tmp_path / "manual.pdf"))
    preface = [c for c in chunks if c.page == 1]
    assert preface and PREFACE in preface[0].text
    assert all(section_path(c) is None for c in preface)
    assert all(section_path(c) is not None for c in chunks if c.page > 1)


def test_with_section_chunks_a_chunk_never_straddles_two_sections(tmp_path: Path) -> None:
    chunks = _parse(outlined_manual(tmp_path / "manual.pdf"), section_chunks=True)
    for chunk in chunks:
        inside = [h for _, h, _, _ in SECTIONS if h in chunk.text and not chunk.text.startswith(h)]
        assert not inside, f"chunk {chunk.chunk_index} runs into {inside}"
    # Each section's first chunk starts at its heading (no overlap reaching back before it).
    starts = [c.text.split("\n")[0] for c in chunks]
    for _, heading, _, _ in SECTIONS:
        assert heading in starts


def test_the_heading_mark_sits_where_the_destination_points(
    tmp_path: Path, limits: LoadLimits
) -> None:
    pages = load(outlined_manual(tmp_path / "manual.pdf"), limits)
    chapter = pages[1]
    proxy = next(m for m in chapter.headings if m.title == "Proxy settings")
    assert chapter.text[proxy.offset :].startswith("1.1 Proxy settings")


def _with_broken_bookmarks(source: Path, target: Path) -> Path:
    """The manual plus bookmarks pointing at a page that does not exist, at a named destination
    nobody defined and at a page with a junk top coordinate."""
    writer = PdfWriter(clone_from=PdfReader(source))
    page_ref = writer.pages[2].indirect_reference
    destinations = {
        "Lost chapter": ArrayObject(
            [NumberObject(999), NameObject("/XYZ"), NullObject(), FloatObject(700), NullObject()]
        ),
        "Nowhere": NameObject("/no-such-destination"),
        "Junk top": ArrayObject([page_ref, NameObject("/FitH"), NameObject("/oops")]),
    }
    for title, destination in destinations.items():
        item = writer.add_outline_item(title=title, page_number=0).get_object()
        del item[NameObject("/A")]  # the GoTo action pypdf writes; /Dest says where instead
        item[NameObject("/Dest")] = destination
    with target.open("wb") as out:
        writer.write(out)
    return target


def test_a_bookmark_with_a_bad_destination_does_not_lose_the_document(tmp_path: Path) -> None:
    path = _with_broken_bookmarks(outlined_manual(tmp_path / "manual.pdf"), tmp_path / "broken.pdf")
    chunks = _parse(path)
    facts = {fact: section_path(c) for _, _, fact, _ in SECTIONS for c in chunks if fact in c.text}
    assert facts["A tenant over quota is refused with code Q17."] is not None
    assert facts["The gateway listens on port 8443 by default."] == "Networking"
    assert not any("Lost chapter" in (section_path(c) or "") for c in chunks)


INDEX_TAIL = "mean, 23\nmedian, 24\nmode, 31\nquantile, 40\n"


def test_an_index_bookmark_names_the_pages_it_covers() -> None:
    # The last page of an index: four entries, no heading; too few lines to tell by layout alone.
    assert detect_page_role(INDEX_TAIL, page_number=9, page_count=9) is None
    role = detect_page_role(INDEX_TAIL, page_number=9, page_count=9, section_titles=["Index"])
    assert role == "index"
    # A chapter's title does not give its pages a role.
    assert detect_page_role(INDEX_TAIL, section_titles=["Statistics"]) is None


def test_the_index_bookmark_reaches_its_later_pages(tmp_path: Path, limits: LoadLimits) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.start_section("1 Statistics", level=0)
    pdf.multi_cell(0, 5, "1 Statistics\n" + _prose(3, 12))
    pdf.add_page()
    pdf.start_section("Index", level=0)
    pdf.multi_cell(0, 5, "Index\n" + "\n".join(f"term{n:02d}, {n + 3}" for n in range(40)))
    pdf.add_page()  # the index's last page: no bookmark of its own, no heading
    pdf.multi_cell(0, 5, INDEX_TAIL)
    path = tmp_path / "indexed.pdf"
    pdf.output(str(path))
    roles = [page.role for page in load(path, limits)]
    assert roles == [None, "index", "index"]


def test_r_admin_chunks_nearly_all_carry_a_section_path() -> None:
    require(R_ADMIN.exists(), f"{R_ADMIN} (Debian package r-doc-pdf)")
    chunks = _parse(R_ADMIN)
    share = sum(section_path(c) is not None for c in chunks) / len(chunks)
    assert share >= 0.9, share


def test_a_bare_heading_joins_the_section_below_it() -> None:
    # "3 Storage" is printed right above "3.1 Quotas": no chunk may hold that title alone.
    text = "3 Storage\n3.1 Quotas\n" + _prose(4, 8) + "\n3.2 Snapshots\n" + _prose(5, 8)
    marks = (
        HeadingMark(0, 1, "Storage"),
        HeadingMark(text.index("3.1"), 2, "Quotas"),
        HeadingMark(text.index("3.2"), 2, "Snapshots"),
    )
    chunks = chunk_pages(
        [Page(1, "1", text, headings=marks)],
        tenant_id="t",
        document_id="d",
        source="s",
        chunk_size=1000,
        chunk_overlap=150,
        section_paths=True,
        section_chunks=True,
    )
    assert all(len(c.text) > 200 for c in chunks)
    assert chunks[0].text.startswith("3 Storage\n3.1 Quotas")
    assert section_path(chunks[0]) == "Storage › Quotas"
    assert [section_path(c) for c in chunks if c.text.startswith("3.2")] == ["Storage › Snapshots"]
