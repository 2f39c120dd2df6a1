"""Arabic function words, left out when measuring how much of a query a tenant's text covers.

The keyword arm's weight scales with query coverage (app/retrieval/hybrid.py). English function
words never become tokens (the tokenizer drops them), but Arabic ones do: in an Arabic question
over English documents they count as missing words and pull the coverage of a question whose
one matching word is a number or a Latin name down to a tenth; over Arabic documents they count
as found. Leaving them out of coverage (never out of BM25 scoring) raised nDCG@10 on every
Arabic-question task, tuning and held-out questions alike (README, Evaluation).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from app.retrieval.evidence import main_script
from app.retrieval.keyword import token_script

if TYPE_CHECKING:
    from app.retrieval.keyword import KeywordSnapshot

_ARABIC = (
    "في من على إلى الى عن ما ماذا متى أين كيف كم هل لماذا لما التي الذي الذين اللذين اللتين "
    "اللاتي هو هي هم هن كان كانت يكون تكون أي اي ذلك تلك هذا هذه هؤلاء مع بين بعد قبل حتى أو او "
    "ثم لم لن قد إن ان أن لا كل بعض عند عندما منذ خلال حول ضد نحو غير سوى أيضا فقط التى"
)


@cache
def function_word_tokens(tokenizer: Callable[[str], list[str]]) -> frozenset[str]:
    """The Arabic function words as this tokenizer writes them (normalised like the query)."""
    return frozenset(token for word in _ARABIC.split() for token in tokenizer(word))


def content_tokens(tokens: list[str], tokenizer: Callable[[str], list[str]]) -> list[str]:
    """The query tokens that are not function words (all of them if nothing else is left)."""
    skip = function_word_tokens(tokenizer)
    kept = [t for t in tokens if t not in skip]
    return kept or tokens


# How a user's question speaks of its asker ("How do I ...?", "my plot", "can you ..."), not of
# what it asks about. Manuals rarely hold these words (a loop variable `i`, an option `-i`), so
# BM25 weighs them as rare and ranks such chunks first for any question worded this way.
# "us" is left in: it is also the US.
QUESTION_PRONOUNS = frozenset(
    ["i", "me", "my", "mine", "myself", "we", "our", "ours", "you", "your", "yours"]
)


def question_pronoun_weights(tokens: list[str], weight: float) -> dict[str, float]:
    """The question's first- and second-person pronouns with the share of their BM25 weight
    they keep (`weight`; 0: left out). Empty when `weight` is 1 or when the question holds
    nothing else, which is then scored whole."""
    if weight >= 1.0 or all(t in QUESTION_PRONOUNS for t in tokens):
        return {}
    return {t: weight for t in tokens if t in QUESTION_PRONOUNS}


# A word more than half the tenant's chunks hold ranks by length alone: its Robertson-Sparck Jones
# idf, log((N - n + 0.5) / (n + 0.5)), is negative past this share.
UBIQUITOUS_SHARE = 0.5


def matches_content_word(
    snapshot: KeywordSnapshot,
    tokens: list[str],
    tokenizer: Callable[[str], list[str]],
    borrowed_max_chunks: int,
) -> bool:
    """Whether the tenant's text has one of the query's content words: a number, or a word in
    the query's own script that is not a function word, held by at most half of the tenant's
    chunks; and when that script is one the text only borrows (not among
    `KeywordSnapshot.scripts`: Latin names in Arabic text, the Arabic that "ﷺ" expands to in
    English text), held by at most `borrowed_max_chunks` chunks, so that it names the chunk
    meant. Matches on function words only, on words in another script than the query's (that
    Arabic inside an English question, found in every chunk of Arabic hadith), on words most
    chunks hold, or on borrowed words many chunks hold (that Arabic inside English hadith,
    matched by an Arabic question holding الله, whatever share of the hadiths hold "ﷺ"), give
    the keyword arm nothing to go on; so does a query that matches nothing, its words in a
    script the text lacks."""
    skip = function_word_tokens(tokenizer)
    script = main_script(tokens)
    own = script in snapshot.scripts
    ubiquitous_above = UBIQUITOUS_SHARE * len(snapshot.chunk_ids)
    for t in dict.fromkeys(tokens):
        kind = token_script(t)
        if t in skip or kind not in ("digits", script):
            continue
        held_by = snapshot.chunk_count(t)
        limit = ubiquitous_above if kind == "digits" or own else borrowed_max_chunks
        if 0 < held_by <= limit:
            return True
    return False
