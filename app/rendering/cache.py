"""Process-wide memories of page pictures: an LRU of rendered images bounded by total bytes,
and the pages that could not be drawn, remembered for a while."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from app.rendering.pdf_page import PageRenderFailed, RenderedPage


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


class FailedPages:
    """Pages whose render failed or timed out, by key (tenant, document, content hash, page):
    a repeated request gets the same error at once instead of another render of many seconds.

    An entry lasts `ttl_s` (a crowded machine may time out a page it can draw later); a replaced
    file has another hash, so its pages are tried afresh. At most `max_entries` are kept.
    """

    def __init__(
        self,
        ttl_s: float,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, PageRenderFailed]] = OrderedDict()
        self._lock = threading.Lock()

    def recall(self, key: Hashable) -> PageRenderFailed | None:
        """The remembered failure of this page, or None (never failed, or forgotten)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            return entry[1]

    def remember(self, key: Hashable, failure: PageRenderFailed) -> None:
        """Keep the failure for `ttl_s`, forgetting the oldest entries past `max_entries`."""
        if self._ttl_s <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self._clock() + self._ttl_s, failure)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
