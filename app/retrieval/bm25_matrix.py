"""A bm25s index built from a tenant's token ids in whole-array steps.

`bm25s.BM25.index` walks the corpus document by document in Python (a `Counter`, a set
intersection and a few small arrays per chunk): at 10k chunks that was 0.46 s of a 0.6 s keyword
refresh, all of it holding the GIL, so every request of the process waited, after every upload
of a big tenant. Here the same matrix comes from one sort of (token, chunk) pairs: the term
frequencies, document frequencies and Lucene scores are array operations, and the result is the
very index `index` builds (same scores to the bit, same layout), which
`tests/retrieval/test_bm25_matrix.py` checks against `index` itself.

It builds bm25s's default scoring (Lucene's), the one `KeywordIndex` uses; the test fails if a
bm25s upgrade changes that default or the index's layout.
"""

from __future__ import annotations

import math

import bm25s
import numpy as np


def build_bm25(
    flat: np.ndarray, offsets: np.ndarray, vocab: dict[str, int], k1: float, b: float
) -> bm25s.BM25:
    """The BM25 index of chunks whose tokens are `flat[offsets[i]:offsets[i + 1]]` (ids into
    `vocab`, every id used), as `bm25s.BM25(k1=k1, b=b).index((chunks, vocab))` builds it."""
    bm25 = bm25s.BM25(k1=k1, b=b)
    n_docs, n_vocab = len(offsets) - 1, len(vocab)
    lengths = np.diff(offsets)
    pairs, tf = _counted_pairs(flat, lengths)
    token_of, chunk_of = np.divmod(pairs, n_docs)
    del pairs
    doc_freq = np.bincount(token_of, minlength=n_vocab)
    idf = _lucene_idf(doc_freq, n_docs, np.dtype(bm25.dtype))
    # bm25s's Lucene term component, in its order of operations and precision (float64, then
    # stored as float32): tf / (k1 * ((1 - b) + b * |d| / avg|d|) + tf).
    # The length part is one number per chunk, spread over its pairs.
    length_part = k1 * ((1 - b) + b * lengths / lengths.mean())
    tf32 = tf.astype(bm25.dtype)
    norm = length_part[chunk_of] + tf32
    scores = (idf[token_of] * (tf32 / norm)).astype(bm25.dtype)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(doc_freq, out=indptr[1:])
    bm25.scores = {
        "data": scores,
        "indices": chunk_of.astype(bm25.int_dtype),
        "indptr": indptr,
        "num_docs": n_docs,
    }
    bm25.nonoccurrence_array = None
    if "" not in vocab:  # what `index` adds: the empty token, scoring chunks without tokens
        vocab = {**vocab, "": max(vocab.values()) + 1}
    bm25.vocab_dict = vocab
    bm25.unique_token_ids_set = set(vocab.values())
    return bm25


def _counted_pairs(flat: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct (token, chunk) pair once, as the key token * chunks + chunk in ascending
    order (the matrix's column-major order), and how often the token occurs in the chunk.
    Sorted in place, so the peak is about two arrays of the corpus's token count."""
    keys = flat.astype(np.int64)
    keys *= len(lengths)
    keys += np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    keys.sort()
    starts = np.empty(len(keys), dtype=bool)
    starts[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=starts[1:])
    first = np.flatnonzero(starts)
    del starts
    counts = np.diff(first, append=len(keys))
    return keys[first], counts


def _lucene_idf(doc_freq: np.ndarray, n_docs: int, dtype: np.dtype) -> np.ndarray:
    """log(1 + (N - df + 0.5) / (df + 0.5)) per token, computed as bm25s does (Python's
    `math.log`, stored in `dtype`) once per distinct document frequency."""
    distinct, where = np.unique(doc_freq, return_inverse=True)
    values = np.array(
        [math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) for df in distinct.tolist()],
        dtype=dtype,
    )
    return values[where]
