"""The per-tenant keyword index: isolation, rebuilt exactly when documents change, persisted."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.domain import document_id
from app.retrieval.keyword import KeywordIndex
from app.services.blocks.corpus import Corpus
from app.storage.chunks import ChunkStore
from app.text.tokenizer import Tokenizer, TokenizerOptions
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import CountingChunkStore, add_document, memory_corpus

pytestmark = pytest.mark.unit


def _texts(store: Corpus, tenant: str, hits: list[tuple[str, float]]) -> list[str]:
    return [c.text for c in store.get_chunks(tenant_id=tenant, ids=[cid for cid, _ in hits])]


def test_one_tenant_never_sees_another_tenants_chunks(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["the secret acme formula is blue"])
    add_document(store, embedder, "globex", "g.txt", ["globex quarterly report"])
    index = KeywordIndex(store, data_dir / "keyword")
    assert index.search("globex", "secret acme formula", 10) == []
    hits = index.search("acme", "secret acme formula", 10)
    assert _texts(store, "acme", hits) == ["the secret acme formula is blue"]
    # Each tenant's index holds its own chunks only, and idf is computed per tenant.
    assert index.snapshot("globex").chunk_ids == tuple(c.id for c in store.iter_chunks("globex"))
    assert set(index.rebuilds) == {"acme", "globex"}


class _LeakyRows(ChunkStore):
    """Broken chunk rows that return every tenant's chunks."""

    def iter_tenant(self, tenant_id: str):  # type: ignore[no-untyped-def]
        for tenant in ("acme", "globex"):
            yield from super().iter_tenant(tenant)


def test_a_store_leaking_other_tenants_chunks_is_refused(
    embedder: FakeEmbedder, data_dir: Path
) -> None:
    leaky = memory_corpus(data_dir, embedder, _LeakyRows)
    add_document(leaky, embedder, "acme", "a.txt", ["acme text"])
    add_document(leaky, embedder, "globex", "g.txt", ["globex text"])
    with pytest.raises(RuntimeError, match="another tenant"):
        KeywordIndex(leaky, data_dir / "keyword").search("acme", "text", 5)


