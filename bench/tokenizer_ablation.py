"""Which tokenizer normalisations help BM25 on real data (XQuAD en/ar, ARCD test)?

Each paragraph is one document, each question has exactly one relevant paragraph. Prints
nDCG@10, MRR and hit@1 per dataset and tokenizer variant, and the BM25 parameters.

    python -m bench.tokenizer_ablation
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import bm25s
import numpy as np

from app.text.tokenizer import Tokenizer, TokenizerOptions
from bench.common import table
from eval.datasets import data_dir

DATA = data_dir()


@dataclasses.dataclass
class QADataset:
    """Paragraphs and (question, index of its gold paragraph) pairs."""

    name: str
    paragraphs: list[str]
    questions: list[tuple[str, int]]


def load_squad(name: str, path: Path) -> QADataset:
    """Read a SQuAD 1.1 file into paragraphs and questions."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    paragraphs: list[str] = []
    questions: list[tuple[str, int]] = []
    for article in raw["data"]:
        for para in article["paragraphs"]:
            paragraphs.append(para["context"])
            questions += [(qa["question"], len(paragraphs) - 1) for qa in para["qas"]]
    return QADataset(name, paragraphs, questions)


def datasets() -> list[QADataset]:
    """The three monolingual sets keyword search can be judged on."""
    return [
        load_squad("xquad-en", DATA / "xquad" / "xquad.en.json"),
        load_squad("xquad-ar", DATA / "xquad" / "xquad.ar.json"),
        load_squad("arcd-test", DATA / "arcd" / "arcd-test.json"),
    ]


def evaluate(ds: QADataset, tokenizer: Tokenizer, k1: float, b: float) -> dict[str, float]:
    """nDCG@10, MRR and hit@1 of BM25 with this tokenizer."""
    index = bm25s.BM25(k1=k1, b=b)
    index.index([tokenizer(p) or [""] for p in ds.paragraphs], show_progress=False)
    ndcg = mrr = hit1 = 0.0
    for question, gold in ds.questions:
        ids = index.get_tokens_ids(tokenizer(question))
        scores = index.get_scores_from_ids(ids) if ids else np.zeros(len(ds.paragraphs))
        # Rank of the gold paragraph; ties broken against it (pessimistic, no lucky ties).
        rank = int((scores >= scores[gold]).sum())
        mrr += 1.0 / rank
        hit1 += rank == 1
        ndcg += 1.0 / math.log2(rank + 1) if rank <= 10 else 0.0
    n = len(ds.questions)
    return {"ndcg@10": ndcg / n, "mrr": mrr / n, "hit@1": hit1 / n}


_OFF = {f.name: False for f in dataclasses.fields(TokenizerOptions)}
BASE = TokenizerOptions(**_OFF)


def _with(**on: bool) -> TokenizerOptions:
    return dataclasses.replace(BASE, **on)


VARIANTS: dict[str, TokenizerOptions] = {
    "base (diacritics+tatweel+alef)": BASE,
    "+ arabic digits": _with(arabic_digits=True),
    "+ ta marbuta->ha": _with(ta_marbuta=True),
    "+ alef maqsura->ya": _with(alef_maqsura=True),
    "+ hamza carriers": _with(hamza_carriers=True),
    "+ article prefix strip": _with(arabic_article=True),
    "+ article + waw strip": _with(arabic_article=True, arabic_waw=True),
    "+ split compounds": _with(split_compounds=True),
    "+ english stopwords": _with(english_stopwords=True),
    "+ all of the above": TokenizerOptions(**{k: True for k in _OFF}),
    "default (chosen)": TokenizerOptions(),
}


def main() -> None:
    """Print one table per BM25 parameter setting."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="1.2:0.75", help="k1:b pairs")
    parser.add_argument("--variant", action="append", help="extra variant as JSON options")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    for extra in args.variant or []:
        variants[extra] = _with(**json.loads(extra))
    sets = datasets()
    for pair in args.params.split(","):
        k1, b = (float(x) for x in pair.split(":"))
        rows = []
        for label, options in variants.items():
            tokenizer = Tokenizer(options)
            row: list[object] = [label]
            for ds in sets:
                m = evaluate(ds, tokenizer, k1, b)
                row += [round(m["ndcg@10"], 4), round(m["mrr"], 4)]
            rows.append(row)
        headers = ["tokenizer"] + [f"{ds.name} {m}" for ds in sets for m in ("nDCG@10", "MRR")]
        print(f"\nBM25 k1={k1} b={b}")
        print(table(headers, rows))


if __name__ == "__main__":
    main()
