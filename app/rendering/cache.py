"""Process-wide memories of page pictures: an LRU of rendered images bounded by total bytes,
and the pages that could not be drawn, remembered for a while."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from app.memory import HotMap
from app.rendering.pdf_page import PageRenderFailed, RenderedPage


class PageImageCache:
    """Rendered pages keyed by (tenant, document, content hash, page, chunk): a replaced file has
    another hash, so it can never be served the old picture."""

    def __init__(self, max_bytes: int) -> None:
        self._pages: HotMap[Hashable, RenderedPage] = HotMap(
            max_bytes, weight=lambda page: len(page.png)
        )

    def get(self, key: Hashable) -> RenderedPage | None:
        """The cached page, marked as recently used; None when absent."""
        return self._pages.get(key)

    def put(self, key: Hashable, page: RenderedPage) -> None:
        """Keep a page, evicting the least recently used ones past the byte budget."""
        self._pages.put(key, page)

    def drop_document(self, tenant_id: str, document_id: str) -> None:
        """Forget every page of a deleted document."""
        self._pages.pop_where(lambda key, _page: _belongs(key, tenant_id, document_id))

    @property
    def size_bytes(self) -> int:
        """Bytes of PNG currently held."""
        return self._pages.held


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
