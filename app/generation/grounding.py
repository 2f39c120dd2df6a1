"""Checks that a citation marker points at a passage that holds what the answer claims.

A small model often writes the right fact with the wrong number (`[2]` for a fact of passage 1)
or none at all. The claim of a marker is the text written since the previous marker; its
*distinctive terms* are the tokens that are neither in the question nor in every passage (those
cannot tell passages apart). A marker is re-pointed only when the passages it names hold at most
half of those terms and another passage holds nearly all of them, or when they hold none of
them and another holds most; an answer that cites nothing gets the marker of the passage that
holds nearly all of its terms, or clearly more of them than any other passage (measured on the
natural manual questions' tuning half: a small model often writes the answer of the passage it
read and forgets the marker). Otherwise the model's choice stands: this corrects clear mistakes,
it does not second-guess close calls.

Terms alone miss a claim that paraphrases its passage or repeats the question's words ("libdbi's
own error codes are negative" names no term the question did not). With an embedder, a marker
the term rules left alone is also re-pointed when another passage is at least `EMBEDDING_LEAD`
closer to the claim (cosine) than every cited one and holds no fewer of the claim's terms; the
passages are embedded at the first marker, not before the model starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from app.providers.types import Embedder
from app.text.tokenizer import tokenize

log = logging.getLogger(__name__)

WEAK_SUPPORT = 0.5  # the cited passages hold at most this share of the claim's terms ...
STRONG_SUPPORT = 0.8  # ... and another passage holds at least this share: re-point
CLEAR_SUPPORT = 0.6  # cited passages holding none of the terms yield to one holding this share
# An uncited answer also gets the marker of a passage holding this share of its terms when no
# other passage comes within LEAD of it.
UNCITED_SUPPORT = 0.4
LEAD = 0.25
# The cosine lead another passage needs over the cited ones (chosen with the default USE
# embedder on the development manuals' tuning half; 0 turns the embedder check off). Other
# embedders' cosines spread differently (e5's sit within ~0.7-0.9, so it re-points less often).
EMBEDDING_LEAD = 0.1

# A claim -> its cosine with each passage, in passage order.
Similarity = Callable[[str], Sequence[float]]


def embedding_similarity(embedder: Embedder, passages: Sequence[str]) -> Similarity:
    """Cosine of a claim with each passage by `embedder` (its vectors are L2-normalised), the
    passages embedded once, together (one request to a remote embedder), at the first call.
    Claim and passages are both embedded as questions: a symmetric comparison, in this process
    (an embedder's passage side may be a child process busy with an upload's batch)."""
    vectors: list[np.ndarray] = []

    def similarity(claim: str) -> list[float]:
        if not vectors:
            vectors.extend(np.asarray(vector) for vector in embedder.embed_queries(list(passages)))
        query = np.asarray(embedder.embed_query(claim))
        return [float(vector @ query) for vector in vectors]

    return similarity


class CitationChecker:
    """Support of each passage (numbered from 1) for a claim, for one question."""

    def __init__(
        self, question: str, passages: Sequence[str], similarity: Similarity | None = None
    ) -> None:
        self._similarity = similarity
        self._passages = [set(tokenize(text)) for text in passages]
        shared = set.intersection(*self._passages) if self._passages else set()
        self._uninformative = set(tokenize(question)) | shared

    def _support(self, claim: str) -> list[float] | None:
        terms = set(tokenize(claim)) - self._uninformative
        if not terms:
            return None
        return [len(terms & passage) / len(terms) for passage in self._passages]

    def repoint(self, claim: str, numbers: list[int]) -> list[int]:
        """The marker numbers to show for `claim` (the model's, unless clearly wrong)."""
        support = self._support(claim)
        if support is not None:
            best = max(range(len(support)), key=support.__getitem__)
            cited = max(support[n - 1] for n in numbers)
            if cited <= WEAK_SUPPORT and support[best] >= STRONG_SUPPORT:
                return [best + 1]
            if cited == 0 and support[best] >= CLEAR_SUPPORT:
                return [best + 1]
        closer = self._closer(claim, numbers, support)
        return numbers if closer is None else [closer]

    def _closer(self, claim: str, numbers: list[int], support: list[float] | None) -> int | None:
        """The passage clearly closer to the claim by the embedder than the cited ones, when it
        holds no fewer of the claim's terms (None when there is none or no embedder)."""
        if self._similarity is None or EMBEDDING_LEAD <= 0 or not claim.strip():
            return None
        try:
            cosine = self._similarity(claim)
        except Exception:  # an embedding server down: the answer goes on with the term rules
            log.warning("citation check: the embedder failed; markers kept as the model wrote")
            self._similarity = None
            return None
        best = max(range(len(cosine)), key=cosine.__getitem__)
        if (
            best + 1 in numbers
            or cosine[best] - max(cosine[n - 1] for n in numbers) < EMBEDDING_LEAD
        ):
            return None
        if support is not None and support[best] < max(support[n - 1] for n in numbers):
            return None
        return best + 1

    def best_supported(self, answer: str) -> int | None:
        """The passage number that holds nearly all of an uncited answer's terms, or clearly
        more of them than any other passage, if one does."""
        support = self._support(answer)
        if support is None:
            return None
        best = max(range(len(support)), key=support.__getitem__)
        runner_up = max((v for i, v in enumerate(support) if i != best), default=0.0)
        if support[best] >= STRONG_SUPPORT:
            return best + 1
        if support[best] >= UNCITED_SUPPORT and support[best] - runner_up >= LEAD:
            return best + 1
        return None
