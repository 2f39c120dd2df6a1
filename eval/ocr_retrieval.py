"""Retrieval on OCR text against the same pages' real text: nDCG@10 on XQuAD paragraphs
(English, and their Arabic translations) typeset as scanned pages.

Two tenants hold every XQuAD paragraph of a language. In one, the paragraphs of the first
`--articles` held-out articles are scanned pages: typeset at 300 dpi in a DejaVu font with light
noise (eval/scan_render.py), indexed as image-only PDFs through the service's pipeline (OCR).
In the other they are their printed text (a text layer). The other paragraphs are the same text
in both, as distractors. Every question about a scanned paragraph is asked of both tenants in
the service's hybrid mode.

    python -m eval.ocr_retrieval [--articles 6] [--write]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.container import Container
from eval.datasets import RetrievalTask, load_task, xquad_dev_articles
from eval.ocr_quality import error_rates, scan_pdf
from eval.retrieval import evaluate_task, git_commit
from eval.scan_render import ScanStyle, printed_text, render_scan
from testkit.indexing import index_file

RESULTS = Path(__file__).resolve().parent / "results" / "ocr-retrieval.json"
MODE = "hybrid"


def scanned_subset(task: RetrievalTask, articles: int) -> set[str]:
    """Paragraph ids of the first `articles` XQuAD articles outside the dev split: the pages
    that are scanned (the other paragraphs stay text in both tenants, as distractors)."""
    dev = xquad_dev_articles()
    kept = sorted({int(pid.split(":")[1]) for pid in task.paragraphs} - dev)[:articles]
    return {pid for pid in task.paragraphs if int(pid.split(":")[1]) in kept}


def _index(container: Container, tenant: str, path: Path) -> str:
    done = index_file(
        path,
        tenant_id=tenant,
        source=path.name,
        embedder=container.embedder,
        corpus=container.corpus,
        config=container.pipeline_config,
    )
    return done.document_id


def _ocr_text(container: Container, tenant: str, source: str) -> str:
    """The page text OCR produced for one document, rebuilt from its chunks' offsets."""
    chunks = [c for c in container.corpus.iter_chunks(tenant) if c.source == source]
    page = [" "] * max((c.end for c in chunks), default=0)
    for chunk in chunks:
        page[chunk.start : chunk.end] = chunk.text
    return "".join(page)


def evaluate_language(
    container: Container, language: str, articles: int, folder: Path
) -> dict[str, Any]:
    """nDCG@10 and friends on the text layer and on OCR, plus OCR's error rate."""
    task = load_task(f"xquad-{language}-{language}")
    scanned = scanned_subset(task, articles)
    rtl = language == "ar"
    style = ScanStyle(font="sans" if rtl else "serif", points=11, dpi=300, noise=10.0)
    text_docs: dict[str, str] = {}
    ocr_docs: dict[str, str] = {}
    cers: list[float] = []
    ocr_seconds = 0.0
    for number, (pid, paragraph) in enumerate(task.paragraphs.items()):
        printed = printed_text(paragraph, style, rtl) if pid in scanned else paragraph
        task.paragraphs[pid] = printed
        text_path = folder / f"{language}-{number}.txt"
        text_path.write_text(printed, encoding="utf-8")
        text_docs[_index(container, f"text-{language}", text_path)] = pid
        if pid not in scanned:
            ocr_docs[_index(container, f"ocr-{language}", text_path)] = pid
            continue
        scan_path = folder / f"{language}-{number}.pdf"
        scan_path.write_bytes(scan_pdf(render_scan(paragraph, style, rtl, seed=number), 300))
        started = time.perf_counter()
        ocr_docs[_index(container, f"ocr-{language}", scan_path)] = pid
        ocr_seconds += time.perf_counter() - started
        cers.append(
            error_rates(printed, _ocr_text(container, f"ocr-{language}", scan_path.name))[0]
        )
    asked = [q for q in task.questions if q.gold <= scanned]
    subset = RetrievalTask(task.name, task.paragraphs, asked)
    on_text, _ = evaluate_task(container, subset, f"text-{language}", text_docs, [MODE])
    on_ocr, _ = evaluate_task(container, subset, f"ocr-{language}", ocr_docs, [MODE])
    text_metrics, ocr_metrics = on_text[MODE].metrics, on_ocr[MODE].metrics
    return {
        "paragraphs": len(task.paragraphs),
        "scanned_paragraphs": len(scanned),
        "questions": len(asked),
        "text_layer": text_metrics,
        "ocr": ocr_metrics,
        "ndcg@10_gap": round(text_metrics["ndcg@10"] - ocr_metrics["ndcg@10"], 4),
        "mean_cer": round(sum(cers) / len(cers), 4),
        "seconds_per_scanned_page": round(ocr_seconds / len(scanned), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=6, help="held-out XQuAD articles")
    parser.add_argument("--languages", nargs="+", default=["en", "ar"])
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    report: dict[str, Any] = {"commit": git_commit(), "mode": MODE}
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        container = Container(settings)
        for language in args.languages:
            folder = Path(data) / f"pages-{language}"
            folder.mkdir()
            report[language] = evaluate_language(container, language, args.articles, folder)
            print(language, json.dumps(report[language]), flush=True)
    print("\n| language | scanned pages | questions | nDCG@10 text | nDCG@10 OCR | gap | CER |")
    print("|---|---|---|---|---|---|---|")
    for language in args.languages:
        r = report[language]
        print(
            f"| {language} | {r['scanned_paragraphs']} | {r['questions']} | "
            f"{r['text_layer']['ndcg@10']:.3f} | {r['ocr']['ndcg@10']:.3f} | "
            f"{r['ndcg@10_gap']:+.3f} | {r['mean_cer']:.3f} |"
        )
    if args.write:
        RESULTS.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    main()
