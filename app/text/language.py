"""Which script a text is written in (enough to tell an Arabic question from an English one),
and which language a document is in (the `language` a search can filter on)."""

from __future__ import annotations

import re
from collections.abc import Sequence

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


# Frequent short words of each language: a text in Latin letters is of the language whose words
# it uses most (they are a large share of any running text, and rare in the others).
_COMMON_WORDS = {
    "en": "the and of to in is that for it with as on was are be this by not have from",
    "de": "der die und das ist nicht mit den von zu ein eine auf für sich des dem auch wird",
    "fr": "le la les et des est une que pour dans du pas sur qui au avec ce sont par",
    "es": "el la los las y de que en es por un una con para del se no al lo como",
    "it": "il di che la è e per un una non sono del della con si gli le da nel",
    "nl": "de het een en van is dat op te in niet met voor zijn aan ook bij er",
    "pt": "o a os as e de que em um uma para com não do da no na se por mais",
}
_WORDS_OF = {language: frozenset(words.split()) for language, words in _COMMON_WORDS.items()}
_LATIN_WORD = re.compile("[a-z\u00e0-\u00ff]+")
_SAMPLE_CHARS = 20_000
# A document's language is told from the text of its first chunks (enough running text).
LANGUAGE_CHUNKS = 20


def detect_language(text: str) -> str | None:
    """The language of a document's text as an ISO 639-1 code: `ar` when most letters are
    Arabic, else the one of en, de, fr, es, it, nl and pt whose common words it uses most;
    None when it has no letters or none of those words (a language not told apart here)."""
    sample = text[:_SAMPLE_CHARS]
    if not has_letter(sample):
        return None
    if is_mostly_arabic(sample):
        return "ar"
    words = _LATIN_WORD.findall(sample.lower())
    hits = {lang: sum(1 for w in words if w in common) for lang, common in _WORDS_OF.items()}
    best = max(hits, key=lambda lang: hits[lang])  # the first listed wins a tie
    return best if hits[best] else None


def document_language(chunk_texts: Sequence[str]) -> str | None:
    """A document's language, told from its first `LANGUAGE_CHUNKS` chunks (`detect_language`):
    what the document's record keeps, and what decides whether the English arm embeds it."""
    return detect_language(" ".join(chunk_texts[:LANGUAGE_CHUNKS]))


# A question's own words: a short English question often holds none of `_COMMON_WORDS["en"]`
# but "How do I ...", whose "do" and "a" are Portuguese common words too (detect_language told 93
# of the 544 English manual questions Portuguese).
_QUESTION_WORDS = (
    "how what which why when where who whom whose do does did can could should would will shall "
    "may i my me you your we our an a there than other"
)
_ENGLISH_QUESTION_WORDS = _WORDS_OF["en"] | frozenset(_QUESTION_WORDS.split())


def is_english_question(text: str) -> bool:
    """Whether a question goes to the English arm: mostly Latin letters, and at least as many
    English words (common and question words) as any other language's common words (no such
    word at all counts as English)."""
    if not has_latin_letter(text) or is_mostly_arabic(text):
        return False
    words = _LATIN_WORD.findall(text.lower())
    english = sum(1 for w in words if w in _ENGLISH_QUESTION_WORDS)
    other = max(sum(1 for w in words if w in common) for common in _WORDS_OF.values())
    return english >= other
