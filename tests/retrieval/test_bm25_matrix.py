"""The keyword index's BM25 matrix, built in array steps, is the index bm25s's own `index` builds:
the same scores to the bit, the same layout, the same vocabulary, the same search results."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from app.retrieval.bm25_matrix import build_bm25


def _corpus(seed: int, chunks: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Chunks of 1-150 tokens drawn with a skewed (Zipf-like) distribution, so tokens repeat
    within chunks and document frequencies spread from 1 to most chunks; every id is used."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 150, size=chunks)
    weights = 1.0 / np.arange(1, vocab_size + 1)
    flat = rng.choice(vocab_size, size=int(lengths.sum()), p=weights / weights.sum())
    used = np.unique(flat)
    flat = np.searchsorted(used, flat).astype(np.int32)  # compact: every id in use
    offsets = np.zeros(chunks + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    vocab = {f"w{i}": i for i in range(len(used))}
    return flat, offsets, vocab


def _by_bm25s(flat: np.ndarray, offsets: np.ndarray, vocab: dict, k1: float, b: float):
    bm25 = bm25s.BM25(k1=k1, b=b)
    chunks = [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    bm25.index((chunks, dict(vocab)), show_progress=False)
    return bm25


@pytest.mark.parametrize(
    ("seed", "chunks", "vocab_size", "k1", "b"),
    [
        (1, 1, 5, 1.5, 0.75),
        (2, 40, 30, 1.2, 0.75),
        (3, 3000, 4000, 1.5, 0.75),
        (4, 500, 50, 0.9, 0.4),
    ],
)
def test_the_matrix_is_the_one_bm25s_builds(
    seed: int, chunks: int, vocab_size: int, k1: float, b: float
) -> None:
    flat, offsets, vocab = _corpus(seed, chunks, vocab_size)
    ours, theirs = build_bm25(flat, offsets, vocab, k1, b), _by_bm25s(flat, offsets, vocab, k1, b)

    assert ours.scores["num_docs"] == theirs.scores["num_docs"] == chunks
    for key in ("data", "indices", "indptr"):
        assert ours.scores[key].dtype == theirs.scores[key].dtype, key
        assert np.array_equal(ours.scores[key], theirs.scores[key]), key
    assert ours.vocab_dict == theirs.vocab_dict  # the empty token added at the end, as bm25s does
    assert ours.unique_token_ids_set == theirs.unique_token_ids_set
    assert ours.nonoccurrence_array is None and theirs.nonoccurrence_array is None

    rng = np.random.default_rng(seed + 100)
    for _ in range(20):
        query = [f"w{i}" for i in rng.choice(len(vocab), size=3)]
        ids = np.array([vocab[w] for w in query])
        assert np.array_equal(ours.get_scores_from_ids(ids), theirs.get_scores_from_ids(ids))


def test_a_chunk_of_only_the_empty_token_scores_as_in_bm25s() -> None:
    """A chunk with no words is indexed as the empty token (`KeywordIndex` does so); the empty
    token already in the vocabulary is not added again."""
    vocab = {"": 0, "pump": 1, "valve": 2}
    flat = np.array([1, 2, 1, 0, 2], dtype=np.int32)
    offsets = np.array([0, 3, 4, 5], dtype=np.int64)
    ours, theirs = (
        build_bm25(flat, offsets, vocab, 1.5, 0.75),
        _by_bm25s(flat, offsets, vocab, 1.5, 0.75),
    )

    assert ours.vocab_dict == theirs.vocab_dict == vocab
    for key in ("data", "indices", "indptr"):
        assert np.array_equal(ours.scores[key], theirs.scores[key]), key
    # "pump" twice in chunk 0 and absent from the others: only chunk 0 scores for it.
    scores = ours.get_scores_from_ids(np.array([1]))
    assert scores[0] > 0 and scores[1] == scores[2] == 0
