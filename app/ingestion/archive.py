"""Checks on zip-based documents (DOCX, PPTX, XLSX) made from the central directory alone.

Nothing is decompressed here. The declared sizes can be trusted as upper bounds: Python's
zipfile stops a member at its declared size and fails the CRC check, so a lying entry
cannot expand past what was checked.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from app.errors import CorruptDocument, EncryptedDocument, SuspiciousArchive
from app.ingestion.limits import LoadLimits

# Office files encrypted with a password are OLE compound files, not zips.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Small archives and members compress extremely well (repeated XML) without being a threat.
_RATIO_CHECK_MIN_BYTES = 1024 * 1024


def check_office_archive(path: Path, limits: LoadLimits, kind: str, required: str) -> None:
    """Refuse a DOCX/PPTX/XLSX that is not a valid zip, is encrypted, or expands abnormally."""
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
