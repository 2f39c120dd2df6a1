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

import numpy as np

from app.config import load_settings
from app.providers.embeddings import build_embedder
from bench.common import table
from bench.tokenizer_ablation import QADataset, datasets

KEEP = 0.95


def _embed(embedder: object, texts: list[str], query: bool) -> np.ndarray:
    if query:
        return np.array([embedder.embed_query(t) for t in texts])  # type: ignore[attr-defined]
    return np.array(embedder.embed_documents(texts))  # type: ignore[attr-defined]


def best_similarities(
    embedder: object, ds: QADataset, foreign: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(answerable best, gold-removed best, foreign-question best) similarities."""
    paragraphs = _embed(embedder, ds.paragraphs, query=False)
    questions = _embed(embedder, [q for q, _ in ds.questions], query=True)
    gold = np.array([g for _, g in ds.questions])
    sims = questions @ paragraphs.T
    answerable = sims.max(axis=1)
    masked = sims.copy()
    masked[np.arange(len(gold)), gold] = -np.inf
    removed = masked.max(axis=1)
    foreign_best = (_embed(embedder, foreign, query=True) @ paragraphs.T).max(axis=1)
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
        per_set = {}
        for name, ds in sets.items():
            foreign = [q for q, _ in sets[foreign_of[name]].questions][:300]
            per_set[name] = best_similarities(embedder, ds, foreign)
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
