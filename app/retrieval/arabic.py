"""Arabic normalisation for keyword matching (never for display: chunks keep their text).

The always-on steps remove what only changes how a word is written, not which word it is:
diacritics (harakat), tatweel, and the hamza/madda forms of alef. The optional steps conflate
letters people write interchangeably; each was kept or dropped by measurement on XQuAD-ar and
ARCD (bench/tokenizer_ablation.py, numbers in bench/README.md).
"""

from __future__ import annotations

import re

# Harakat, Quranic annotation marks, superscript alef: marks that sit on a letter.
_DIACRITICS = re.compile(
    "[\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e8\u06ea-\u06ed]"
)
_TATWEEL = "\u0640"
_ALEF_FORMS = str.maketrans({"أ": "ا", "إ": "ا", "آ": "ا", "ٱ": "ا"})
_TA_MARBUTA = str.maketrans({"ة": "ه"})
_ALEF_MAQSURA = str.maketrans({"ى": "ي"})
_HAMZA_CARRIERS = str.maketrans({"ؤ": "و", "ئ": "ي"})
_ARABIC_DIGITS = str.maketrans("٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹", "01234567890123456789")

# Longest first, so "وال" is removed whole rather than leaving "ال".
_ARTICLE_PREFIXES = ("وال", "بال", "كال", "فال", "لل", "ال")
_MIN_STEM = 3


_ARABIC_LETTER = re.compile("[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff\u0750-\u077f]")
_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u024f]")


def is_mostly_arabic(text: str) -> bool:
    """Whether most letters of the text are Arabic (an Arabic question naming `DNA` still is)."""
    return len(_ARABIC_LETTER.findall(text)) > len(_LATIN_LETTER.findall(text))


def has_letter(text: str) -> bool:
    """Whether the text holds an Arabic or a Latin letter."""
    return bool(_ARABIC_LETTER.search(text) or _LATIN_LETTER.search(text))


def has_latin_letter(text: str) -> bool:
    """Whether the text holds a Latin letter."""
    return bool(_LATIN_LETTER.search(text))


def strip_diacritics(text: str) -> str:
    """Remove harakat and tatweel."""
    return _DIACRITICS.sub("", text).replace(_TATWEEL, "")


def unify_alef(text: str) -> str:
    """Write every alef form (أ إ آ ٱ) as a bare alef."""
    return text.translate(_ALEF_FORMS)


def ta_marbuta_to_ha(text: str) -> str:
    """Write ta marbuta (ة) as ha (ه), as many writers do at a word's end."""
    return text.translate(_TA_MARBUTA)


def alef_maqsura_to_ya(text: str) -> str:
    """Write alef maqsura (ى) as ya (ي)."""
    return text.translate(_ALEF_MAQSURA)


def hamza_carriers_to_letters(text: str) -> str:
    """Write hamza on waw/ya (ؤ ئ) as the bare carrier letter."""
    return text.translate(_HAMZA_CARRIERS)


def arabic_digits_to_ascii(text: str) -> str:
    """Write Arabic-Indic and Persian digits as 0-9, so `٤٢` matches `42`."""
    return text.translate(_ARABIC_DIGITS)


def strip_article(token: str) -> str:
    """Remove a leading definite article (with an attached و ب ك ف ل) from one token."""
    for prefix in _ARTICLE_PREFIXES:
        if token.startswith(prefix) and len(token) - len(prefix) >= _MIN_STEM:
            return token[len(prefix) :]
    return token


def strip_waw(token: str) -> str:
    """Remove a leading conjunction و from one token when enough of a word remains."""
    if token.startswith("و") and len(token) - 1 >= _MIN_STEM:
        return token[1:]
    return token
