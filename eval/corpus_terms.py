"""Terms a tenant's own corpus offers for a question worded in other words than the manual's.

Three sources, each needing nothing but the tenant's chunks, its keyword index and the shipped
embedder (eval/corpus_bridge.py measures them):

- `sentences`: the corpus's sentences nearest to the question by the embedder; their rare words
  the question does not hold ("send everything R prints to a file" is near "sink() will divert
  all subsequent output from the console to an external file", whose rare word is `sink`).
- `titles`: the outline's section titles nearest to the question by the embedder; the words
  that distinguish that section's chunks from the rest of the corpus.
- `cooccur`: words that share chunks with the question's rare words, more than their own
  frequency would have them do.

Every term is scored by how near its unit is (or how often it shares chunks) times its inverse
chunk frequency; a word more than `MAX_SHARE` of the chunks hold is never a term.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.domain import Chunk, section_path
from app.retrieval.function_words import QUESTION_PRONOUNS
from app.retrieval.keyword import KeywordSnapshot

# A word held by more of the tenant's chunks than this share names no feature.
MAX_SHARE = 0.05
# A sentence (a unit of the `sentences` source) is cut to this many words; shorter than
# MIN_WORDS, it is left out (a code line, a page number).
MAX_WORDS = 60
MIN_WORDS = 4
# The distinguishing words kept per section (the `titles` source).
SECTION_TERMS = 20

Tokenizer = Callable[[str], list[str]]


def sentences_of(chunks: Sequence[Chunk]) -> list[str]:
    """The chunks' sentences, white space folded, each once, in corpus order."""
    found: dict[str, None] = {}
    for chunk in chunks:
        text = " ".join(chunk.text.split())
        for sentence in re.split(r"(?<=[.!?;:])\s+", text):
            words = sentence.split()
            if len(words) >= MIN_WORDS:
                found.setdefault(" ".join(words[:MAX_WORDS]), None)
    return list(found)


def sections_of(chunks: Sequence[Chunk]) -> dict[str, list[Chunk]]:
    """Section path -> its chunks (chunks without a path left out)."""
    out: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        path = section_path(chunk)
        if path:
            out[path].append(chunk)
    return dict(out)


@dataclass
class CorpusWords:
    """How many of the tenant's chunks hold each word, from its keyword index."""

    snapshot: KeywordSnapshot
    tokenizer: Tokenizer

    def __post_init__(self) -> None:
        self.chunks = max(len(self.snapshot.chunk_ids), 1)
        self._counts: dict[str, int] = {}

    def count(self, token: str) -> int:
        """Chunks holding `token` (cached)."""
        found = self._counts.get(token)
        if found is None:
            found = self._counts[token] = self.snapshot.chunk_count(token)
        return found

    def idf(self, token: str) -> float:
        """Inverse chunk frequency of a term candidate; 0 for a word no chunk or too many hold."""
        n = self.count(token)
        if n == 0 or n > MAX_SHARE * self.chunks or len(token) < 2:
            return 0.0
        return math.log((self.chunks - n + 0.5) / (n + 0.5))


def _top(scores: dict[str, float], question: set[str], count: int) -> list[str]:
    kept = {t: s for t, s in scores.items() if s > 0 and t not in question}
    return sorted(kept, key=lambda t: (-kept[t], t))[:count]


@dataclass
class UnitBridge:
    """Units (sentences or section titles) embedded by the shipped embedder, each with the
    terms it offers and their weights; a question's terms come from its nearest units."""

    vectors: np.ndarray  # one unit-length row per unit
    unit_terms: list[dict[str, float]]

    def terms(
        self, question_vector: Sequence[float], question: set[str], units: int, count: int
    ) -> list[str]:
        """The `count` best terms of the `units` units nearest to the question."""
        if not len(self.unit_terms):
            return []
        similarity = self.vectors @ np.asarray(question_vector, dtype=np.float32)
        nearest = np.argsort(-similarity)[:units]
        scores: dict[str, float] = defaultdict(float)
        for i in nearest.tolist():
            for term, weight in self.unit_terms[i].items():
                scores[term] += max(float(similarity[i]), 0.0) * weight
        return _top(scores, question, count)


def sentence_terms(sentences: Sequence[str], words: CorpusWords) -> list[dict[str, float]]:
    """Each sentence's candidate terms, weighted by their inverse chunk frequency."""
    out = []
    for sentence in sentences:
        tokens = dict.fromkeys(words.tokenizer(sentence))
        out.append({t: idf for t in tokens if (idf := words.idf(t)) > 0})
    return out


def section_terms(sections: dict[str, list[Chunk]], words: CorpusWords) -> list[dict[str, float]]:
    """Each section's distinguishing terms: share of the section's tokens times inverse chunk
    frequency, the best SECTION_TERMS, scaled so the best weighs its idf."""
    out = []
    for chunks in sections.values():
        counts = Counter(t for c in chunks for t in words.tokenizer(c.text))
        total = max(sum(counts.values()), 1)
        scored = {t: n / total * idf for t, n in counts.items() if (idf := words.idf(t)) > 0}
        best = sorted(scored, key=lambda t: -scored[t])[:SECTION_TERMS]
        top = scored[best[0]] if best else 1.0
        out.append({t: scored[t] / top * words.idf(t) for t in best})
    return out


@dataclass
class CooccurrenceBridge:
    """Terms sharing chunks with the question's rare words, from the keyword index's tokens."""

    words: CorpusWords
    chunk_tokens: list[frozenset[str]]  # per chunk of the snapshot, in its order

    @classmethod
    def build(cls, words: CorpusWords) -> CooccurrenceBridge:
        """Every chunk's distinct tokens, read from the snapshot's token ids."""
        snapshot = words.snapshot
        assert snapshot.bm25 is not None
        vocabulary = {i: t for t, i in snapshot.bm25.vocab_dict.items()}
        stored = snapshot.tokens()
        assert stored is not None, "the keyword snapshot keeps its token ids"
        ids, offsets = stored
        chunk_tokens = [
            frozenset(vocabulary[int(t)] for t in ids[offsets[i] : offsets[i + 1]])
            for i in range(len(snapshot.chunk_ids))
        ]
        return cls(words, chunk_tokens)

    def terms(self, question_tokens: Sequence[str], count: int) -> list[str]:
        """The `count` terms most over-represented in the chunks holding a rare question word:
        per such word, the share of its chunks holding the term, less the term's share of all
        chunks, times the term's inverse chunk frequency; summed over the words."""
        question = set(question_tokens)
        rare = [t for t in question if t not in QUESTION_PRONOUNS and self.words.idf(t) > 0]
        scores: dict[str, float] = defaultdict(float)
        for word in rare:
            holding = [tokens for tokens in self.chunk_tokens if word in tokens]
            if len(holding) < 2:
                continue
            together = Counter(t for tokens in holding for t in tokens)
            for term, n in together.items():
                if n < 2:
                    continue
                idf = self.words.idf(term)
                lift = n / len(holding) - self.words.count(term) / self.words.chunks
                if idf > 0 and lift > 0:
                    scores[term] += lift * idf
        return _top(scores, question, count)
