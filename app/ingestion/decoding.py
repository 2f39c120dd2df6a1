"""Decode the bytes of a plain-text file by detection, refusing binary data and mojibake."""

from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

from app.errors import UndecodableText

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Control bytes that never occur in text (tab, LF, FF, CR and ESC aside).
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_ARABIC_LETTER = re.compile("[\u0621-\u064a]")
_LETTER = re.compile(r"[^\W\d_]")
# Non-ASCII characters that windows-1252 text normally contains: accented letters, quotes,
# dashes, the euro sign, ellipsis, and no-break space.
_WESTERN_EXTRAS = re.compile(
    "[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u2018\u2019\u201c\u201d\u2013\u2014\u20ac\u2026\u00a0\u00ab\u00bb\u00b0\u0152\u0153]*"
)
_MAX_CONTROL_RATIO = 0.01
_MAX_CHAOS = 0.2


def _undecodable(why: str) -> UndecodableText:
    return UndecodableText(
        f"the file is not readable text ({why}); save it as UTF-8 text and upload it again"
    )


def _utf16_without_bom(data: bytes) -> str | None:
    """UTF-16 without a BOM shows as NUL bytes in every other position for ASCII-range text."""
    if len(data) < 4 or len(data) % 2:
        return None
    even_nuls = data[0::2].count(0) / (len(data) // 2)
    odd_nuls = data[1::2].count(0) / (len(data) // 2)
    encoding = None
    if odd_nuls > 0.3 and even_nuls < 0.05:
        encoding = "utf-16-le"
    elif even_nuls > 0.3 and odd_nuls < 0.05:
        encoding = "utf-16-be"
    if encoding is None:
        return None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return None


def _looks_arabic(text: str) -> bool:
    letters = _LETTER.findall(text)
    return bool(letters) and len(_ARABIC_LETTER.findall(text)) / len(letters) >= 0.5


def decode_text(data: bytes) -> str:
    """Decode text: BOM, UTF-8, windows-1256 (Arabic), windows-1252, then a confident detection."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise _undecodable(f"invalid {encoding} after its byte-order mark") from exc
    if b"\x00" in data:
        text = _utf16_without_bom(data)
        if text is None:
            raise _undecodable("it contains binary data")
        return text
    if len(_CONTROL_BYTES.findall(data)) > _MAX_CONTROL_RATIO * len(data):
        raise _undecodable("it contains binary data")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # windows-1256 maps nearly every byte, so only accept it when the result reads as Arabic.
    arabic = data.decode("cp1256", errors="replace")
    if "\ufffd" not in arabic and _looks_arabic(arabic):
        return arabic
    # Western European text is the commonest legacy case, and statistical detection confuses
    # it with Central European code pages on short files ("déjà" -> "déją").
    western = data.decode("cp1252", errors="replace")
    if _WESTERN_EXTRAS.fullmatch("".join(ch for ch in western if not ch.isascii())):
        return western
    best = from_bytes(data).best()
    if best is None or best.chaos > _MAX_CHAOS:
        raise _undecodable("its character encoding could not be detected")
    return str(best)
