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
from app.services import indexing
from app.services.blocks.pipeline import FileProgress

GATE = Path(os.environ["RAG_TEST_EMBED_GATE"])
_embed_files = indexing.embed_files


def _gated_embed_files(
    files: Any, embedder: Any, batch_size: int, progress: Any, *args: Any, **kwargs: Any
) -> Any:
    def report(reports: list[FileProgress]) -> None:
        progress(reports)
        if any(0 < r.done < r.total for r in reports) and GATE.exists():
            GATE.with_suffix(".reached").touch()
            while GATE.exists():
                time.sleep(0.05)

    return _embed_files(files, embedder, batch_size, report, *args, **kwargs)


indexing.embed_files = _gated_embed_files  # index_documents looks it up at call time

if __name__ == "__main__":
    serve.main()