def test_rebuilt_after_upload_replace_and_delete_and_not_otherwise(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    index = KeywordIndex(store, data_dir / "keyword")
    tenant = "acme"
    add_document(store, embedder, tenant, "a.txt", ["alpha valve manual"])
    for _ in range(5):
        assert index.search(tenant, "valve", 5)
    assert index.rebuilds[tenant] == 1

    add_document(store, embedder, tenant, "b.txt", ["beta pump manual"])  # upload
    assert _texts(store, tenant, index.search(tenant, "pump", 5)) == ["beta pump manual"]
    index.search(tenant, "pump", 5)
    assert index.rebuilds[tenant] == 2

    add_document(store, embedder, tenant, "b.txt", ["beta compressor manual"])  # replace
    assert index.search(tenant, "pump", 5) == []
    assert _texts(store, tenant, index.search(tenant, "compressor", 5)) == [
        "beta compressor manual"
    ]
    assert index.rebuilds[tenant] == 3

    store.delete_document(tenant_id=tenant, document_id=document_id(tenant, "a.txt"))  # delete
    assert index.search(tenant, "valve", 5) == []
    assert index.rebuilds[tenant] == 4

    # Another tenant's upload does not rebuild this tenant's index.
    add_document(store, embedder, "other", "o.txt", ["valve"])
    index.search(tenant, "valve", 5)
    assert index.rebuilds[tenant] == 4
    # Only the first build read the whole tenant; later ones read just the chunks they had not
    # seen (counted in the tests below).
    assert chunk_rows.iterations[tenant] == 1


def _apply_changes(store: Corpus, embedder: FakeEmbedder, index: KeywordIndex) -> None:
    """Uploads, a replacement and a delete, with the index rebuilt after each change."""
    tenant = "acme"
    steps = [
        ("a.txt", ["alpha valve manual SR-33", "pump pressure 4.2 bar"]),
        ("b.txt", ["beta pump manual", "والمدرسة الكبيرة"]),
        ("c.txt", ["gamma compressor", "valve valve valve seal", ""]),
        ("b.txt", ["beta compressor manual replaced"]),  # replace: pump and مدرسة leave
    ]
    for source, texts in steps:
        add_document(store, embedder, tenant, source, texts)
        index.refresh(tenant)
    store.delete_document(tenant_id=tenant, document_id=document_id(tenant, "a.txt"))
    index.refresh(tenant)


def test_incremental_rebuilds_score_exactly_like_a_full_build(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    incremental = KeywordIndex(store, data_dir / "incremental")
    _apply_changes(store, embedder, incremental)
    # Each of the 8 chunk texts ever written was read once, however many rebuilds followed.
    assert chunk_rows.chunks_read["acme"] == 8
    full = KeywordIndex(store, data_dir / "full")  # reads everything once, at this version
    for query in ["valve", "compressor manual", "pump", "seal valve", "مدرسة", "sr-33", "zebra"]:
        tokens = full.tokenizer(query)
        assert incremental.search("acme", query, 10) == full.search("acme", query, 10), query
        assert incremental.snapshot("acme").coverage(tokens) == full.snapshot("acme").coverage(
            tokens
        )
    # Words only deleted or replaced chunks had are gone, not merely unmatched.
    assert incremental.snapshot("acme").coverage(["pump"]) == 0.0
    assert incremental.snapshot("acme").coverage(["alpha"]) == 0.0


def test_a_restarted_process_rebuilds_incrementally_from_the_persisted_tokens(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    add_document(store, embedder, "acme", "a.txt", [f"valve part {i}" for i in range(20)])
    KeywordIndex(store, data_dir / "keyword").refresh("acme")
    restarted = KeywordIndex(store, data_dir / "keyword")
    restarted.refresh("acme")  # loaded from disk
    read_before = chunk_rows.chunks_read["acme"]
    add_document(store, embedder, "acme", "b.txt", ["valve housing"])
    assert len(restarted.search("acme", "valve", 50)) == 21
    assert chunk_rows.chunks_read["acme"] - read_before == 1
    assert restarted.loads["acme"] == 1 and restarted.rebuilds["acme"] == 1


def test_a_persisted_index_without_token_ids_still_loads_and_later_rebuilds_in_full(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["alpha valve", "beta valve"])
    KeywordIndex(store, data_dir / "keyword").refresh("acme")
    for path in (data_dir / "keyword").rglob("token_ids.npz"):
        path.unlink()
    index = KeywordIndex(store, data_dir / "keyword")
    assert len(index.search("acme", "valve", 5)) == 2 and index.loads["acme"] == 1
    add_document(store, embedder, "acme", "b.txt", ["gamma valve"])
    assert len(index.search("acme", "valve", 5)) == 3
    assert chunk_rows.iterations["acme"] == 2  # no tokens to reuse: the whole tenant was read


def test_restart_loads_the_persisted_index_without_reading_chunks(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["alpha valve manual", "beta pump SR-33"])
    first = KeywordIndex(store, data_dir / "keyword")
    expected = first.search("acme", "pump sr-33", 5)
    assert first.rebuilds["acme"] == 1

    restarted = KeywordIndex(store, data_dir / "keyword")
    assert restarted.search("acme", "pump sr-33", 5) == expected
    assert restarted.rebuilds["acme"] == 0
    assert restarted.loads["acme"] == 1
    assert chunk_rows.iterations["acme"] == 1  # only the first process read the chunks

    # After a change, the persisted index is stale and is not used.
    add_document(store, embedder, "acme", "c.txt", ["gamma pump"])
    third = KeywordIndex(store, data_dir / "keyword")
    assert len(third.search("acme", "pump", 5)) == 2
    assert third.rebuilds["acme"] == 1


def test_another_process_rebuild_is_loaded_from_disk(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["alpha valve"])
    mine = KeywordIndex(store, data_dir / "keyword")
    theirs = KeywordIndex(store, data_dir / "keyword")
    mine.search("acme", "valve", 5)
    theirs.search("acme", "valve", 5)
    add_document(store, embedder, "acme", "b.txt", ["beta valve"])  # written elsewhere
    assert len(theirs.search("acme", "valve", 5)) == 2
    assert len(mine.search("acme", "valve", 5)) == 2
    assert mine.rebuilds["acme"] + theirs.rebuilds["acme"] == 2  # one initial + one rebuild
    assert mine.loads["acme"] + theirs.loads["acme"] == 2


def test_a_changed_tokenizer_does_not_reuse_the_persisted_index(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["والمدرسة الكبيرة"])
    KeywordIndex(store, data_dir / "keyword").search("acme", "مدرسة", 5)
    other = Tokenizer(TokenizerOptions(arabic_article=False, arabic_waw=False))
    index = KeywordIndex(store, data_dir / "keyword", tokenizer=other)
    index.search("acme", "مدرسة", 5)
    assert index.rebuilds["acme"] == 1 and index.loads["acme"] == 0


def test_corrupt_persisted_index_is_rebuilt(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["alpha valve"])
    KeywordIndex(store, data_dir / "keyword").search("acme", "valve", 5)
    for path in (data_dir / "keyword").rglob("*.json"):
        if path.name == "chunk_ids.json":
            path.write_text("[broken", encoding="utf-8")
    index = KeywordIndex(store, data_dir / "keyword")
    assert len(index.search("acme", "valve", 5)) == 1
    assert index.rebuilds["acme"] == 1


def test_empty_tenant_and_unknown_words_return_nothing(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    index = KeywordIndex(store, data_dir / "keyword")
    assert index.search("nobody", "anything", 5) == []
    add_document(store, embedder, "acme", "a.txt", ["alpha valve"])
    assert index.search("acme", "zebra", 5) == []
    assert index.search("acme", "?!", 5) == []
    assert index.search("acme", "", 5) == []


def test_tenant_ids_cannot_escape_the_index_directory(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    tenant = "../../etc"
    add_document(store, embedder, tenant, "a.txt", ["alpha valve"])
    index = KeywordIndex(store, data_dir / "keyword")
    index.search(tenant, "valve", 5)
    written = [p.resolve() for p in data_dir.rglob("*") if p.is_file()]
    assert written and all((data_dir / "keyword").resolve() in p.parents for p in written)


def test_queries_during_rebuilds_see_a_whole_index(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    """Readers race a writer: every answer is a complete old or new index, never a mix."""
    index = KeywordIndex(store, data_dir / "keyword")
    tenant = "acme"
    add_document(store, embedder, tenant, "doc.txt", ["shared word v0"] * 1 + ["filler"])
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            snap = index.snapshot(tenant)
            hits = snap.search(index.tokenizer("shared word"), 50)
            # Each version holds exactly one "shared word" chunk plus filler.
            if len(hits) != 1 or len(snap.chunk_ids) != 2:
                errors.append(f"{len(hits)} hits, {len(snap.chunk_ids)} ids")

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for version in range(1, 15):
        add_document(store, embedder, tenant, "doc.txt", [f"shared word v{version}", "filler"])
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert index.snapshot(tenant).corpus_version == store.corpus_version(tenant)


@pytest.mark.parametrize("keep", [1, 3])
def test_refreshes_keep_at_most_the_configured_number_of_snapshots_on_disk(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path, keep: int
) -> None:
    index = KeywordIndex(store, data_dir / "keyword", keep_snapshots=keep)
    tenant_dir = data_dir / "keyword"
    for i in range(6):  # each upload makes the next refresh write a whole new snapshot
        add_document(store, embedder, "acme", f"d{i}.txt", [f"valve number {i}"])
        index.refresh("acme")
        folders = [p for p in tenant_dir.rglob("*") if p.is_dir() and p.parent != tenant_dir]
        assert len(folders) == min(i + 1, keep)
    assert index.rebuilds["acme"] == 6
    # The newest is the one served, also by a process that loads it from disk.
    fresh = KeywordIndex(store, data_dir / "keyword", keep_snapshots=keep)
    assert _texts(store, "acme", fresh.search("acme", "number 5", 1)) == ["valve number 5"]
    assert fresh.loads["acme"] == 1


def test_keep_snapshots_must_keep_the_current_one(store: Corpus, data_dir: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        KeywordIndex(store, data_dir / "keyword", keep_snapshots=0)


def test_more_tenants_than_the_bound_keep_correct_results_and_at_most_the_bound_in_memory(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    tenants = [f"tenant-{n}" for n in range(5)]
    for n, tenant in enumerate(tenants):
        add_document(store, embedder, tenant, "t.txt", [f"pump {n} manual", f"valve {n} notes"])
    index = KeywordIndex(store, data_dir / "keyword", hot_tenants=2)
    for _ in range(3):  # every tenant in turn, three rounds: each search follows an eviction
        for n, tenant in enumerate(tenants):
            hits = index.search(tenant, f"valve {n}", 5)
            assert _texts(store, tenant, hits)[0] == f"valve {n} notes"
            assert len(index.hot_tenants) <= 2
    assert index.hot_tenants == tenants[-2:]
    assert index.evictions == 3 * len(tenants) - 2
    # Built once each; every later return came from the persisted snapshot on disk.
    assert all(index.rebuilds[t] == 1 for t in tenants)
    assert all(index.loads[t] == 2 for t in tenants)


def test_an_evicted_tenant_whose_documents_changed_comes_back_current(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    index = KeywordIndex(store, data_dir / "keyword", hot_tenants=1)
    add_document(store, embedder, "acme", "a.txt", ["alpha valve manual"])
    add_document(store, embedder, "globex", "g.txt", ["globex report"])
    assert index.search("acme", "valve", 5)
    assert index.search("globex", "report", 5)  # evicts acme
    add_document(store, embedder, "acme", "b.txt", ["beta compressor manual"])
    assert _texts(store, "acme", index.search("acme", "compressor", 5)) == [
        "beta compressor manual"
    ]
    assert index.hot_tenants == ["acme"]


def test_a_recently_used_tenant_is_not_the_one_evicted(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    index = KeywordIndex(store, data_dir / "keyword", hot_tenants=2)
    for tenant in ("a", "b", "c"):
        add_document(store, embedder, tenant, "t.txt", [f"{tenant} pump manual"])
    index.search("a", "pump", 5)
    index.search("b", "pump", 5)
    index.search("a", "pump", 5)  # a is now the most recent
    index.search("c", "pump", 5)  # evicts b, not a
    assert index.hot_tenants == ["a", "c"]


def test_an_incremental_rebuild_after_a_load_from_disk_scores_like_a_full_build(
    store: Corpus,
    chunk_rows: CountingChunkStore,
    embedder: FakeEmbedder,
    data_dir: Path,
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["alpha valve manual", "pump 4.2 bar", "seal"])
    add_document(store, embedder, "acme", "b.txt", ["beta pump manual", "والمدرسة الكبيرة"])
    KeywordIndex(store, data_dir / "keyword").refresh("acme")
    restarted = KeywordIndex(store, data_dir / "keyword")
    restarted.refresh("acme")  # loaded from disk; its token ids stay there until needed
    read_before = chunk_rows.chunks_read["acme"]
    add_document(store, embedder, "acme", "c.txt", ["gamma valve valve seal", "مدرسة"])
    store.delete_document(tenant_id="acme", document_id=document_id("acme", "a.txt"))
    restarted.refresh("acme")
    assert chunk_rows.chunks_read["acme"] - read_before == 2  # only the new chunks were read
    full = KeywordIndex(store, data_dir / "full")
    for query in ["valve", "pump manual", "seal valve", "مدرسة", "alpha", "zebra"]:
        tokens = full.tokenizer(query)
        assert restarted.search("acme", query, 10) == full.search("acme", query, 10), query
        assert restarted.snapshot("acme").coverage(tokens) == full.snapshot("acme").coverage(tokens)


def test_a_snapshot_persisted_without_its_script_census_loads_and_counts_it(
    store: Corpus, embedder: FakeEmbedder, data_dir: Path
) -> None:
    add_document(store, embedder, "acme", "a.txt", ["pump valve manual", "seal kit 4"])
    built = KeywordIndex(store, data_dir / "keyword").snapshot("acme")
    (pointer,) = (data_dir / "keyword").rglob("current.json")
    saved = json.loads(pointer.read_text(encoding="utf-8"))
    assert saved["scripts"] == ["digits", "latin"]
    del saved["scripts"]  # as written before the census was persisted
    pointer.write_text(json.dumps(saved), encoding="utf-8")
    older = KeywordIndex(store, data_dir / "keyword")
    loaded = older.snapshot("acme")
    assert older.loads["acme"] == 1 and older.rebuilds["acme"] == 0
    assert loaded.scripts == built.scripts == frozenset({"digits", "latin"})
    question = KeywordIndex(store, data_dir / "x").tokenizer("ما هو ضغط pump")
    assert loaded.foreign_share(question) == built.foreign_share(question) > 0
    assert older.search("acme", "seal kit", 5) == built.search(older.tokenizer("seal kit"), 5)
