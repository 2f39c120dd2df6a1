"""Contents-page case: real manuals whose contents and index pages repeat every heading.

The PDFs are the R manuals that Debian's `r-doc-pdf` package installs (not written here, not
copied into the repo). Questions come from each PDF's own outline: every bookmark title (section
numbers stripped) is a question, and the page its destination opens is the gold page. Before
demotion the contents pages win such questions, because they repeat the title verbatim.

R-admin.pdf is where the demotion shift was chosen; R-intro.pdf and R-FAQ.pdf (a contents section
listing every question verbatim, answers on later pages: the shape page roles were made for)
are reported as held out. Each manual is scored three ways: no page-role demotion and no heading
promotion ("before"), demotion alone, and the default (demotion + heading promotion,
app/retrieval/headings.py); the questions the default still misses are printed with the pages
that beat the gold page and their roles. When the package is absent the case is skipped with a
message (CI: `apt-get install -y r-doc-pdf`). Run alone with `python -m eval.contents_case`;
`python -m eval.retrieval` runs it too.
"""

from __future__ import annotations

import re
import shutil
import statistics
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from pypdf import PdfReader

from app.container import Container
from app.ingestion.page_roles import role_of_title
from app.text.sections import SECTION_NUMBER
from eval.metrics import hit_at_k, reciprocal_rank
from testkit.indexing import index_file

R_MANUAL_DIR = Path("/usr/share/R/doc/manual")
# name -> what it is used for in the report
MANUALS = {"R-admin.pdf": "tuned on", "R-intro.pdf": "held out", "R-FAQ.pdf": "held out"}
APT_PACKAGE = "r-doc-pdf"


def outline_questions(path: Path) -> list[tuple[str, int]]:
    """(question, gold 1-based page) from the PDF's bookmarks, role pages and repeats left out."""
    reader = PdfReader(path)
    found: dict[str, int] = {}

    def walk(entries: list[Any]) -> None:
        for entry in entries:
            if isinstance(entry, list):
                walk(entry)
                continue
            title = SECTION_NUMBER.sub("", str(entry.title or "").strip())
            title = re.sub(r"\s+", " ", title).strip()
            page = reader.get_destination_page_number(entry)
            if len(title) < 4 or page is None or page < 0 or role_of_title(title) is not None:
                continue
            found.setdefault(title, page + 1)

    walk(reader.outline)
    return list(found.items())


def _page_ranking(container: Container, tenant: str, question: str) -> list[tuple[int, str]]:
    """(page, role) in rank order, each page once, from the top 10 hybrid hits."""
    result = container.retriever.search(tenant, question, 10, "hybrid")
    pages = [(hit.chunk.page, hit.chunk.page_role or "content") for hit in result.hits]
    return list(dict.fromkeys(pages))


def _score(container: Container, tenant: str, cases: list[tuple[str, int]]) -> dict[str, Any]:
    ranked = [(_page_ranking(container, tenant, q), q, page) for q, page in cases]
    rankings = [([str(p) for p, _ in r], {str(page)}) for r, _, page in ranked]
    misses = [
        {
            "question": question,
            "gold_page": page,
            "gold_rank": next((i for i, (p, _) in enumerate(r, 1) if p == page), None),
            "ahead": [f"{p} ({role})" for p, role in r[:3] if p != page][:2],
        }
        for r, question, page in ranked
        if not r or r[0][0] != page
    ]
    return {
        "hit@1": statistics.fmean(hit_at_k(r, gold, 1) for r, gold in rankings),
        "hit@5": statistics.fmean(hit_at_k(r, gold, 5) for r, gold in rankings),
        "mrr": statistics.fmean(reciprocal_rank(r, gold) for r, gold in rankings),
        "misses": misses,
    }


def evaluate_contents_case(container: Container, folder: Path) -> dict[str, Any]:
    """Before/after page-role demotion on each R manual present; a skip note when absent."""
    report: dict[str, Any] = {}
    folder.mkdir(parents=True, exist_ok=True)
    retriever = container.retriever
    configured = retriever.config
    for name, use in MANUALS.items():
        source = R_MANUAL_DIR / name
        if not source.is_file():
            message = (
                f"SKIPPED contents-page case {name}: {source} not found "
                f"(apt-get install -y {APT_PACKAGE})"
            )
            print(message)
            report[name] = {"skipped": message}
            continue
        path = folder / name
        shutil.copyfile(source, path)
        tenant = "contents-" + path.stem.lower()
        index_file(
            path,
            tenant_id=tenant,
            source=name,
            embedder=container.embedder,
            corpus=container.corpus,
            config=container.pipeline_config,
        )
        roles = Counter(
            c.page_role for c in container.corpus.iter_chunks(tenant) if c.page_role is not None
        )
        cases = outline_questions(path)
        variants = {
            "before": replace(configured, page_role_shift=0, promote_headings=False),
            "demotion": replace(configured, promote_headings=False),
            "after": configured,
        }
        scored: dict[str, dict[str, Any]] = {}
        try:
            for label, config in variants.items():
                retriever.config = config
                scored[label] = _score(container, tenant, cases)
        finally:
            retriever.config = configured
        report[name] = {
            "use": use,
            "questions": len(cases),
            "chunks_with_role": dict(roles),
            "page_role_shift": configured.page_role_shift,
            **scored,
        }
        print(
            f"contents case {name} ({use}, {len(cases)} outline questions, chunks by role "
            f"{dict(roles)}), before -> demotion -> demotion + headings: "
            + "; ".join(
                f"{metric} " + " -> ".join(f"{scored[v][metric]:.3f}" for v in variants)
                for metric in ("hit@1", "hit@5", "mrr")
            )
        )
        for miss in scored["after"]["misses"]:
            print(
                f"  missed {miss['question']!r}: gold page {miss['gold_page']} at rank "
                f"{miss['gold_rank']}, ahead: {', '.join(miss['ahead'])}"
            )
    return report


def main() -> None:
    """Run the contents-page case alone: `python -m eval.contents_case`."""
    import tempfile

    from app.config import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            _env_file=None, data_dir=Path(tmp) / "data", embedding_provider="use", env="development"
        )
        evaluate_contents_case(Container(settings), Path(tmp) / "manuals")


if __name__ == "__main__":
    main()
