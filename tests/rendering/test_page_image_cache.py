"""The rendered-page cache: bounded by bytes, least recently used first out, per document; and
the memory of pages that failed to render: per file version, for a while, bounded."""

from __future__ import annotations

import pytest

from app.rendering.cache import FailedPages, PageImageCache
from app.rendering.pdf_page import PageRenderFailed, RenderedPage

pytestmark = pytest.mark.unit


def _page(size: int) -> RenderedPage:
    return RenderedPage(b"x" * size, 10, 10, 0)


def test_the_least_recently_used_page_leaves_first_when_over_budget() -> None:
    cache = PageImageCache(max_bytes=300)
    for name in ("a", "b", "c"):
        cache.put(("t", "d", "sha", name), _page(100))
    assert cache.get(("t", "d", "sha", "a")) is not None  # a is now the most recent
    cache.put(("t", "d", "sha", "e"), _page(100))
    assert cache.get(("t", "d", "sha", "b")) is None
    assert cache.get(("t", "d", "sha", "a")) is not None
    assert cache.size_bytes == 300


def test_a_page_larger_than_the_budget_is_not_kept_and_zero_disables() -> None:
    cache = PageImageCache(max_bytes=50)
    cache.put(("t", "d", "sha", 1), _page(51))
    assert cache.get(("t", "d", "sha", 1)) is None and cache.size_bytes == 0
    off = PageImageCache(max_bytes=0)
    off.put(("t", "d", "sha", 1), _page(1))
    assert off.get(("t", "d", "sha", 1)) is None


def test_dropping_a_document_forgets_only_its_pages_of_that_tenant() -> None:
    cache = PageImageCache(max_bytes=10_000)
    cache.put(("t1", "doc", "sha", 1), _page(10))
    cache.put(("t1", "doc", "sha", 2), _page(10))
    cache.put(("t1", "other", "sha", 1), _page(10))
    cache.put(("t2", "doc", "sha", 1), _page(10))
    cache.drop_document("t1", "doc")
    assert cache.get(("t1", "doc", "sha", 1)) is None
    assert cache.get(("t1", "other", "sha", 1)) is not None
    assert cache.get(("t2", "doc", "sha", 1)) is not None
    assert cache.size_bytes == 20


def test_a_failed_page_is_remembered_per_version_until_its_time_is_up() -> None:
    now = [100.0]
    failures = FailedPages(ttl_s=60, max_entries=2, clock=lambda: now[0])
    slow = PageRenderFailed("timeout", "drawing this PDF page took longer than 20 s")
    failures.remember(("t", "d", "sha-1", 2), slow)
    assert failures.recall(("t", "d", "sha-1", 2)) is slow
    assert failures.recall(("t", "d", "sha-2", 2)) is None  # the replaced file is tried afresh
    assert failures.recall(("t", "d", "sha-1", 3)) is None
    now[0] += 61
    assert failures.recall(("t", "d", "sha-1", 2)) is None  # a busy moment is not held forever
    for page in (1, 2, 3):
        failures.remember(("t", "d", "sha-1", page), slow)
    assert failures.recall(("t", "d", "sha-1", 1)) is None  # oldest out past max_entries
    assert failures.recall(("t", "d", "sha-1", 3)) is slow
    off = FailedPages(ttl_s=0)
    off.remember(("t", "d", "sha-1", 2), slow)
    assert off.recall(("t", "d", "sha-1", 2)) is None
