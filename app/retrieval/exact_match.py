"""Exact-match guarantee: quoted phrases and identifier-like tokens must reach the candidates.

Dense retrieval blurs `6672WN5504` and `6672WN5505` into the same vector neighbourhood, and BM25
alone may rank a near-identical item higher. So terms a user clearly means literally — a phrase
in quotes, a code mixing digits with letters or hyphens, a number with a unit (`4.2 kg`), a
numbered reference (`No. 12`) — are looked up exactly and the chunks containing them are pinned
into the candidate set.

The work is bounded per query (`ExactLimits`, from `RAG_EXACT_*`): a query pasted with hundreds
of identifiers or quoted phrases checks the first few terms, runs a few substring scans of the
tenant's texts and fetches a bounded number of chunks to verify phrases, then stops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.retrieval.corpus_reader import TextReader
from app.retrieval.keyword import KeywordSnapshot
from app.retrieval.scope import EVERYTHING, SearchScope
from app.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from app.config import Settings

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|«([^»]+)»|„([^“”]+)[“”]|「([^」]+)」')
_NUMBERED = re.compile(r"(?<!\w)(?:no|nr|num|number)\.?\s*#?\d+\w*|#\d+\w*", re.IGNORECASE)
_UNITS = (
    "kg|g|mg|lb|lbs|oz|km|m|cm|mm|µm|nm|ft|yd|l|ml|v|kv|mv|w|kw|mw|ma|mah|wh|kwh|"
    "hz|khz|mhz|ghz|kb|mb|gb|tb|°c|°f|%|psi|bar|rpm|ms|mph|kmh|km/h"
)  # single letters that are also plain suffixes (1990s, 3D) and words (in, min) are left out
_WITH_UNIT = re.compile(rf"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:{_UNITS})(?!\w)", re.IGNORECASE)
_WORD = re.compile(r"\S+")
_EDGE_PUNCT = "\"'“”‘’«»()[]{}<>,;:!?؟،.…"
# Words with digits that are ordinary language, not identifiers: 1990s, 2nd, 3rd, 21st.
_ORDINARY = re.compile(r"^\d+(?:st|nd|rd|th|s)$", re.IGNORECASE)

MAX_EXACT_CHUNKS = 20
_VERIFY_LIMIT = 200  # chunk texts fetched to verify one phrase


@dataclass(frozen=True)
class ExactLimits:
    """How much exact-match work one query may cause."""

    max_terms: int = 16  # literal terms looked up, quoted phrases included
    max_phrases: int = 4  # quoted phrases among them
    max_scans: int = 4  # substring scans of the tenant's chunk texts (terms like `C++`, `#45`)
    verify_budget: int = 400  # chunk texts fetched to check multi-word phrases, all terms together

    @classmethod
    def from_settings(cls, settings: Settings) -> ExactLimits:
        """The exact-match limits of a Settings object."""
        return cls(
            max_terms=settings.exact_max_terms,
            max_phrases=settings.exact_max_phrases,
            max_scans=settings.exact_max_scans,
            verify_budget=settings.exact_verify_budget,
        )


def _is_identifier(word: str) -> bool:
    has_digit = any(ch.isdigit() for ch in word)
    has_letter = any(ch.isalpha() for ch in word)
    has_joiner = any(ch in "-_/" for ch in word)
    if len(word) < 2 or not has_digit or _ORDINARY.match(word):
        return False
    return has_letter or has_joiner


def exact_terms(query: str, limits: ExactLimits | None = None) -> list[str]:
    """Terms of the query meant literally, as typed, without duplicates (quoted first), at most
    `limits.max_phrases` quoted phrases and `limits.max_terms` terms in all."""
    limits = limits or ExactLimits()
    terms: list[str] = []
    rest = query
    phrases = 0
    for match in _QUOTED.finditer(query):
        phrase = next(group for group in match.groups() if group is not None).strip()
        if phrase and phrase not in terms and phrases < limits.max_phrases:
            terms.append(phrase)
            phrases += 1
        rest = rest.replace(match.group(), " ")
    for pattern in (_NUMBERED, _WITH_UNIT):
        terms += [m.group().strip() for m in pattern.finditer(rest)]
    for match in _WORD.finditer(rest):
        word = match.group().strip(_EDGE_PUNCT)
        if _is_identifier(word):
            terms.append(word)
    return list(dict.fromkeys(terms))[: limits.max_terms]


@dataclass(frozen=True)
class ExactMatch:
    """One literal term and the ids of the chunks that contain it."""

    term: str
    chunk_ids: list[str]


def _contains_sequence(haystack: list[str], needle: list[str]) -> bool:
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


def find_exact(
    tenant_id: str,
    query: str,
    snapshot: KeywordSnapshot,
    store: TextReader,
    tokenizer: Tokenizer,
    limits: ExactLimits | None = None,
    scope: SearchScope = EVERYTHING,
) -> list[ExactMatch]:
    """For each literal term of the query, the tenant's chunks that contain it.

    Matching uses the keyword tokens (so case and edge punctuation do not matter, `sr-33`
    finds `SR-33.`); a multi-token term must appear as a contiguous token sequence. A term with
    symbols at its edges (`C++`, `#45`) is first looked up as typed, by the store's substring
    search, and falls back to its tokens. Once the scans or the verification budget of `limits`
    are spent, the remaining terms use only what the keyword snapshot (in memory) can tell.
    Only chunks inside `scope` are found (the snapshot given is the scope's).
    """
    limits = limits or ExactLimits()
    scans_left = limits.max_scans
    verify_left = limits.verify_budget
    matches: list[ExactMatch] = []
    for term in exact_terms(query, limits):
        tokens = tokenizer(term)
        ids: list[str] = []
        if scans_left > 0 and (not tokens or not (term[0].isalnum() and term[-1].isalnum())):
            # Edge symbols carry meaning here (`C++`, `#45`, `.NET`) and tokens would drop them.
            # The store's substring scan is slow on big tenants, so only these terms use it.
            scans_left -= 1
            ids = [
                c.id
                for c in store.find_containing(
                    tenant_id=tenant_id,
                    text=term,
                    limit=MAX_EXACT_CHUNKS,
                    documents=scope.documents,
                    chunk_ids=scope.chunks,
                )
            ]
        if not ids and tokens:
            ids = snapshot.containing_all(tokens)
            if len(tokens) > 1 and ids:
                # A phrase counts only where its words stand together, which needs the texts.
                batch = ids[: min(_VERIFY_LIMIT, verify_left)]
                verify_left -= len(batch)
                chunks = store.get_chunks(tenant_id=tenant_id, ids=batch) if batch else []
                ids = [
                    c.id
                    for c in chunks
                    if scope.allows(c.document_id, c.id)
                    and _contains_sequence(tokenizer(c.text), tokens)
                ]
        if ids:
            matches.append(ExactMatch(term, ids))
    return matches
