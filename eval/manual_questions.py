"""Natural questions on real manuals: the sets, their gold pages and scores.

The questions live in eval/manuals/<manual>.jsonl, worded as users ask ("How do I ...?"), each
with one or more evidence strings: a distinctive phrase or code line that answers it, copied from
the text the service's own PDF loader extracts. The gold page(s) of a question are the content
pages (1-based, the page a reader would open) whose text contains an evidence string, compared
with all white space removed and case ignored (so a change in how the loader spaces words
does not move them); they are computed from the PDF, never typed.
An evidence string found nowhere, or on more than MAX_GOLD_PAGES pages, is an error.

The PDFs are Debian's (`r-doc-pdf`: R-admin, R-data, R-exts, R-lang; `gnuplot-doc`: the gnuplot
manual) and are not copied into the repository. R-intro and R-FAQ are never used here: they stay
unseen for the final check. Each manual's questions are split into tuning and test halves by the
order of their ids' SHA-256 (`assign_splits`): half of each manual (the extra one to tuning), the
same on every run, and a reworded question keeps its split. The sets are frozen: new questions go
in a new file, since one added to a manual could move a question across the boundary.

The wider development set (DEV_WIDE_SOURCES: more Debian packages, other domains, an
Arabic document) is meant for leave-one-manual-out evaluation, so it has no halves: every one of
its questions is in split "dev". `load_questions()` returns the first, halved set as before;
`load_questions(sources=DEV_WIDE_SOURCES)` the wider one, `ALL_SOURCES` both. Some of its
PDFs are installed gzipped (`.pdf.gz`); they are read through `readable_pdf`.

    python -m eval.manual_questions              # resolve every evidence string, print counts
    python -m eval.manual_questions --write-gold # also rewrite eval/manuals/gold-pages.json
    python -m eval.retrieval --manuals-only      # score them through the real pipeline
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

from app.container import Container
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.parse_limits import LoadLimits
from eval.metrics import hit_at_k, reciprocal_rank
from testkit.indexing import index_file

QUESTIONS_DIR = Path(__file__).resolve().parent / "manuals"
GOLD_FILE = QUESTIONS_DIR / "gold-pages.json"
# An evidence string on more pages than this does not say which page answers the question.
MAX_GOLD_PAGES = 3
# "dev": the wider set, evaluated leave-one-manual-out, never halved.
Split = Literal["tuning", "test", "dev"]
# The halves of the first set (R manuals and gnuplot).
SPLITS: tuple[Split, ...] = ("tuning", "test")
# "halved": the first set, split into tuning and test halves; "dev-wide": the wider set;
# "held-out": the final check, never tuned on.
Group = Literal["halved", "dev-wide", "held-out"]
# Kept away from every tuning and dev set: the final, unseen check of the manual questions
# (R-intro's questions are the held-out set, HELD_OUT_SOURCES).
UNSEEN_MANUALS = frozenset({"R-intro.pdf", "R-FAQ.pdf"})


@dataclass(frozen=True)
class ManualSource:
    """A manual's PDF as a Debian package installs it."""

    name: str
    path: Path
    package: str
    group: Group = "halved"
    domain: str = "statistics"
    language: str = "en"


R_MANUALS = Path("/usr/share/R/doc/manual")
SOURCES: dict[str, ManualSource] = {
    "R-admin": ManualSource("R-admin.pdf", R_MANUALS / "R-admin.pdf", "r-doc-pdf"),
    "R-data": ManualSource("R-data.pdf", R_MANUALS / "R-data.pdf", "r-doc-pdf"),
    "R-exts": ManualSource("R-exts.pdf", R_MANUALS / "R-exts.pdf", "r-doc-pdf"),
    "R-lang": ManualSource("R-lang.pdf", R_MANUALS / "R-lang.pdf", "r-doc-pdf"),
    "gnuplot": ManualSource(
        "gnuplot.pdf", Path("/usr/share/doc/gnuplot/gnuplot.pdf"), "gnuplot-doc", domain="graphics"
    ),
}


