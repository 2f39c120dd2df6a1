"""A real multi-page PDF manual with a cover, a contents page (dotted leaders), content pages,
an index and outline bookmarks; built with fpdf2 for the page-role tests."""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF

# (section title, body): each section on its own page, pages 3.. of the PDF.
SECTIONS = [
    (
        "Replacing the impeller of the bilge pump",
        "Close the inlet valve and drain the housing. Remove the six cover screws, pull the "
        "worn impeller off the shaft with pliers and push the new one on with its vanes bent "
        "clockwise. Grease the cover seal before closing it.",
    ),
    (
        "Calibrating the float switch",
        "Hold the float at the marked line and turn the adjuster until the relay clicks. "
        "The pump must start at 40 mm of water and stop at 15 mm.",
    ),
    (
        "Winter storage of the pump",
        "Flush the pump with fresh water, run it dry for ten seconds and store it above "
        "freezing. Disconnect the battery leads.",
    ),
    (
        "Reading the fault lamp codes",
        "Two short flashes mean the motor is blocked; three mean low battery voltage; a "
        "steady light means the float switch is stuck.",
    ),
]
# Every section page also carries general advice, as real manual pages carry more than one
# topic: the page's text is then longer than a contents line, which is what lets the contents
# page win keyword and dense matches on the title alone.
GENERAL_ADVICE = (
    "General advice. Keep this manual with the boat and read the safety notes before any work. "
    "Use only original spare parts from an authorised dealer; other parts void the warranty. "
    "Wear gloves and eye protection, and make sure nobody can switch the circuit on while you "
    "work on it. Dispose of old oil and worn parts at a marina collection point. If in doubt, "
    "ask a qualified marine engineer. Record every service in the log at the back of the book, "
    "with the date, the engine hours and the name of whoever did the work."
)
FIRST_SECTION_PAGE = 3  # 1 cover, 2 contents
INDEX_PAGE = FIRST_SECTION_PAGE + len(SECTIONS)


def _leader_line(title: str, page: int) -> str:
    return f"{title} " + ". " * max(60 - len(title) // 2, 4) + str(page)


def write_manual(path: Path) -> Path:
    """Write the manual to `path` and return it."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()  # cover
    pdf.set_font("Helvetica", size=24)
    pdf.cell(0, 20, "Aquaflow B-200", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(0, 20, "Owner's Manual", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 10, "Edition 3", new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()  # contents, repeating every section title
    pdf.start_section("Contents")
    pdf.cell(0, 8, "Contents", new_x="LMARGIN", new_y="NEXT")
    lines = [(t, FIRST_SECTION_PAGE + i) for i, (t, _) in enumerate(SECTIONS)]
    lines += [("Safety notes", 1), ("Spare parts list", 2), ("Index", INDEX_PAGE)]
    for number, (title, page) in enumerate(lines, start=1):
        pdf.cell(0, 8, _leader_line(f"{number} {title}", page), new_x="LMARGIN", new_y="NEXT")

    for i, (title, body) in enumerate(SECTIONS, start=1):
        pdf.add_page()
        pdf.start_section(f"{i} {title}")
        pdf.multi_cell(0, 7, f"{i} {title}\n{body}\n{GENERAL_ADVICE}")

    pdf.add_page()
    pdf.start_section("Index")
    pdf.cell(0, 8, "Index", new_x="LMARGIN", new_y="NEXT")
    entries = [
        "battery, 5, 6",
        "bilge pump, 3",
        "calibration, 4",
        "fault lamp, 6",
        "float switch, 4, 6",
        "impeller, 3",
        "storage, 5",
        "valve, 3",
    ]
    for entry in entries:
        pdf.cell(0, 7, entry, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path
