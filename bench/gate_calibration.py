"""Calibrate the relevance gate per embedding model on XQuAD (en, ar) and ARCD test.

Answerable: a question with its gold paragraph indexed (best similarity over all paragraphs).
Unanswerable: the same question with its gold paragraph removed (best over the others) — a hard
case, since sibling paragraphs of the same article stay; and, easier and closer to real misuse,
questions of another corpus (ARCD questions over XQuAD-ar paragraphs, XQuAD-ar over ARCD).
The threshold kept is the highest that still keeps >= 95% of answerable questions.

    python -m bench.gate_calibration [--models use,e5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import numpy as np

from app.config import load_settings
from app.providers.embeddings import build_embedder
from app.providers.types import Embedder
from bench.common import table
from bench.tokenizer_ablation import QADataset, datasets

KEEP = 0.95


# Embeddings kept between runs: RAG_BENCH_CACHE, else the checkout's tmp/bench-cache (ignored).
CHECKOUT_CACHE = Path(__file__).resolve().parents[1] / "tmp" / "bench-cache"
CACHE = Path(os.environ.get("RAG_BENCH_CACHE", CHECKOUT_CACHE))


def embedded(embedder: Embedder, ds: QADataset) -> tuple[np.ndarray, np.ndarray]:
    """(paragraph vectors, question vectors), cached on disk per model and dataset.

    The key holds a digest of a probe question's vector too: a change in how questions are
    embedded (the USE question centring) keeps the model id, since stored vectors stay valid."""
    probe = np.round(np.asarray(embedder.embed_query("cache probe")), 5).tobytes()
    digest = hashlib.sha256(probe).hexdigest()[:8]
    safe = "".join(ch if ch.isalnum() else "_" for ch in embedder.model_id) + "-" + digest
    path = CACHE / f"{safe}-{ds.name}.npz"
    if path.exists():
        cached = np.load(path)
        return cached["paragraphs"], cached["questions"]
    paragraphs = np.array(embedder.embed_documents(ds.paragraphs))
    questions = np.array([embedder.embed_query(q) for q, _ in ds.questions])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, paragraphs=paragraphs, questions=questions)
    return paragraphs, questions


def best_similarities(
    paragraphs: np.ndarray, questions: np.ndarray, gold: np.ndarray, foreign: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(answerable best, gold-removed best, foreign-question best) similarities."""
    sims = questions @ paragraphs.T
    answerable = sims.max(axis=1)
    masked = sims.copy()
    masked[np.arange(len(gold)), gold] = -np.inf
    removed = masked.max(axis=1)
    foreign_best = (foreign @ paragraphs.T).max(axis=1)
    return answerable, removed, foreign_best


def main() -> None:
    """Print per model and dataset: kept %, refused % (gold removed, foreign) at the threshold."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="use,e5")
    args = parser.parse_args()
    sets = {ds.name: ds for ds in datasets()}
    foreign_of = {"xquad-en": "arcd-test", "xquad-ar": "arcd-test", "arcd-test": "xquad-ar"}
    for provider in args.models.split(","):
        embedder = build_embedder(load_settings(_env_file=None, embedding_provider=provider))
        vectors = {name: embedded(embedder, ds) for name, ds in sets.items()}
        per_set = {}
        for name, ds in sets.items():
            gold = np.array([g for _, g in ds.questions])
            foreign = vectors[foreign_of[name]][1]
            per_set[name] = best_similarities(*vectors[name], gold, foreign)
        pooled = np.concatenate([v[0] for v in per_set.values()])
        threshold = float(np.quantile(pooled, 1 - KEEP))
        rows = []
        for name, (ans, removed, foreign) in per_set.items():
            rows.append(
                [
                    name,
                    round(float(np.median(ans)), 3),
                    round(float(np.median(removed)), 3),
                    round(float(np.median(foreign)), 3),
                    f"{(ans >= threshold).mean():.1%}",
                    f"{(removed < threshold).mean():.1%}",
                    f"{(foreign < threshold).mean():.1%}",
                ]
            )
        removed_all = np.concatenate([v[1] for v in per_set.values()])
        foreign_all = np.concatenate([v[2] for v in per_set.values()])
        sweep = []
        for keep in (0.99, 0.95, 0.90, 0.80, 0.70):
            cut = float(np.quantile(pooled, 1 - keep))
            sweep.append(
                [
                    f"{cut:.3f}",
                    f"{(pooled >= cut).mean():.1%}",
                    f"{(removed_all < cut).mean():.1%}",
                    f"{(foreign_all < cut).mean():.1%}",
                ]
            )
        print(f"\n{embedder.model_id}: trade-off, all datasets pooled")
        print(
            table(["threshold", "answerable kept", "gold-removed refused", "other refused"], sweep)
        )
        print(f"\n{embedder.model_id}: threshold {threshold:.3f} (keeps {KEEP:.0%} pooled)")
        print(
            table(
                [
                    "dataset",
                    "median best (gold in)",
                    "median best (gold out)",
                    "median best (other corpus)",
                    "answerable kept",
                    "gold-removed refused",
                    "other-corpus refused",
                ],
                rows,
            )
        )


if __name__ == "__main__":
    main()