def _wide(name: str, path: str, package: str, domain: str, language: str = "en") -> ManualSource:
    """A manual of the wide development set."""
    return ManualSource(name, Path(path), package, "dev-wide", domain, language)


# The wider set: real manuals from other Debian packages and domains, for leave-one-manual-out runs.
DEV_WIDE_SOURCES: dict[str, ManualSource] = {
    "debian-reference": _wide(
        "debian-reference.en.pdf",
        "/usr/share/debian-reference/debian-reference.en.pdf",
        "debian-reference-en",
        "system administration",
    ),
    "freedombox": _wide(
        "freedombox-manual.pdf",
        "/usr/share/freedombox/manual/en/freedombox-manual.pdf",
        "freedombox-doc-en",
        "networking, home server",
    ),
    "libdbi": _wide(
        "libdbi-programmers-guide.pdf",
        "/usr/share/doc/libdbi-doc/programmers-guide.pdf.gz",
        "libdbi-doc",
        "databases",
    ),
    "xfig": _wide("xfig_ref_en.pdf", "/usr/share/doc/xfig/xfig_ref_en.pdf", "xfig-doc", "graphics"),
    "mrbayes": _wide(
        "Manual_MrBayes_v3.2.pdf",
        "/usr/share/doc/mrbayes/Manual_MrBayes_v3.2.pdf",
        "mrbayes-doc",
        "science, phylogenetics",
    ),
    "gutenprint": _wide(
        "gutenprint-users-manual.pdf",
        "/usr/share/doc/gutenprint-doc/gutenprint-users-manual.pdf",
        "gutenprint-doc",
        "printing",
    ),
    "auto-multiple-choice": _wide(
        "auto-multiple-choice.en.pdf",
        "/usr/share/doc/auto-multiple-choice/auto-multiple-choice.en.pdf",
        "auto-multiple-choice-doc-pdf",
        "office, education",
    ),
    "debmake": _wide(
        "debmake-doc.en.pdf",
        "/usr/share/doc/debmake-doc/debmake-doc.en.pdf",
        "debmake-doc",
        "software packaging",
    ),
    "nauty": _wide("nug28.pdf", "/usr/share/doc/nauty/nug28.pdf", "nauty-doc", "mathematics"),
    "amiri-ar": _wide(
        "Documentation-Arabic.pdf",
        "/usr/share/doc/fonts-hosny-amiri/Documentation-Arabic.pdf.gz",
        "fonts-hosny-amiri",
        "typography",
        "ar",
    ),
}
ALL_SOURCES: dict[str, ManualSource] = {**SOURCES, **DEV_WIDE_SOURCES}
# Held out: questions never tuned on, neither halved nor in the leave-one-out table; read once
# per change as the final check (`python -m eval.manuals_loo --held-out`).
HELD_OUT_SOURCES: dict[str, ManualSource] = {
    "R-intro": ManualSource(
        "R-intro.pdf", R_MANUALS / "R-intro.pdf", "r-doc-pdf", group="held-out"
    ),
}
KNOWN_SOURCES: dict[str, ManualSource] = {**ALL_SOURCES, **HELD_OUT_SOURCES}


@dataclass(frozen=True)
class ManualQuestion:
    """One natural question on one manual, with the phrases that answer it."""

    id: str
    manual: str
    text: str
    evidence: tuple[str, ...]
    split: Split = "test"


def assign_splits(questions: list[ManualQuestion]) -> list[ManualQuestion]:
    """Per manual, the first half of the questions ordered by SHA-256 of their id is tuning."""
    out: dict[str, ManualQuestion] = {}
    for manual in dict.fromkeys(q.manual for q in questions):
        mine = sorted(
            (q for q in questions if q.manual == manual),
            key=lambda q: hashlib.sha256(q.id.encode()).hexdigest(),
        )
        tuning = (len(mine) + 1) // 2
        for rank, question in enumerate(mine):
            out[question.id] = replace(question, split="tuning" if rank < tuning else "test")
    return [out[q.id] for q in questions]


