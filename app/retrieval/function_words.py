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
