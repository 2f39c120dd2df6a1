"""Chroma's Python server with its native HNSW cache bounded to a number of collections.

chromadb sizes the cache of loaded HNSW indexes at RLIMIT_NOFILE // 5 collections (200k in a
container: unbounded in practice) and offers no setting for it, so a server that has served
many tenants keeps every one's index: ~2.6 MB per small collection, measured in bench/README.md
("Chroma server memory"). The image selects this class with CHROMA_API_IMPL; the bound comes
from CHROMA_HNSW_CACHE_COLLECTIONS. An evicted collection is reloaded from disk on its next use.
"""

from __future__ import annotations

import os

from chromadb.api.rust import RustBindingsAPI
from chromadb.config import System

CACHE_VARIABLE = "CHROMA_HNSW_CACHE_COLLECTIONS"
DEFAULT_COLLECTIONS = 64


def cache_collections() -> int:
    """The configured bound; a value that is not a positive integer stops the server."""
    raw = os.environ.get(CACHE_VARIABLE, str(DEFAULT_COLLECTIONS)).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{CACHE_VARIABLE} must be a positive integer, got {raw!r}")
    return int(raw)


class BoundedCacheAPI(RustBindingsAPI):
    """chromadb's server API with at most `cache_collections()` HNSW indexes held in memory."""

    def __init__(self, system: System) -> None:
        super().__init__(system)
        self.hnsw_cache_size = cache_collections()
