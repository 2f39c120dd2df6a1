"""A query stuffed with hundreds of identifiers and quoted phrases does a bounded amount of
exact-match work: the SQL statements against the tenant's chunk texts are counted on the real
database while /search runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from tests.api.harness import ApiFactory, ApiHarness, ApiUser

pytestmark = pytest.mark.integration

MAX_TERMS, MAX_PHRASES, MAX_SCANS, VERIFY_BUDGET = 16, 4, 4, 30


@pytest.fixture(scope="module")
def harness(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(
        max_question_chars=20_000,
        max_body_bytes=200_000,
        exact_max_terms=MAX_TERMS,
        exact_max_phrases=MAX_PHRASES,
        exact_max_scans=MAX_SCANS,
        exact_verify_budget=VERIFY_BUDGET,
    )


@pytest.fixture(scope="module")
def user(harness: ApiHarness) -> ApiUser:
    user = harness.add_user("budget")
    lines = [f"Item #{i} is kept in bay AB-{i} next to the red handle." for i in range(1, 301)]
    job = harness.upload_and_wait(user, "inventory.txt", "\n\n".join(lines).encode())
    assert job["status"] == "done", job
    return user


@contextmanager
def chunk_statements(harness: ApiHarness) -> Iterator[list[str]]:
    """Every SQL statement that reads the chunks table while the block runs."""
    seen: list[str] = []
    engine = harness.container.database.engine

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # Ingestion worker threads (ingest-N) share the engine; only the request's work counts.
        if "chunks" in statement and not threading.current_thread().name.startswith("ingest-"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _scans(statements: list[str]) -> int:
    return sum("instr(" in s.lower() or "strpos(" in s.lower() for s in statements)


def _ids_fetched(statements: list[str]) -> int:
    """Chunk ids asked for by id lists (one bound parameter each, the tenant's not counted)."""
    fetches = [s for s in statements if " IN (" in s]
    return sum(s.count("?") + s.count("%(") - 1 for s in fetches)


_COMMON_PHRASES = [
    " ".join(words[start:end])
    for words in (["item", "is", "kept", "in", "bay"], ["next", "to", "the", "red", "handle"])
    for start in range(len(words))
    for end in range(start + 2, len(words) + 1)
]


def _stuffed_query(identifiers: int) -> str:
    half = identifiers // 2
    numbered = " ".join(f"#{i}" for i in range(1, half + 1))  # edge symbol: substring scans
    codes = " ".join(f"AB-{i}" for i in range(1, identifiers - half + 1))
    # Phrases every chunk contains: verifying one needs every chunk's text.
    phrases = " ".join(f'"{phrase}"' for phrase in _COMMON_PHRASES)
    return f"{phrases} {numbered} {codes}"


def test_a_query_with_500_identifiers_does_bounded_sql_work(
    harness: ApiHarness, user: ApiUser
) -> None:
    with chunk_statements(harness) as plain:
        harness.search(user, "where is the red handle kept?")
    counts = {}
    for identifiers in (20, 100, 500):
        with chunk_statements(harness) as statements:
            body = harness.search(user, _stuffed_query(identifiers), k=5)
        counts[identifiers] = (len(statements), _scans(statements), _ids_fetched(statements))
        assert body["results"], body
    print(
        "\nchunk-table statements (total, substring scans, ids fetched): "
        f"plain ({len(plain)}, {_scans(plain)}, {_ids_fetched(plain)}), by identifiers {counts}"
    )
    total, scans, fetched = counts[500]
    assert scans == MAX_SCANS  # the cap binds: without it every `#n` would be a scan
    # Beyond a plain query: the scans, then at most one verification fetch per term.
    assert total <= len(plain) + MAX_SCANS + MAX_TERMS, counts
    assert fetched <= _ids_fetched(plain) + VERIFY_BUDGET, counts
    # The statement total may include a keyword-index reload; scans and fetches may not vary.
    assert counts[100][1:] == counts[500][1:], "work must not grow with the identifier count"


def test_the_first_terms_of_a_stuffed_query_still_match_exactly(
    harness: ApiHarness, user: ApiUser
) -> None:
    body = harness.search(user, '"bay AB-17 next" ' + _stuffed_query(500), k=3)
    top = body["results"][0]
    assert top["stages"]["exact_match"] == 1
    assert "bay AB-17 next" in top["text"]
