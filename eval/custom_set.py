"""Our own small evaluation set, covering what XQuAD and ARCD lack.

- a product catalogue of near-identical items that differ only by SKU (one file per item);
- a multi-page PDF manual with roman-numeral front matter, where the answer's printed page must be
  the top hit's page;
- questions that no document answers (the relevance gate should refuse them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from pypdf.constants import PageLabelStyle


@dataclass(frozen=True)
class CustomCase:
    """A question with its gold file and printed page (None: no document answers it)."""

    question: str
    gold_source: str | None
    gold_page: str | None = None


_COLOURS = ["blue", "green", "red", "black", "white", "grey"]
_SKUS = ["AQ-500-BL", "AQ-500-GR", "AQ-500-RD", "AQ-500-BK", "AQ-500-WH", "AQ-500-GY"]
_FLOWS = [12, 14, 9, 16, 11, 13]

_MANUAL_PAGES = [
    ("i", "Preface. This manual describes the Heliostat H-7 solar tracker."),
    ("ii", "Safety notice. Never open the controller cabinet while the array is energised."),
    ("1", "Installation. Anchor the mast with six M16 bolts tightened to 180 newton metres."),
    ("2", "Calibration. The tracker aligns itself at dawn using the GPS time signal."),
    ("3", "Maintenance. Grease the slewing ring every 900 operating hours with lithium grease."),
    ("4", "Troubleshooting. Error code E-42 means the wind sensor cable is disconnected."),
]


def _product_text(sku: str, colour: str, flow: int) -> str:
    return (
        f"Aqua Pro 500 under-sink water filter. Item code {sku}. Housing colour: {colour}. "
        f"Five-stage filtration with activated carbon and a 0.5 micron membrane. "
        f"Flow rate {flow} litres per minute. Replacement cartridge every six months. "
        "Fits standard 3/8 inch connectors. Two-year warranty."
    )


def _write_manual(path: Path) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for _, text in _MANUAL_PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 8, text + " " + "Refer to the diagrams on this page. " * 3)
    raw = path.with_suffix(".raw.pdf")
    pdf.output(str(raw))
    writer = PdfWriter(clone_from=PdfReader(raw))
    writer.set_page_label(0, 1, style=PageLabelStyle.LOWERCASE_ROMAN)
    writer.set_page_label(2, len(_MANUAL_PAGES) - 1, style=PageLabelStyle.DECIMAL, start=1)
    with path.open("wb") as handle:
        writer.write(handle)
    raw.unlink()


def build_custom_set(folder: Path) -> tuple[list[CustomCase], list[Path]]:
    """Write the files into `folder` and return the questions and the files to ingest."""
    folder.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    cases: list[CustomCase] = []
    for i, (sku, colour, flow) in enumerate(zip(_SKUS, _COLOURS, _FLOWS, strict=True)):
        path = folder / f"catalogue-item-{i + 1:02d}.txt"
        path.write_text(_product_text(sku, colour, flow), encoding="utf-8")
        files.append(path)
        cases.append(CustomCase(f"What is the flow rate of item {sku}?", path.name))
        cases.append(CustomCase(f"Which housing colour does {sku} have?", path.name))
    manual = folder / "heliostat-manual.pdf"
    _write_manual(manual)
    files.append(manual)
    cases += [
        CustomCase("Which product does this manual describe?", manual.name, "i"),
        CustomCase("How many bolts anchor the mast and how tight?", manual.name, "1"),
        CustomCase("How often must the slewing ring be greased?", manual.name, "3"),
        CustomCase("What does error code E-42 mean?", manual.name, "4"),
        CustomCase("How does the tracker calibrate itself?", manual.name, "2"),
    ]
    cases += [
        CustomCase("Who won the 1966 football World Cup final?", None),
        CustomCase("What is the capital city of Mongolia?", None),
        CustomCase("How many moons does Neptune have?", None),
        CustomCase("ما هي عاصمة أستراليا؟", None),
        CustomCase("Which composer wrote the opera Carmen?", None),
    ]
    return cases, files
