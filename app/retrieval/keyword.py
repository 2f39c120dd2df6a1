"""Per-tenant BM25 keyword index, built when the tenant's chunks change and kept in memory + disk.

Library: bm25s (sparse precomputed scores). On the same tokens it ranks like rank-bm25 but
queries are ~2 orders of magnitude faster at 10k-100k chunks (bench/bm25_libraries.py).

Freshness: every snapshot records `store.corpus_version(tenant)` at the moment its chunks were
read. A query compares it with the store's current version; when they differ (an upload, replace
or delete, in this process or another one), the index is reloaded from disk if another process
already rebuilt it, else rebuilt once. The ingest path does not need to call anything; `refresh()`
exists so it can pay the rebuild up front instead of the next query.

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
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from app.retrieval.tokenizer import DEFAULT_TOKENIZER, Tokenizer
from app.storage.vector_store import VectorStore

logger = logging.getLogger(__name__)

_POINTER = "current.json"
_IDS = "chunk_ids.json"
_FORMAT = 1
# Old snapshot folders are kept this long, so another process still loading one is not broken.
_KEEP_OLD_S = 600.0


@dataclass(frozen=True)
class KeywordSnapshot:
    """An immutable BM25 index over one tenant's chunks at one corpus version."""

    tenant_id: str
    corpus_version: int
    tokenizer_version: str
    chunk_ids: tuple[str, ...]
    bm25: bm25s.BM25 | None  # None when the tenant has no chunks

    def _scores(self, tokens: list[str]) -> np.ndarray | None:
        if self.bm25 is None:
            return None
        ids = self.bm25.get_tokens_ids([t for t in tokens if t])
        if not ids:
            return None
        scores: np.ndarray = self.bm25.get_scores_from_ids(ids)
        return scores

    def search(self, tokens: list[str], limit: int) -> list[tuple[str, float]]:
        """Best `limit` (chunk id, BM25 score) pairs with a positive score, best first."""
        scores = self._scores(tokens)
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
        return len(self.bm25.get_tokens_ids(distinct)) / len(distinct)

    def containing_all(self, tokens: list[str]) -> list[str]:
        """Ids of chunks that contain every one of `tokens` (empty if any is unknown)."""
        if self.bm25 is None or not tokens:
            return []
        mask: np.ndarray | None = None
        for token in dict.fromkeys(tokens):
            ids = self.bm25.get_tokens_ids([token])
            if not ids:
                return []
            present = self.bm25.get_scores_from_ids(ids) > 0
            mask = present if mask is None else mask & present
        assert mask is not None
        return [self.chunk_ids[i] for i in np.flatnonzero(mask).tolist()]


class KeywordIndex:
    """The keyword indexes of every tenant this process has served, one per tenant."""

    def __init__(
        self,
        store: VectorStore,
        directory: Path,
        tokenizer: Tokenizer = DEFAULT_TOKENIZER,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        self._store = store
        self._directory = directory
        self.tokenizer = tokenizer
        self._k1 = k1
        self._b = b
        self._snapshots: dict[str, KeywordSnapshot] = {}
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
            snap = self._load(tenant_id, version) or self._rebuild(tenant_id, version)
            self._snapshots[tenant_id] = snap
            return snap

    def search(self, tenant_id: str, query: str, limit: int) -> list[tuple[str, float]]:
        """Best (chunk id, score) pairs of the tenant's chunks for `query`."""
        return self.snapshot(tenant_id).search(self.tokenizer(query), limit)

    def refresh(self, tenant_id: str) -> None:
        """Bring the tenant's index up to date now (optional: queries also check freshness)."""
        self.snapshot(tenant_id)

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's index from memory and disk (after the tenant is deleted)."""
        with self._lock_for(tenant_id):
            self._snapshots.pop(tenant_id, None)
            shutil.rmtree(self._tenant_dir(tenant_id), ignore_errors=True)

    def total_rebuilds(self) -> int:
        """Rebuilds from the store across all tenants since this object was made."""
        return sum(self.rebuilds.values())

    # --- internals ---

    def _is_fresh(self, snap: KeywordSnapshot | None, version: int) -> bool:
        return snap is not None and snap.corpus_version == version

    def _lock_for(self, tenant_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(tenant_id, threading.Lock())

    def _tenant_dir(self, tenant_id: str) -> Path:
        # Hashed, so a tenant id can never name a path outside the index directory.
        return self._directory / hashlib.sha256(tenant_id.encode()).hexdigest()[:32]

    def _rebuild(self, tenant_id: str, version: int) -> KeywordSnapshot:
        started = time.perf_counter()
        ids: list[str] = []
        tokens: list[list[str]] = []
        for chunk in self._store.iter_chunks(tenant_id):
            if chunk.tenant_id != tenant_id:  # a store bug must not leak text across tenants
                raise RuntimeError(f"store returned a chunk of another tenant for {tenant_id!r}")
            ids.append(chunk.id)
            tokens.append(self.tokenizer(chunk.text) or [""])
        bm25 = None
        if ids:
            bm25 = bm25s.BM25(k1=self._k1, b=self._b)
            bm25.index(tokens, show_progress=False)
        snap = KeywordSnapshot(tenant_id, version, self.tokenizer.version, tuple(ids), bm25)
        self.rebuilds[tenant_id] += 1
        try:
            self._save(snap)
        except OSError:
            logger.exception("could not persist the keyword index of a tenant; kept in memory")
        logger.info(
            "keyword index rebuilt: %d chunks, version %d, %.0f ms",
            len(ids),
            version,
            (time.perf_counter() - started) * 1000,
        )
        return snap

    def _meta(self, version: int) -> dict[str, object]:
        return {
            "format": _FORMAT,
            "corpus_version": version,
            "tokenizer": self.tokenizer.version,
            "k1": self._k1,
            "b": self._b,
        }

    def _save(self, snap: KeywordSnapshot) -> None:
        tenant_dir = self._tenant_dir(snap.tenant_id)
        folder = tenant_dir / f"v{snap.corpus_version}-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        (folder / _IDS).write_text(json.dumps(list(snap.chunk_ids)), encoding="utf-8")
        if snap.bm25 is not None:
            snap.bm25.save(str(folder), show_progress=False)
        pointer = {**self._meta(snap.corpus_version), "tenant_id": snap.tenant_id}
        pointer["folder"] = folder.name
        tmp = tenant_dir / f".{_POINTER}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps(pointer), encoding="utf-8")
        os.replace(tmp, tenant_dir / _POINTER)  # atomic: readers see the old or new pointer
        self._remove_old_folders(tenant_dir, keep=folder.name)

    def _remove_old_folders(self, tenant_dir: Path, keep: str) -> None:
        now = time.time()
        for entry in tenant_dir.iterdir():
            if entry.is_dir() and entry.name != keep:
                try:
                    if now - entry.stat().st_mtime > _KEEP_OLD_S:
                        shutil.rmtree(entry, ignore_errors=True)
                except OSError:
                    continue

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
            bm25 = bm25s.BM25.load(str(folder), show_progress=False) if ids else None
        except (OSError, ValueError):
            logger.warning("persisted keyword index unreadable; rebuilding", exc_info=True)
            return None
        self.loads[tenant_id] += 1
        return KeywordSnapshot(tenant_id, version, self.tokenizer.version, ids, bm25)