def load_questions(
    folder: Path = QUESTIONS_DIR, sources: Mapping[str, ManualSource] | None = None
) -> list[ManualQuestion]:
    """Every question of every manual in `sources` (by default the first set), in file
    order; malformed rows raise. The first set's questions are split in halves, the
    wider set's are all "dev"."""
    chosen = SOURCES if sources is None else sources
    questions: list[ManualQuestion] = []
    seen: set[str] = set()
    for manual in chosen:
        path = folder / f"{manual}.jsonl"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            evidence = tuple(str(e) for e in row.get("evidence", ()))
            text = str(row.get("question", "")).strip()
            qid = str(row.get("id", ""))
            if not qid or not text or not evidence or not all(e.strip() for e in evidence):
                raise ValueError(f"{path}:{number}: needs an id, a question and evidence strings")
            if qid in seen:
                raise ValueError(f"{path}:{number}: duplicate question id {qid!r}")
            seen.add(qid)
            questions.append(ManualQuestion(qid, manual, text, evidence, split="dev"))
    halved = {q.id: q for q in assign_splits([q for q in questions if q.manual in SOURCES])}
    return [halved.get(q.id, q) for q in questions]


def _squashed(text: str) -> str:
    """`text` casefolded with all white space removed: evidence copied from a loader that glued
    words ("Justlikeany") still matches the spaced text of a better one, and vice versa."""
    return re.sub(r"\s+", "", text).casefold()


@cache
def readable_pdf(path: Path) -> Path:
    """The PDF itself, or for a gzipped one (Debian installs some as .pdf.gz) an unpacked copy."""
    if path.suffix != ".gz":
        return path
    unpacked = Path(tempfile.mkdtemp(prefix="manual-")) / path.stem
    with gzip.open(path) as packed, unpacked.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return unpacked


@cache
def content_pages(path: Path) -> dict[int, str]:
    """1-based page number -> squashed text of the PDF's content pages (as the service loads
    them: running headers stripped; contents, index and other role pages left out)."""
    pages = load_pdf(readable_pdf(path), LoadLimits())
    return {page.number: _squashed(page.text) for page in pages if page.role is None}


def evidence_pages(evidence: str, pages: dict[int, str]) -> list[int]:
    """The content pages whose text contains the evidence string."""
    needle = _squashed(evidence)
    return [number for number, text in pages.items() if needle in text]


class EvidenceError(ValueError):
    """Evidence strings that do not pin a question to a page."""


def resolve_gold(questions: Iterable[ManualQuestion]) -> dict[str, list[int]]:
    """Question id -> sorted gold pages; raises EvidenceError listing every unresolved string."""
    gold: dict[str, list[int]] = {}
    problems: list[str] = []
    for question in questions:
        pages = content_pages(KNOWN_SOURCES[question.manual].path)
        found: set[int] = set()
        for evidence in question.evidence:
            where = evidence_pages(evidence, pages)
            if not where:
                problems.append(f"{question.id}: {evidence!r} is on no content page")
            elif len(where) > MAX_GOLD_PAGES:
                problems.append(f"{question.id}: {evidence!r} is on {len(where)} pages {where}")
            found.update(where)
        gold[question.id] = sorted(found)
    if problems:
        raise EvidenceError("evidence strings that do not resolve:\n  " + "\n  ".join(problems))
    return gold


def missing_sources(sources: Mapping[str, ManualSource] | None = None) -> list[ManualSource]:
    """The manuals (of `sources`, by default the first set) whose PDF is not installed."""
    chosen = SOURCES if sources is None else sources
    return [source for source in chosen.values() if not source.path.is_file()]


