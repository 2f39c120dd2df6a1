"""The one tokenizer used for both indexed chunks and queries.

Unicode-aware and lower-cased; punctuation is stripped at token edges but kept inside a token, so
identifiers stay whole: `SR-33?` -> `sr-33`, `6672WN5504`, `4.2`, `v1.2` are single tokens.
Arabic is normalised first (diacritics, tatweel, alef forms, and the measured optional steps).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import asdict, dataclass

from app.text import arabic

# A run of word characters, optionally joined by single inner punctuation marks. Edge
# punctuation never matches, so it is stripped; `\w` is Unicode-aware (Arabic letters, digits).
_TOKEN = re.compile(r"\w+(?:[-./:'’+@&_]\w+)*")
_SPLIT_JOINERS = re.compile(r"[-/_]")
_POSSESSIVE = ("'s", "’s")

# A short list of English function words; used only when `english_stopwords` is on.
_STOPWORD_TEXT = (
    "a an and are as at be by for from has have in is it its of on or that the to was were "
    "which with what who whom when where why how did do does this these those"
)
ENGLISH_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_MAX_CACHED_WORDS = 200_000


@dataclass(frozen=True)
class TokenizerOptions:
    """Which normalisations run; the defaults are the ones measured to help."""

    ta_marbuta: bool = True
    alef_maqsura: bool = True
    hamza_carriers: bool = False  # no measurable effect on XQuAD-ar / ARCD
    arabic_digits: bool = True
    arabic_article: bool = True
    arabic_waw: bool = True
    split_compounds: bool = True
    english_stopwords: bool = True


class Tokenizer:
    """Turns text into matching tokens; call it on documents and queries alike."""

    def __init__(self, options: TokenizerOptions | None = None) -> None:
        self.options = options or TokenizerOptions()
        digest = hashlib.sha256(repr(sorted(asdict(self.options).items())).encode())
        # Persisted indexes record this; a changed tokenizer forces a rebuild instead of a
        # silent mismatch between indexed and query tokens.
        self.version = "tok2-" + digest.hexdigest()[:12]
        self._table = arabic.normalisation_table(
            ta_marbuta=self.options.ta_marbuta,
            alef_maqsura=self.options.alef_maqsura,
            hamza_carriers=self.options.hamza_carriers,
            arabic_digits=self.options.arabic_digits,
        )
        # Word -> its index tokens. Text repeats words, so most words are looked up, not redone;
        # cleared when full, so memory stays bounded whatever the tenant uploads.
        self._words: dict[str, tuple[str, ...]] = {}

    def normalise(self, text: str) -> str:
        """Character-level normalisation: NFKC, case folding, Arabic variants."""
        return unicodedata.normalize("NFKC", text).casefold().translate(self._table)

    def __call__(self, text: str) -> list[str]:
        """The tokens of `text`, in order."""
        tokens: list[str] = []
        words = self._words
        for word in _TOKEN.findall(self.normalise(text)):
            found = words.get(word)
            if found is None:
                if len(words) >= _MAX_CACHED_WORDS:
                    words.clear()
                found = words[word] = self._word_tokens(word)
            tokens.extend(found)
        return tokens

    def _word_tokens(self, token: str) -> tuple[str, ...]:
        """The index tokens of one normalised word: none for a stopword, several for compounds."""
        opts = self.options
        while token.endswith(_POSSESSIVE) and len(token) > 2:
            token = token[:-2]
        if opts.english_stopwords and token in ENGLISH_STOPWORDS:
            return ()
        if opts.arabic_waw:
            token = arabic.strip_waw(token)
        if opts.arabic_article:
            token = arabic.strip_article(token)
        if opts.split_compounds and _SPLIT_JOINERS.search(token):
            return (token, *(part for part in _SPLIT_JOINERS.split(token) if part))
        return (token,)


DEFAULT_TOKENIZER = Tokenizer()


def tokenize(text: str) -> list[str]:
    """Tokenize with the default (measured) options."""
    return DEFAULT_TOKENIZER(text)
