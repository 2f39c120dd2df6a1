"""Arabic normalisation for keyword matching and embedding (never for display: chunks keep
their text).

The always-on steps remove what only changes how a word is written, not which word it is:
diacritics (harakat), tatweel, and the hamza/madda forms of alef. The optional steps conflate
letters people write interchangeably; each was kept or dropped by measurement on XQuAD-ar and
ARCD (bench/tokenizer_ablation.py, numbers in bench/README.md).
"""

from __future__ import annotations

# The bidirectional-text controls (embeddings, overrides, isolates: U+202A-202E, U+2066-2069),
# as a regex character range: they reorder how the text around them displays.
BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069"
_TATWEEL = "\u0640"
_ALEF_FORMS = {"أ": "ا", "إ": "ا", "آ": "ا", "ٱ": "ا"}
_TA_MARBUTA = {"ة": "ه"}
_ALEF_MAQSURA = {"ى": "ي"}
_HAMZA_CARRIERS = {"ؤ": "و", "ئ": "ي"}
_ARABIC_DIGITS = dict(zip("٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹", "01234567890123456789", strict=True))
# Harakat, Quranic annotation marks, superscript alef: marks that sit on a letter.
_DIACRITIC_RANGES: tuple[tuple[int, int], ...] = (
    (0x610, 0x61A),
    (0x64B, 0x65F),
    (0x670, 0x670),
    (0x6D6, 0x6DC),
    (0x6DF, 0x6E8),
    (0x6EA, 0x6ED),
)

# Longest first, so "وال" is removed whole rather than leaving "ال".
_ARTICLE_PREFIXES = ("وال", "بال", "كال", "فال", "لل", "ال")
_MIN_STEM = 3


def normalisation_table(
    *,
    ta_marbuta: bool,
    alef_maqsura: bool,
    hamza_carriers: bool,
    arabic_digits: bool,
    alef_forms: bool = True,
) -> dict[int, str | None]:
    """One `str.translate` table doing the always-on steps (diacritics, tatweel and, unless
    `alef_forms` is off, alef forms) and the chosen optional ones, so text is walked once instead
    of once per step. No step's output is another step's input, so the result equals applying
    the steps one after the other."""
    letters = dict(_ALEF_FORMS) if alef_forms else {}
    for wanted, step in (
        (ta_marbuta, _TA_MARBUTA),
        (alef_maqsura, _ALEF_MAQSURA),
        (hamza_carriers, _HAMZA_CARRIERS),
        (arabic_digits, _ARABIC_DIGITS),
    ):
        if wanted:
            letters.update(step)
    table: dict[int, str | None] = {ord(char): out for char, out in letters.items()}
    table[ord(_TATWEEL)] = None
    table.update(
        {code: None for first, last in _DIACRITIC_RANGES for code in range(first, last + 1)}
    )
    return table


# Vowel marks and tatweel only: the letters stay as written, so text without marks is unchanged.
_VOWEL_MARKS = normalisation_table(
    ta_marbuta=False,
    alef_maqsura=False,
    hamza_carriers=False,
    arabic_digits=False,
    alef_forms=False,
)


# Names the text form embedders see; vector stores record it, so a reindex knows which vectors
# were made from text with the marks still in (bump it if `strip_vowel_marks` changes).
EMBEDDED_TEXT_FORM = "arabic-vowel-marks-stripped-1"


def strip_vowel_marks(text: str) -> str:
    """`text` without Arabic diacritics (harakat, Quranic marks, superscript alef) and tatweel.

    Embedders see this form: USE places fully vowelled Arabic (Qur'an, hadith) far from the same
    words unvowelled, and triples its cross-lingual recall@10 without the marks
    (eval/diacritics_dense.py, docs/evaluation.md)."""
    return text.translate(_VOWEL_MARKS)


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