def install_hint(sources: Iterable[ManualSource]) -> str:
    packages = sorted({source.package for source in sources})
    return f"apt-get install -y {' '.join(packages)}"


def counts(questions: Iterable[ManualQuestion]) -> dict[str, dict[str, int]]:
    """Manual -> split -> number of questions, for the manuals that have any."""
    table: dict[str, dict[str, int]] = {}
    for question in questions:
        row = table.setdefault(question.manual, dict.fromkeys((*SPLITS, "dev"), 0))
        row[question.split] += 1
    return table


# --- scoring through the real pipeline ---

# Label -> (mode, keep page-role demotion and heading promotion): the arms alone, their plain
# RRF fusion, and the service's default order (what /search returns without a reranker).
VARIANTS: dict[str, tuple[str, bool]] = {
    "keyword": ("keyword", False),
    "dense": ("dense", False),
    "hybrid-rrf": ("hybrid", False),
    "default": ("hybrid", True),
}


def _page_ranking(container: Container, tenant: str, question: str, mode: str) -> list[int]:
    """Pages in rank order, each once, from the top 30 chunks."""
    result = container.retriever.search(tenant, question, 30, mode)  # type: ignore[arg-type]
    return list(dict.fromkeys(hit.chunk.page for hit in result.hits))


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    if not rows:
        return {}
    return {
        "questions": float(len(rows)),
        "hit@1": statistics.fmean(r["hit@1"] for r in rows),
        "hit@5": statistics.fmean(r["hit@5"] for r in rows),
        "mrr@10": statistics.fmean(r["mrr@10"] for r in rows),
        "p50_ms": statistics.median(r["ms"] for r in rows),
    }


def _score(
    container: Container, tenant: str, questions: list[ManualQuestion], gold: dict[str, list[int]]
) -> dict[str, list[dict[str, Any]]]:
    """Variant -> one row per question: its split, metrics, time and the top pages."""
    retriever = container.retriever
    configured = retriever.config
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for label, (mode, adjusted) in VARIANTS.items():
            retriever.config = (
                configured
                if adjusted
                else replace(configured, page_role_shift=0, promote_headings=False)
            )
            rows = []
            for question in questions:
                started = time.perf_counter()
                pages = _page_ranking(container, tenant, question.text, mode)
                elapsed = (time.perf_counter() - started) * 1000
                ranked = [str(p) for p in pages[:10]]
                relevant = {str(p) for p in gold[question.id]}
                rows.append(
                    {
                        "id": question.id,
                        "split": question.split,
                        "hit@1": hit_at_k(ranked, relevant, 1),
                        "hit@5": hit_at_k(ranked, relevant, 5),
                        "mrr@10": reciprocal_rank(ranked, relevant),
                        "ms": elapsed,
                        "top_pages": pages[:5],
                        "gold_pages": gold[question.id],
                    }
                )
            out[label] = rows
    finally:
        retriever.config = configured
    return out


def ingest_manual(container: Container, manual: str, path: Path | None = None) -> str:
    """Index one manual's PDF (its installed file, or a copy at `path`) into the manual's own
    tenant, as an upload would be; the tenant id."""
    source = KNOWN_SOURCES[manual]
    tenant = "manual-" + manual.lower()
    index_file(
        path or readable_pdf(source.path),
        tenant_id=tenant,
        source=source.name,
        embedder=container.embedder,
        corpus=container.corpus,
        config=container.pipeline_config,
    )
    return tenant


