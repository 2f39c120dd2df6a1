"""Spreadsheets (.xlsx via openpyxl) and .csv: one table page per sheet, header kept apart.

Each data row becomes one line of the page text (cells joined by " | "), and line i is row
`first_row + i`, so a chunk's line range maps back to the rows a reader sees in the sheet.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from openpyxl import load_workbook

from app.domain import Page
from app.errors import CorruptDocument, EmptyDocument
from app.ingestion.archive import check_office_archive
from app.ingestion.loaders.text import read_text_file
from app.ingestion.normalise import normalise_line
from app.ingestion.parse_limits import CharBudget, LoadLimits, check_page_count

CELL_SEPARATOR = " | "


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return normalise_line(str(value))


def _row_line(values: Sequence[object]) -> str:
    cells = [_cell_text(v) for v in values]
    while cells and not cells[-1]:
        cells.pop()
    return CELL_SEPARATOR.join(cells)


def table_page(
    rows: Iterable[tuple[int, Sequence[object]]],
    *,
    number: int,
    label: str,
    budget: CharBudget,
) -> Page | None:
    """Build a table page from (1-based row number, values) pairs; None when it has no data."""
    header: str | None = None
    first_row = 0
    skip = 0  # empty columns left of the table, as seen in the header row
    lines: list[str] = []
    for row_number, values in rows:
        if header is None:
            line = _row_line(values)
            if line:  # the first non-empty row is the header
                skip = next(i for i, v in enumerate(values) if _cell_text(v))
                header, first_row = budget.spend(_row_line(values[skip:])), row_number + 1
            continue
        line = _row_line(values[skip:] if not any(map(_cell_text, values[:skip])) else values)
        # Keep blank rows inside the table so line i stays row first_row + i.
        lines.extend([""] * (row_number - first_row - len(lines)))
        lines.append(budget.spend(line))
    while lines and not lines[-1]:
        lines.pop()
    if header is None or not lines:
        return None
    return Page(
        number=number,
        label=label,
        text="\n".join(lines),
        kind="table",
        header=header,
        first_row=first_row,
    )


def load_xlsx(path: Path, limits: LoadLimits) -> list[Page]:
    """One table page per worksheet; the page label is the sheet name."""
    check_office_archive(path, limits, "XLSX", required="xl/workbook.xml")
    try:
        workbook = load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many types on damaged parts
        raise CorruptDocument(
            "the XLSX file is damaged and cannot be read; open it in Excel or LibreOffice, "
            "save it again and upload it"
        ) from exc
    try:
        sheets = workbook.worksheets
        check_page_count(len(sheets), limits, unit="sheets")
        budget = CharBudget(limits)
        pages: list[Page] = []
        for number, sheet in enumerate(sheets, start=1):
            rows = (
                (index, values)
                for index, values in enumerate(sheet.iter_rows(values_only=True), start=1)
            )
            try:
                page = table_page(rows, number=number, label=sheet.title, budget=budget)
            except (ValueError, TypeError, KeyError) as exc:
                raise CorruptDocument(f"sheet {sheet.title!r} of the XLSX file is damaged") from exc
            if page is not None:
                pages.append(page)
    finally:
        workbook.close()
    if not pages:
        raise EmptyDocument("the workbook has no sheet with a header row and data rows")
    return pages


def load_csv(path: Path, limits: LoadLimits) -> list[Page]:
    """A CSV file as one table page; the delimiter is sniffed (comma, semicolon, tab, pipe)."""
    text = read_text_file(path, limits)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], ",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        # Record numbers, as a spreadsheet shows them (a quoted cell may span several lines).
        rows = list(enumerate(reader, start=1))
    except csv.Error as exc:
        raise CorruptDocument(f"the CSV file cannot be parsed ({exc}); check its quoting") from exc
    page = table_page(rows, number=1, label="", budget=CharBudget(limits))
    if page is None:
        raise EmptyDocument("the CSV file has no header row with data rows under it")
    return [page]
