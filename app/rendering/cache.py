"""A process-wide LRU of rendered page images, bounded by total bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from app.rendering.pdf_page import RenderedPage


class PageImageCache:
    """Rendered pages keyed by (tenant, document, content hash, page, chunk): a replaced file has
    another hash, so it can never be served the old picture."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, RenderedPage] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> RenderedPage | None:
        """The cached page, marked as recently used; None when absent."""
        with self._lock:
            page = self._entries.get(key)
            if page is not None:
                self._entries.move_to_end(key)
            return page

    def put(self, key: Hashable, page: RenderedPage) -> None:
        """Keep a page, evicting the least recently used ones past the byte budget."""
        if len(page.png) > self._max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old.png)
            self._entries[key] = page
            self._bytes += len(page.png)
            while self._bytes > self._max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted.png)

    def drop_document(self, tenant_id: str, document_id: str) -> None:
        """Forget every page of a deleted document."""
        with self._lock:
            for key in [k for k in self._entries if _belongs(k, tenant_id, document_id)]:
                self._bytes -= len(self._entries.pop(key).png)

    @property
    def size_bytes(self) -> int:
        """Bytes of PNG currently held."""
        return self._bytes


def _belongs(key: Hashable, tenant_id: str, document_id: str) -> bool:
    return isinstance(key, tuple) and key[:2] == (tenant_id, document_id)