def evaluate_manual_questions(container: Container, folder: Path) -> dict[str, Any]:
    """Ingest each installed manual into its own tenant and score its questions per variant and
    split; manuals whose package is absent are reported as skipped, with the package to install."""
    questions = load_questions()
    report: dict[str, Any] = {"variants": list(VARIANTS), "manuals": {}}
    folder.mkdir(parents=True, exist_ok=True)
    missing = {source.name for source in missing_sources()}
    all_rows: dict[str, list[dict[str, Any]]] = {label: [] for label in VARIANTS}
    for manual, source in SOURCES.items():
        if source.name in missing:
            message = (
                f"SKIPPED manual questions {source.name}: {source.path} not found "
                f"({install_hint([source])})"
            )
            print(message)
            report["manuals"][manual] = {"skipped": message}
            continue
        mine = [q for q in questions if q.manual == manual]
        gold = resolve_gold(mine)
        path = folder / source.name
        shutil.copyfile(readable_pdf(source.path), path)
        started = time.perf_counter()
        tenant = ingest_manual(container, manual, path)
        ingest_s = time.perf_counter() - started
        scored = _score(container, tenant, mine, gold)
        report["manuals"][manual] = {
            "package": source.package,
            "ingest_seconds": round(ingest_s, 1),
            **{
                label: {s: _summary([r for r in rows if r["split"] == s]) for s in SPLITS}
                for label, rows in scored.items()
            },
            "rows": scored,
        }
        for label, rows in scored.items():
            all_rows[label].extend(rows)
    report["all"] = {
        label: {split: _summary([r for r in rows if r["split"] == split]) for split in SPLITS}
        for label, rows in all_rows.items()
    }
    print_manual_table(report)
    return report


def print_manual_table(report: dict[str, Any]) -> None:
    """A markdown table: one row per manual, split and variant."""
    print("\n| manual | split | variant | n | hit@1 | hit@5 | MRR@10 | p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    sections = {**report["manuals"], "all": report["all"]}
    for manual, entry in sections.items():
        if "skipped" in entry:
            continue
        for split in SPLITS:
            for label in VARIANTS:
                m = entry.get(label, {}).get(split)
                if not m:
                    continue
                print(
                    f"| {manual} | {split} | {label} | {int(m['questions'])} | {m['hit@1']:.3f} "
                    f"| {m['hit@5']:.3f} | {m['mrr@10']:.3f} | {m['p50_ms']:.1f} |"
                )


def main() -> None:
    """Resolve every evidence string against the installed PDFs and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-gold", action="store_true", help=f"rewrite {GOLD_FILE.name}")
    parser.add_argument(
        "--manual",
        action="append",
        choices=list(KNOWN_SOURCES),
        help="check only this manual's set (repeatable; cannot be combined with --write-gold)",
    )
    args = parser.parse_args()
    if args.manual and args.write_gold:
        sys.exit("--write-gold rewrites every manual's pages: drop --manual")
    sources = {m: KNOWN_SOURCES[m] for m in args.manual} if args.manual else KNOWN_SOURCES
    missing = missing_sources(sources)
    if missing:
        sys.exit(f"missing PDFs: {', '.join(s.name for s in missing)} ({install_hint(missing)})")
    questions = load_questions(sources=sources)
    try:
        gold = resolve_gold(questions)
    except EvidenceError as exc:
        sys.exit(str(exc))
    print("| manual | group | package | tuning | test | dev | total |")
    print("|---|---|---|---|---|---|---|")
    for manual, row in counts(questions).items():
        source = KNOWN_SOURCES[manual]
        print(
            f"| {manual} | {source.group} | {source.package} | {row['tuning']} | {row['test']} "
            f"| {row['dev']} | {sum(row.values())} |"
        )
    several = sum(1 for pages in gold.values() if len(pages) > 1)
    print(f"\n{len(questions)} questions, all resolved; {several} with more than one gold page")
    if args.manual:
        return
    if args.write_gold:
        GOLD_FILE.write_text(json.dumps(gold, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {GOLD_FILE}")
    elif gold != json.loads(GOLD_FILE.read_text(encoding="utf-8")):
        sys.exit(f"{GOLD_FILE} is stale: the resolved pages differ (rerun with --write-gold)")


if __name__ == "__main__":
    main()
