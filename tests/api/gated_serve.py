"""`python -m app.serve` whose ingestion can be held mid-embedding, for crash tests.

While the file named by RAG_TEST_EMBED_GATE exists, a job that has embedded and reported at
least one batch (but not all) writes `<gate>.reached` and waits there. A test can then crash
the server at that exact point instead of polling for it and hoping to be fast enough.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from app import serve
from app.services import pipeline

GATE = Path(os.environ["RAG_TEST_EMBED_GATE"])
_embed_chunks = pipeline.embed_chunks


def _gated_embed_chunks(
    chunks: Any, embedder: Any, batch_size: int, progress: Any, *args: Any, **kwargs: Any
) -> Any:
    def report(done: int, total: int, stage: str) -> None:
        progress(done, total, stage)
        if stage == "embedding" and 0 < done < total and GATE.exists():
            GATE.with_suffix(".reached").touch()
            while GATE.exists():
                time.sleep(0.05)

    return _embed_chunks(chunks, embedder, batch_size, report, *args, **kwargs)


pipeline.embed_chunks = _gated_embed_chunks  # index_file looks it up at call time

if __name__ == "__main__":
    serve.main()
