"""The rendered-page cache: bounded by bytes, least recently used first out, per document."""

from __future__ import annotations

import pytest

from app.rendering.cache import PageImageCache
from app.rendering.pdf_page import RenderedPage

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
