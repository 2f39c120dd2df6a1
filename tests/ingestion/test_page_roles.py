"""Page roles from layout cues: synthetic pages, then a real PDF built with fpdf2."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ingestion import LoadLimits, chunk_pages
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.page_roles import detect_page_role, role_of_title
from tests.page_role_pdf import FIRST_SECTION_PAGE, INDEX_PAGE, SECTIONS, write_manual

PROSE = (
    "The pump draws water through the strainer and pushes it out of the transom fitting.\n"
    "Its motor is sealed, so it can run submerged for as long as the battery lasts, and the\n"
    "float switch starts it whenever the water rises above the mark on the housing wall.\n"
    "In 2019 the housing was changed to a glass-filled nylon that resists fuel and oil.\n"
    "Section 4 explains what the fault lamp means when it flashes two or three times.\n"
    "Replace the impeller every 500 hours, or sooner when the flow drops below 12\n"
)
CONTENTS = "Table of Contents\n" + "\n".join(
    f"{i}.{j} Topic number {i}{j} " + ". " * 30 + str(i * 10 + j)
    for i in range(1, 4)
    for j in range(3)
)
CONTENTS_NO_HEADING = "\n".join(
    f"{i} Chapter about subject {i} {'.' * 40} {i * 7}" for i in range(1, 10)
)
INDEX = "Concept index\n" + "\n".join(
    f"{word}, {n}, {n + 14}"
    for n, word in enumerate(
        ["anchor", "battery", "cable", "drain", "engine", "filter", "gasket", "hose", "impeller"],
        start=3,
    )
)
INDEX_CONTINUED = "\n".join(
    f"{word} {'. ' * 20}{n}"
    for n, word in enumerate(
        ["mean", "median", "merge", "methods", "min", "mode", "names", "ncol", "nrow"], start=11
    )
)
# The last contents page of a manual: appendix titles sort alphabetically, like index terms.
CONTENTS_OF_APPENDICES = "\n".join(
    f"Appendix {letter} {title} {'. ' * 20}{page}"
    for letter, title, page in [
        ("A", "Essential and useful other programs under a Unix-alike", 51),
        ("B", "Configuration on a Unix-alike", 55),
        ("C", "Platform notes for particular systems", 67),
        ("D", "The Windows toolset and its libraries", 75),
        ("E", "Function and variable index", 78),
        ("F", "Concept index", 79),
        ("G", "Environment variable index", 80),
    ]
)
# Last pages of an index and of a contents: a few entries under the running header or leaders.
INDEX_TAIL = "Concept Index 63\nV\nvalue . . . . . . . . . . . . 10\nvector . . . . . . . . . 3, 8"
CONTENTS_TAIL = (
    "iii\nFunction and variable index . . . . . . . . . . . . 62\n"
    "Concept index . . . . . . . . . . . . . . . . . . . . 64"
)
FIGURES = "List of Figures\n" + "\n".join(
    f"Figure {i}: Wiring diagram of circuit {i} {i + 20}" for i in range(1, 9)
)
BIBLIOGRAPHY = (
    "References\n"
    "Bates, D. M. and Watts, D. G. (1988), Nonlinear Regression Analysis. Wiley.\n"
    "Chambers, J. M. (1998), Programming with Data. Springer, New York.\n"
    "Dobson, A. J. (1990), An Introduction to Generalized Linear Models. Chapman & Hall.\n"
)
TABLE_OF_FIGURES_IN_PROSE = "Income by state\n" + "\n".join(
    f"({a},{a + 10}] 1 0 {a % 3} 2 0 1 3" for a in range(15, 85, 10)
)
NUMBERED_STEPS = "\n".join(
    f"Step {i}: tighten bolt number {i} to the torque in the table, then check it again {i}"
    for i in range(1, 9)
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CONTENTS, "contents"),
        (CONTENTS_NO_HEADING, "contents"),
        (INDEX, "index"),
        (INDEX_CONTINUED, "index"),
        (CONTENTS_OF_APPENDICES, "contents"),
        (INDEX_TAIL, "index"),
        (CONTENTS_TAIL, "contents"),
        (FIGURES, "figures"),
        (BIBLIOGRAPHY, "bibliography"),
        ("17", "blank"),
        ("This page intentionally left blank.", "blank"),
        (PROSE, None),
        (TABLE_OF_FIGURES_IN_PROSE, None),
        (NUMBERED_STEPS, None),
    ],
)
def test_roles_from_layout_cues(text: str, expected: str | None) -> None:
    assert detect_page_role(text, page_number=5, page_count=40) == expected


def test_a_cover_is_only_the_short_first_page_of_a_longer_document() -> None:
    title = "Aquaflow B-200\nOwner's Manual\nEdition 3"
    assert detect_page_role(title, page_number=1, page_count=20) == "cover"
    assert detect_page_role(title, page_number=2, page_count=20) is None
    assert detect_page_role(title, page_number=1, page_count=1) is None
    assert detect_page_role(PROSE, page_number=1, page_count=20) is None


def test_an_outline_title_names_the_role_of_a_page_without_a_heading() -> None:
    entries = "\n".join(f"{w}, {n}" for n, w in enumerate(["alpha", "beta", "gamma"] * 2, 3))
    assert detect_page_role(entries, outline_titles=["Appendix D Function and variable index"]) == (
        "index"
    )
    # The same lines as an ordinary section's destination stay content (too few for a list).
    assert detect_page_role(entries, outline_titles=["2.1 Vectors"]) is None


def test_a_heading_alone_does_not_make_a_prose_page_a_bibliography() -> None:
    assert detect_page_role("References\n" + PROSE) is None


@pytest.mark.parametrize(
    ("title", "role"),
    [
        ("Contents", "contents"),
        ("Table of Contents", "contents"),
        ("Appendix E Concept index", "index"),
        ("Appendix D: Function and variable index 103", "index"),
        ("List of Tables", "figures"),
        ("F References", "bibliography"),  # texinfo bookmarks appendices by letter alone
        ("Appendix F References", "bibliography"),
        ("Creating an index", None),
        ("R and statistics", None),
        ("2.1 Vectors and assignment", None),
    ],
)
def test_titles_that_name_a_role(title: str, role: str | None) -> None:
    assert role_of_title(title) == role


def test_real_pdf_pages_get_their_roles_and_chunks_carry_them(tmp_path: Path) -> None:
    pdf = write_manual(tmp_path / "manual.pdf")
    pages = load_pdf(pdf, LoadLimits())
    roles = {page.number: page.role for page in pages}
    assert roles[1] == "cover"
    assert roles[2] == "contents"
    assert roles[INDEX_PAGE] == "index"
    for number in range(FIRST_SECTION_PAGE, FIRST_SECTION_PAGE + len(SECTIONS)):
        assert roles[number] is None
    chunks = chunk_pages(
        pages,
        tenant_id="t",
        document_id="d",
        source="manual.pdf",
        chunk_size=800,
        chunk_overlap=100,
    )
    assert {c.page: c.page_role for c in chunks} == roles
