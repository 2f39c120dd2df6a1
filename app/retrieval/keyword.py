"""Per-tenant BM25 keyword index, built when the tenant's chunks change and kept in memory + disk.

Library: bm25s (sparse precomputed scores). On the same tokens it ranks like rank-bm25 but
queries are ~2 orders of magnitude faster at 10k-100k chunks (bench/bm25_libraries.py).

Freshness: every snapshot records `store.corpus_version(tenant)` at the moment its chunks were
read. A query compares it with the store's current version; when they differ (an upload, replace
or delete, in this process or another one), the index is reloaded from disk if another process
already rebuilt it, else rebuilt once. The ingest path does not need to call anything; `refresh()`
exists so it can pay the rebuild up front instead of the next query.

Incremental: a snapshot keeps every chunk's tokens as ids into its vocabulary, so a rebuild
lists the tenant's chunk ids, reads and tokenizes only chunks it has not seen, and re-scores
the whole tenant from token ids (BM25's idf and length norms are corpus-wide, so scores are
recomputed; tokenizing, which cost ~75% of a rebuild, is not repeated). The kept chunks' token
ids are gathered and the matrix scored in array steps (`app/retrieval/bm25_matrix.py`, the
index bm25s itself builds), so a rebuild spends little time holding the GIL.

Thread safety: a snapshot is immutable and replaced whole, so a query sees the old or the new
index, never half of one; rebuilds of one tenant are serialised by that tenant's lock.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import bm25s
import numpy as np

from app.domain import Chunk, indexed_text
from app.memory import HotMap
from app.retrieval.bm25_matrix import build_bm25
from app.retrieval.corpus_reader import CorpusReader
from app.text.tokenizer import DEFAULT_TOKENIZER, Tokenizer

logger = logging.getLogger(__name__)

_POINTER = "current.json"
_IDS = "chunk_ids.json"
_TOKENS = "token_ids.npz"
_FORMAT = 2
_READ_BATCH = 1000  # chunk texts fetched per store call when only some are new
_LIST_ATTEMPTS = 5  # listings tried for one whose chunks all still exist when read
# Old snapshot folders are kept this long, so another process still loading one is not broken,
# but never more than `keep_snapshots` folders per tenant: refreshes must not fill the disk.
_KEEP_OLD_S = 600.0


@dataclass(frozen=True)
class KeywordSnapshot:
    """An immutable BM25 index over one tenant's chunks at one corpus version."""

    tenant_id: str
    corpus_version: int
    tokenizer_version: str
    chunk_ids: tuple[str, ...]
    bm25: bm25s.BM25 | None  # None when the tenant has no chunks
    # Chunk i's tokens are token_ids[token_offsets[i]:token_offsets[i + 1]], ids into
    # bm25.vocab_dict; None for a snapshot persisted without them (then rebuilt in full).
    token_ids: np.ndarray | None = None
    token_offsets: np.ndarray | None = None
    # A snapshot loaded from disk leaves its token ids there until a rebuild asks for them:
    # searches never need them, and reading them was ~15% of a cold tenant's keyword load.
    tokens_file: Path | None = None
    # The script census persisted with the snapshot; None: counted from the vocabulary.
    known_scripts: frozenset[str] | None = None
    # A search scope's chunks (`scoped`): only they are scored, counted and matched.
    mask: np.ndarray | None = None

    def scoped(self, mask: np.ndarray) -> KeywordSnapshot:
        """This snapshot seen through a scope: a chunk outside `mask` scores nothing, so it is
        never cut into the top, counted or matched exactly."""
        return replace(self, mask=mask, known_scripts=self.scripts)

    def tokens(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every chunk's token ids, as (ids, offsets): chunk i's are ids[offsets[i]:offsets[i +
        1]], into `bm25.vocab_dict`. None when the snapshot has none (or its persisted file is
        gone or unreadable: the caller then rebuilds in full)."""
        token_ids, offsets = self.token_ids, self.token_offsets
        if (token_ids is None or offsets is None) and self.tokens_file is not None:
            try:
                token_ids, offsets = _load_tokens(self.tokens_file, len(self.chunk_ids))
            except (OSError, ValueError, KeyError):
                logger.warning("persisted token ids unreadable; rebuilding in full", exc_info=True)
                return None
        if token_ids is None or offsets is None:
            return None
        return token_ids, offsets

    def _scores(
        self, tokens: list[str], weights: Mapping[str, float] | None = None
    ) -> np.ndarray | None:
        if self.bm25 is None:
            return None
        if weights and any(t in weights for t in tokens):
            return self._weighted_scores(tokens, weights)
        ids = self.bm25.get_tokens_ids([t for t in tokens if t])
        if not ids:
            return None
        scores: np.ndarray = self.bm25.get_scores_from_ids(ids)
        if self.mask is not None:
            scores = np.where(self.mask, scores, 0.0)
        return scores

    def _weighted_scores(
        self, tokens: list[str], weights: Mapping[str, float]
    ) -> np.ndarray | None:
        """BM25 as a sum over the query's tokens, each token's part times its weight (1 for a
        token `weights` does not name)."""
        groups: dict[float, list[str]] = {}
        for t in tokens:
            groups.setdefault(weights.get(t, 1.0), []).append(t)
        total: np.ndarray | None = None
        for weight, group in groups.items():
            part = self._scores(group) if weight > 0 else None
            if part is not None:
                total = weight * part if total is None else total + weight * part
        return total

    def search(
        self, tokens: list[str], limit: int, weights: Mapping[str, float] | None = None
    ) -> list[tuple[str, float]]:
        """Best `limit` (chunk id, BM25 score) pairs with a positive score, best first;
        `weights`: the share of its weight a token keeps (the others keep all of it)."""
        scores = self._scores(tokens, weights)
        if scores is None or limit <= 0:
            return []
        limit = min(limit, len(scores))
        top = np.argpartition(-scores, limit - 1)[:limit]
        # Stable tie-break on position so equal scores rank the same way every time.
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(self.chunk_ids[i], float(scores[i])) for i in order if scores[i] > 0]

    def coverage(self, tokens: list[str]) -> float:
        """Share of the distinct query tokens that occur in this tenant's chunks (0..1)."""
        distinct = list(dict.fromkeys(t for t in tokens if t))
        if self.bm25 is None or not distinct:
            return 0.0
        if self.mask is not None:
            return sum(self.chunk_count(t) > 0 for t in distinct) / len(distinct)
        return len(self.bm25.get_tokens_ids(distinct)) / len(distinct)

    @cached_property
    def scripts(self) -> frozenset[str]:
        """The scripts the tenant's text is written in (each at least 2% of its vocabulary)."""
        if self.bm25 is None:
            return frozenset()
        if self.known_scripts is not None:
            return self.known_scripts
        counts = Counter(token_script(word) for word in self.bm25.vocab_dict)
        total = sum(counts.values())
        return frozenset(script for script, n in counts.items() if n >= 0.02 * total)

    def foreign_share(self, tokens: list[str]) -> float:
        """Share of the query's word tokens written in a script the tenant's text does not use
        (an Arabic question over English documents: close to 1)."""
        words = [t for t in dict.fromkeys(tokens) if t and token_script(t) != "digits"]
        if self.bm25 is None or not words:
            return 0.0
        return sum(token_script(t) not in self.scripts for t in words) / len(words)

    def containing_all(self, tokens: list[str]) -> list[str]:
        """Ids of chunks that contain every one of `tokens` (empty if any is unknown)."""
        if self.bm25 is None or not tokens:
            return []
        mask: np.ndarray | None = None
        for token in dict.fromkeys(tokens):
            ids = self.bm25.get_tokens_ids([token])
            if not ids:
                return []
            present = self._scores([token])
            assert present is not None
            present = present > 0
            mask = present if mask is None else mask & present
        assert mask is not None
        return [self.chunk_ids[i] for i in np.flatnonzero(mask).tolist()]

    @property
    def size(self) -> int:
        """How many chunks a search looks at (those of the scope, if any)."""
        return int(np.count_nonzero(self.mask)) if self.mask is not None else len(self.chunk_ids)

    def chunk_count(self, token: str) -> int:
        """How many of the tenant's chunks hold `token` (0 when none does or it is unknown)."""
        if self.bm25 is None or not token:
            return 0
        ids = self.bm25.get_tokens_ids([token])
        if not ids:
            return 0
        if self.mask is not None:
            scores = self._scores([token])
            return 0 if scores is None else int(np.count_nonzero(scores > 0))
        indptr = self.bm25.scores["indptr"]  # column-compressed: one column per token id
        return int(indptr[ids[0] + 1] - indptr[ids[0]])


class KeywordIndex:
    """The keyword indexes of the tenants this process served most recently, one per tenant.

    At most `hot_tenants` snapshots stay in memory (least recently used go first); an evicted
    tenant's next query loads its persisted snapshot from disk, or rebuilds it if the corpus
    changed meanwhile, so eviction costs time, never correctness. The per-tenant locks and
    counters are a few hundred bytes each and are kept (dropping a lock another thread holds
    would let two threads rebuild one tenant's folder at once)."""

    def __init__(
        self,
        store: CorpusReader,
        directory: Path,
        tokenizer: Tokenizer = DEFAULT_TOKENIZER,
        k1: float = 1.2,
        b: float = 0.75,
        keep_snapshots: int = 2,
        section_paths: bool = True,
        hot_tenants: int = 64,
        after_eviction: Callable[[], None] | None = None,
    ) -> None:
        if keep_snapshots < 1:
            raise ValueError("keep_snapshots must be at least 1 (the current snapshot)")
        # after_eviction: e.g. give the freed memory back to the OS
        evicted = None if after_eviction is None else (lambda _t, _s: after_eviction())
        self._keep_snapshots = keep_snapshots
        self._section_paths = section_paths  # index each chunk's section path with its text
        self._store = store
        self._directory = directory
        self.tokenizer = tokenizer
        self._k1 = k1
        self._b = b
        self._snapshots: HotMap[str, KeywordSnapshot] = HotMap(hot_tenants, on_evict=evicted)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.rebuilds: Counter[str] = Counter()  # tenant -> full rebuilds from the store
        self.loads: Counter[str] = Counter()  # tenant -> loads from disk

    # --- public API ---

    def snapshot(self, tenant_id: str) -> KeywordSnapshot:
        """The tenant's index at the store's current corpus version (rebuilt only if stale)."""
        version = self._store.corpus_version(tenant_id)
        current = self._snapshots.get(tenant_id)
        if self._is_fresh(current, version):
            assert current is not None
            return current
        with self._lock_for(tenant_id):
            version = self._store.corpus_version(tenant_id)
            current = self._snapshots.get(tenant_id)
            if self._is_fresh(current, version):
                assert current is not None
                return current
            snap = self._load(tenant_id, version) or self._rebuild(tenant_id, version, current)
            self._snapshots.put(tenant_id, snap)
            return snap

    @property
    def hot_tenants(self) -> list[str]:
        """The tenants whose snapshots are in memory, least recently used first."""
        return self._snapshots.keys()

    @property
    def evictions(self) -> int:
        """Snapshots dropped from memory to stay within the bound."""
        return self._snapshots.evictions

    def search(self, tenant_id: str, query: str, limit: int) -> list[tuple[str, float]]:
        """Best (chunk id, score) pairs of the tenant's chunks for `query`."""
        return self.snapshot(tenant_id).search(self.tokenizer(query), limit)

    def refresh(self, tenant_id: str) -> None:
        """Bring the tenant's index up to date now (optional: queries also check freshness)."""
        self.snapshot(tenant_id)

    # --- internals ---

    def _is_fresh(self, snap: KeywordSnapshot | None, version: int) -> bool:
        return snap is not None and snap.corpus_version == version

    def _lock_for(self, tenant_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(tenant_id, threading.Lock())

    def _tenant_dir(self, tenant_id: str) -> Path:
        # Hashed, so a tenant id can never name a path outside the index directory.
        return self._directory / hashlib.sha256(tenant_id.encode()).hexdigest()[:32]

    def _rebuild(
        self, tenant_id: str, version: int, previous: KeywordSnapshot | None = None
    ) -> KeywordSnapshot:
        started = time.perf_counter()
        known = _TokenSource.empty()  # the previous snapshot's chunks and their token ids
        vocab: dict[str, int] = {}
        if (
            previous is not None
            and previous.bm25 is not None
            and previous.tokenizer_version == self.tokenizer.version
        ):
            tokens = previous.tokens()
            if tokens is not None:
                known = _TokenSource(previous.chunk_ids, *tokens)
                vocab = _chunk_vocabulary(previous.bm25)
        ids: list[str] = []
        # Where each chunk's tokens are: its place in the previous snapshot, or -1 - its place
        # in `fresh` (read and tokenized now).
        where: list[int] = []
        fresh: list[np.ndarray] = []
        for cid, chunk in self._current_chunks(tenant_id, known.position):
            ids.append(cid)
            place = known.position.get(cid)
            if place is None:
                assert chunk is not None
                words = self.tokenizer(indexed_text(chunk, self._section_paths)) or [""]
                fresh.append(
                    np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.int32)
                )
                place = -len(fresh)
            where.append(place)
        flat, offsets = known.gathered(np.array(where, dtype=np.int64), fresh)
        snap = _index(
            tenant_id, version, self.tokenizer.version, ids, flat, offsets, vocab, self._k1, self._b
        )
        read = len(fresh)
        self.rebuilds[tenant_id] += 1
        try:
            self._save(snap)
        except OSError:
            logger.exception("could not persist the keyword index of a tenant; kept in memory")
        logger.info(
            "keyword index rebuilt: %d chunks (%d read and tokenized), version %d, %.0f ms",
            len(ids),
            read,
            version,
            (time.perf_counter() - started) * 1000,
        )
        return snap

    def _current_chunks(
        self, tenant_id: str, known: Mapping[str, int]
    ) -> Iterator[tuple[str, Chunk | None]]:
        """(id, chunk) for every chunk the tenant has now; the chunk is None where its tokens are
        already `known` (only the others' texts are read from the store)."""
        if not known:
            for chunk in self._store.iter_chunks(tenant_id):
                yield chunk.id, _owned(chunk, tenant_id)
            return
        fetched: dict[str, Chunk] = {}
        for _ in range(_LIST_ATTEMPTS):
            current = self._store.chunk_ids(tenant_id)
            missing = [cid for cid in current if cid not in known and cid not in fetched]
            for begin in range(0, len(missing), _READ_BATCH):
                batch = self._store.get_chunks(
                    tenant_id=tenant_id, ids=missing[begin : begin + _READ_BATCH]
                )
                fetched.update((chunk.id, _owned(chunk, tenant_id)) for chunk in batch)
            if all(cid in known or cid in fetched for cid in current):
                break
            # A listed chunk was deleted before its text was read: a document was replaced in
            # between, so list again rather than index half of it.
        for cid in current:
            if cid in known:
                yield cid, None
            elif cid in fetched:  # else deleted since it was listed: the next version drops it
                yield cid, fetched[cid]

    def _meta(self, version: int) -> dict[str, object]:
        return {
            "format": _FORMAT,
            "corpus_version": version,
            "tokenizer": self.tokenizer.version,
            "k1": self._k1,
            "b": self._b,
            "section_paths": self._section_paths,
        }

    def _save(self, snap: KeywordSnapshot) -> None:
        tenant_dir = self._tenant_dir(snap.tenant_id)
        folder = tenant_dir / f"v{snap.corpus_version}-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        (folder / _IDS).write_text(json.dumps(list(snap.chunk_ids)), encoding="utf-8")
        if snap.bm25 is not None:
            snap.bm25.save(str(folder), show_progress=False)
        if snap.token_ids is not None and snap.token_offsets is not None:
            np.savez(folder / _TOKENS, ids=snap.token_ids, offsets=snap.token_offsets)
        pointer = {**self._meta(snap.corpus_version), "tenant_id": snap.tenant_id}
        pointer["folder"] = folder.name
        pointer["scripts"] = sorted(snap.scripts)  # older snapshots lack it: counted on load
        tmp = tenant_dir / f".{_POINTER}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps(pointer), encoding="utf-8")
        os.replace(tmp, tenant_dir / _POINTER)  # atomic: readers see the old or new pointer
        self._remove_old_folders(tenant_dir, keep=folder.name)

    def _remove_old_folders(self, tenant_dir: Path, keep: str) -> None:
        # The current folder stays, then the newest others while younger than _KEEP_OLD_S, up
        # to `keep_snapshots` folders in all; a reader that loses its folder rebuilds (`_load`).
        now = time.time()
        others: list[tuple[float, Path]] = []
        for entry in tenant_dir.iterdir():
            if entry.is_dir() and entry.name != keep:
                try:
                    others.append((entry.stat().st_mtime, entry))
                except OSError:
                    continue
        others.sort(reverse=True)
        for rank, (mtime, entry) in enumerate(others, start=1):
            if rank >= self._keep_snapshots or now - mtime > _KEEP_OLD_S:
                shutil.rmtree(entry, ignore_errors=True)

    def _load(self, tenant_id: str, version: int) -> KeywordSnapshot | None:
        pointer_path = self._tenant_dir(tenant_id) / _POINTER
        try:
            pointer = json.loads(pointer_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        expected = {**self._meta(version), "tenant_id": tenant_id}
        if any(pointer.get(key) != value for key, value in expected.items()):
            return None
        folder = pointer_path.parent / str(pointer["folder"])
        try:
            ids = tuple(json.loads((folder / _IDS).read_text(encoding="utf-8")))
            # mmap: the score arrays are paged in as queries touch them, not copied up front.
            bm25 = bm25s.BM25.load(str(folder), show_progress=False, mmap=True) if ids else None
        except (OSError, ValueError, KeyError):
            logger.warning("persisted keyword index unreadable; rebuilding", exc_info=True)
            return None
        scripts = pointer.get("scripts")
        self.loads[tenant_id] += 1
        return KeywordSnapshot(
            tenant_id,
            version,
            self.tokenizer.version,
            ids,
            bm25,
            tokens_file=folder / _TOKENS,
            known_scripts=frozenset(scripts) if isinstance(scripts, list) else None,
        )


def token_script(token: str) -> str:
    """ "arabic", "latin" (any other letters) or "digits" (no letters): the script of a token."""
    for ch in token:
        if "\u0600" <= ch <= "\u06ff" or "\u0750" <= ch <= "\u077f":
            return "arabic"
        if ch.isalpha():
            return "latin"
    return "digits"


def _owned(chunk: Chunk, tenant_id: str) -> Chunk:
    if chunk.tenant_id != tenant_id:  # a store bug must not leak text across tenants
        raise RuntimeError(f"store returned a chunk of another tenant for {tenant_id!r}")
    return chunk


def _index(
    tenant_id: str,
    version: int,
    tokenizer_version: str,
    ids: list[str],
    flat: np.ndarray,
    offsets: np.ndarray,
    vocab: dict[str, int],
    k1: float,
    b: float,
) -> KeywordSnapshot:
    """BM25 over the chunks' token ids (chunk i's: flat[offsets[i]:offsets[i + 1]]); the
    vocabulary is compacted to the tokens still used, so words of deleted chunks neither linger
    nor count as present in `coverage`."""
    if not ids:
        return KeywordSnapshot(tenant_id, version, tokenizer_version, (), None)
    used = np.bincount(flat, minlength=len(vocab)) > 0
    if not used.all():
        new_id = (np.cumsum(used) - 1).astype(np.int32)
        vocab = {word: int(new_id[old]) for word, old in vocab.items() if used[old]}
        flat = new_id[flat]
    bm25 = build_bm25(flat, offsets, vocab, k1, b)
    return KeywordSnapshot(tenant_id, version, tokenizer_version, tuple(ids), bm25, flat, offsets)


def _chunk_vocabulary(bm25: bm25s.BM25) -> dict[str, int]:
    """The ids of the words chunks hold: the index's vocabulary without the empty token bm25s
    adds for queries (an id past the matrix's last column), so that a rebuild that only adds
    chunks finds every id in use and need not compact the vocabulary."""
    vocab = dict(bm25.vocab_dict)
    if vocab.get("", 0) >= len(bm25.scores["indptr"]) - 1:
        del vocab[""]
    return vocab


@dataclass(frozen=True)
class _TokenSource:
    """The token ids of a previous snapshot's chunks, to be gathered for the chunks kept."""

    chunk_ids: tuple[str, ...]
    token_ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def empty(cls) -> _TokenSource:
        return cls((), np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64))

    @cached_property
    def position(self) -> dict[str, int]:
        """Each chunk id's place in the previous snapshot."""
        return {cid: i for i, cid in enumerate(self.chunk_ids)}

    def gathered(self, where: np.ndarray, fresh: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(token ids, offsets) of the chunks in order, chunk j's tokens taken from the previous
        snapshot's chunk where[j] or, where it is negative, from fresh[-1 - where[j]]; in array
        steps, with no Python step per chunk kept."""
        fresh_lengths = np.array([len(a) for a in fresh], dtype=np.int64)
        fresh_starts = len(self.token_ids) + np.cumsum(fresh_lengths) - fresh_lengths
        pool = np.concatenate([self.token_ids, *fresh]).astype(np.int32, copy=False)
        starts = np.empty(len(where), dtype=np.int64)
        lengths = np.empty(len(where), dtype=np.int64)
        kept = where >= 0
        old = where[kept]
        starts[kept] = self.offsets[old]
        lengths[kept] = self.offsets[old + 1] - self.offsets[old]
        made = -1 - where[~kept]
        starts[~kept] = fresh_starts[made]
        lengths[~kept] = fresh_lengths[made]
        offsets = np.zeros(len(where) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # Token k of the result is pool[starts[j] + (k - offsets[j])] for its chunk j.
        shift = np.repeat(starts - offsets[:-1], lengths)
        return pool[np.arange(offsets[-1], dtype=np.int64) + shift], offsets


def _load_tokens(path: Path, chunks: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The persisted token ids, or (None, None) if absent or not matching the chunk count."""
    if not path.exists():
        return None, None
    with np.load(path) as data:
        token_ids, offsets = data["ids"], data["offsets"]
    if len(offsets) != chunks + 1 or (chunks and offsets[-1] != len(token_ids)):
        return None, None
    return token_ids, offsets
