"""One-off: move chunk records out of Chroma collections of the earlier storage layout.

Before storage layout 2, a tenant's chunk texts and locations lived in its Chroma collection
next to the vectors; now they live in the service database, and the service refuses a tenant
whose collection still holds them. For each such tenant this script:

1. copies the records of its earlier-layout collections into the database (rows already there
   are kept),
2. marks those collections as layout 2 (their records are in the database now), and
3. runs the reindex of `python -m app.cli reindex`: the chunks are re-embedded from the database
   into the current collection, the old collections dropped and the corpus version bumped.

An interrupted run can simply be repeated. Run it while the service is stopped (embedded Chroma)
or against the Chroma server the service uses:

    python scripts/migrate_chroma_layout.py [--tenant ID ...]   (default: every such tenant)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from app.domain import Chunk
from app.storage.chroma_index import (
    PAGE_SIZE,
    STORAGE_LAYOUT,
    ChromaVectorIndex,
    holds_records,
    tenant_prefix,
)
from app.storage.chunks import ChunkStore

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from app.services.blocks.corpus import Corpus

# Metadata keys of an earlier-layout chunk; any other key was the chunk's own metadata.
RECORD_KEYS = (
    "tenant_id",
    "document_id",
    "source",
    "page",
    "page_label",
    "chunk_index",
    "start",
    "end",
)


def legacy_tenants(client: ClientAPI) -> list[str]:
    """Tenants that have a collection of the earlier layout."""
    return sorted(
        {
            str((collection.metadata or {})["tenant_id"])
            for collection in client.list_collections()
            if holds_records(collection) and "tenant_id" in (collection.metadata or {})
        }
    )


def _chunks_of(result: Any, tenant_id: str) -> list[Chunk]:
    """The tenant's chunks in one page of an earlier-layout collection."""
    chunks = []
    for cid, text, meta in zip(
        result["ids"], result["documents"], result["metadatas"], strict=True
    ):
        if meta.get("tenant_id") != tenant_id:
            continue
        chunks.append(
            Chunk(
                id=cid,
                tenant_id=tenant_id,
                document_id=str(meta["document_id"]),
                source=str(meta["source"]),
                page=int(meta["page"]),
                page_label=str(meta["page_label"]),
                chunk_index=int(meta["chunk_index"]),
                start=int(meta["start"]),
                end=int(meta["end"]),
                text=text or "",
                metadata={k: v for k, v in meta.items() if k not in RECORD_KEYS},
            )
        )
    return chunks


def _pages(collection: Collection, tenant_id: str) -> Iterator[list[Chunk]]:
    offset = 0
    while True:
        result = collection.get(
            where={"tenant_id": tenant_id},
            limit=PAGE_SIZE,
            offset=offset,
            include=["documents", "metadatas"],  # type: ignore[list-item]
        )
        if not result["ids"]:
            return
        yield _chunks_of(result, tenant_id)
        offset += len(result["ids"])


def migrate_tenant(client: ClientAPI, chunks: ChunkStore, corpus: Corpus, tenant_id: str) -> int:
    """Move the tenant's earlier-layout records to the database and re-embed them; returns how
    many chunks the reindex embedded."""
    prefix = tenant_prefix(tenant_id)
    for listed in client.list_collections():
        if not (listed.name.startswith(prefix) and holds_records(listed)):
            continue
        collection = client.get_collection(listed.name, embedding_function=None)
        for page in _pages(collection, tenant_id):
            chunks.add(page)
        collection.modify(
            metadata={**(collection.metadata or {}), "storage_layout": STORAGE_LAYOUT}
        )
    return corpus.reindex(tenant_id)


def main(argv: Sequence[str] | None = None) -> int:
    """Migrate the named tenants (or every tenant of the earlier layout)."""
    from app.config import get_settings
    from app.container import Container

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tenant", action="append", default=[], help="a tenant id (repeatable)")
    args = parser.parse_args(argv)
    container = Container(get_settings())
    index = container.vector_index
    assert isinstance(index, ChromaVectorIndex)  # the only backend with an earlier layout
    for tenant in args.tenant or legacy_tenants(index.client):
        count = migrate_tenant(index.client, container.chunk_records, container.corpus, tenant)
        print(f"tenant {tenant}: {count} chunks moved to the database and re-embedded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
