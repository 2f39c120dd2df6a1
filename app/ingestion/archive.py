"""Checks on zip-based documents (DOCX, PPTX, XLSX) before any parser opens them.

The size checks read the central directory alone. The declared sizes can be trusted as upper
bounds: Python's zipfile stops a member at its declared size and fails the CRC check, so a
lying entry cannot expand past what was checked. Only then is each member's XML prolog read
(up to its root element) to refuse document type declarations: Office Open XML never has one
(ECMA-376 Part 2 forbids DTDs in package parts), and a DTD is how entity expansion ("billion
laughs") and external entities (XXE, a local file read into the text) get in, whatever each
parsing library does with them.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.parsers import expat

from app.errors import CorruptDocument, EncryptedDocument, SuspiciousArchive
from app.ingestion.parse_limits import LoadLimits

# Office files encrypted with a password are OLE compound files, not zips.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Small archives and members compress extremely well (repeated XML) without being a threat.
_RATIO_CHECK_MIN_BYTES = 1024 * 1024
_PROLOG_READ_BYTES = 64 * 1024


class _Doctype(Exception):
    pass


class _RootReached(Exception):
    pass


def check_office_archive(path: Path, limits: LoadLimits, kind: str, required: str) -> None:
    """Refuse a DOCX/PPTX/XLSX that is not a valid zip, is encrypted, expands abnormally, or
    declares a DTD in any of its parts."""
    with path.open("rb") as handle:
        magic = handle.read(len(_OLE_MAGIC))
    if magic == _OLE_MAGIC:
        raise EncryptedDocument(
            f"the {kind} file is password-protected or in the old binary format; "
            f"remove the password or save it as {kind} again, then upload it"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CorruptDocument(
            f"the file is not a valid {kind} (it is not a readable zip archive); "
            f"open it in its editor, save it as {kind} again and upload it"
        ) from exc
    names = {member.filename for member in members}
    if required not in names:
        raise CorruptDocument(
            f"the file is a zip archive but not a {kind} document (no {required}); "
            f"save it as {kind} again and upload it"
        )
    total = sum(member.file_size for member in members)
    compressed = sum(member.compress_size for member in members)
    if total > limits.max_archive_bytes:
        raise SuspiciousArchive(
            f"the {kind} file would expand to {total:,} bytes, more than the limit of "
            f"{limits.max_archive_bytes:,}; it looks like a zip bomb or holds very large media. "
            "Remove embedded media or split the document"
        )
    ratio = total / max(compressed, 1) if total >= _RATIO_CHECK_MIN_BYTES else 0.0
    worst = max(
        (m for m in members if m.file_size >= _RATIO_CHECK_MIN_BYTES),
        key=lambda m: m.file_size / max(m.compress_size, 1),
        default=None,
    )
    worst_ratio = worst.file_size / max(worst.compress_size, 1) if worst else 0.0
    if max(ratio, worst_ratio) > limits.max_archive_ratio:
        raise SuspiciousArchive(
            f"the {kind} file has an abnormal compression ratio "
            f"({max(ratio, worst_ratio):.0f}:1, limit {limits.max_archive_ratio:.0f}:1), "
            "typical of a zip bomb; it was not opened"
        )
    _refuse_doctypes(path, kind)


def _refuse_doctypes(path: Path, kind: str) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            declaring = next((m for m in archive.infolist() if _declares_doctype(archive, m)), None)
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError) as exc:  # CRC, encrypted member
        raise CorruptDocument(
            f"the {kind} file is damaged (a part of it cannot be read); open it in its editor, "
            f"save it as {kind} again and upload it"
        ) from exc
    if declaring is not None:
        raise SuspiciousArchive(
            f"the {kind} file declares an XML document type (DTD) in {declaring.filename}, "
            "which Office documents never do: its entities could expand without bound or read "
            f"files of the server, so it was not opened. Save it as {kind} again from its editor"
        )


def _declares_doctype(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bool:
    """Whether the member is XML with a DOCTYPE before its root element (expat reads the
    prolog in any encoding; media and other non-XML parts stop it at once)."""
    if member.is_dir():
        return False
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def doctype(*_: object) -> None:
        raise _Doctype

    def root(*_: object) -> None:
        raise _RootReached

    parser.StartDoctypeDeclHandler = doctype
    parser.StartElementHandler = root
    with archive.open(member) as part:
        try:
            while block := part.read(_PROLOG_READ_BYTES):
                parser.Parse(block, False)
            parser.Parse(b"", True)
        except _Doctype:
            return True
        except (_RootReached, expat.ExpatError):
            return False
    return False
