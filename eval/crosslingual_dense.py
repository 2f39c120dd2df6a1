"""Cross-lingual dense variants of the shipped USE model, measured on cached vectors.

The last tuning target (XQuAD ar->en) needs a better cross-lingual dense arm: 88% of the Arabic
questions over English text match no keyword, so every fusion ranks them by the dense arm alone.
This script embeds the XQuAD (en, ar) and ARCD (train, test) paragraphs and questions once with the
real USE model (cached in --cache), then scores dense nDCG@10 of each variant on the tuning
questions (XQuAD dev split, ARCD train) and on the held-out ones (XQuAD remainder, ARCD test). Every
fitted constant (language means, principal components) comes from tuning text only: the XQuAD dev
articles' paragraphs and questions and ARCD train.

    python -m eval.crosslingual_dense [--cache eval/.cache/use-xling.npz]

Paragraphs are embedded whole (the service splits 44 of 240 English XQuAD paragraphs into two
chunks at RAG_CHUNK_SIZE=1000); the service's own numbers come from eval.retrieval.

Measured (README, "Question centring"): language-mean centring of both sides helps a little only
with each side's own mean; Rocchio feedback loses everywhere; subtracting 0.75 x the pooled mean
question from each question wins on the tuning sets and on every held-out task. `--write`
regenerates app/providers/use_question_mean.py (the mean and the scale that won).
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.providers.embeddings import l2_normalise, use_embedder
from eval.datasets import load_task, xquad_dev_articles, xquad_split

Matrix = npt.NDArray[np.float32]
XQUAD = ("xquad-en-en", "xquad-ar-ar", "xquad-ar-en", "xquad-en-ar")
TASKS = (*XQUAD, "arcd-train", "arcd-test")
# Which paragraph set and which question set (by language) each task uses.
PARAGRAPHS_OF = {
    "xquad-en-en": "xquad-en",
    "xquad-ar-en": "xquad-en",
    "xquad-ar-ar": "xquad-ar",
    "xquad-en-ar": "xquad-ar",
    "arcd-train": "arcd-train",
    "arcd-test": "arcd-test",
}
LANGUAGE_OF = {"xquad-en": "en", "xquad-ar": "ar", "arcd-train": "ar", "arcd-test": "ar"}


@dataclass
class Split:
    """One task's question vectors, the gold paragraph row of each, and which are tuning ones."""

    paragraphs: str  # key of the paragraph set
    question_language: str
    questions: Matrix
    gold: npt.NDArray[np.int64]
    tuning: npt.NDArray[np.bool_]
    # The article of each question's gold paragraph ("xquad:7", "arcd-train:12"): the unit the
    # tuning estimates of fitted constants leave out (cross-fitting).
    article: list[str]


def embed_all(cache: Path) -> tuple[dict[str, Matrix], dict[str, list[str]], dict[str, Split]]:
    """Paragraph vectors and ids per set, and every task's questions (cached)."""
    tasks = {name: load_task(name) for name in TASKS}
    paragraph_ids = {PARAGRAPHS_OF[name]: list(task.paragraphs) for name, task in tasks.items()}
    texts = {PARAGRAPHS_OF[name]: list(task.paragraphs.values()) for name, task in tasks.items()}
    question_texts = {name: [q.text for q in task.questions] for name, task in tasks.items()}
    if cache.is_file():
        stored = np.load(cache)
        vectors = {key: stored[key] for key in stored.files}
    else:
        # Questions through the passage side: USE has one encoder, and this is its own output
        # (no question centring), what every variant starts from.
        embedder = use_embedder(threads=2, batch_size=64, centre_questions=False)

        def encode(batch: list[str]) -> Matrix:
            return np.asarray(embedder.embed_documents(batch), dtype=np.float32)

        vectors = {f"p:{key}": encode(value) for key, value in texts.items()}
        vectors |= {f"q:{name}": encode(value) for name, value in question_texts.items()}
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **vectors)  # type: ignore[arg-type]
    splits: dict[str, Split] = {}
    for name, task in tasks.items():
        row = {pid: i for i, pid in enumerate(paragraph_ids[PARAGRAPHS_OF[name]])}
        if name.startswith("xquad-"):
            dev_ids = {q.id for q in xquad_split(task)[0]}
        else:
            dev_ids = {q.id for q in task.questions} if name == "arcd-train" else set()
        question_language = "en" if name in ("xquad-en-en", "xquad-en-ar") else "ar"
        splits[name] = Split(
            PARAGRAPHS_OF[name],
            question_language,
            vectors[f"q:{name}"],
            np.array([row[next(iter(q.gold))] for q in task.questions]),
            np.array([q.id in dev_ids for q in task.questions]),
            [_article(name, next(iter(q.gold))) for q in task.questions],
        )
    paragraphs = {key: vectors[f"p:{key}"] for key in texts}
    return paragraphs, paragraph_ids, splits


def _article(task: str, paragraph_id: str) -> str:
    corpus = "xquad" if task.startswith("xquad-") else task
    return f"{corpus}:{paragraph_id.split(':')[1]}"


def ndcg10(scores: Matrix, gold: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per-question nDCG@10 with one gold paragraph, from a question x paragraph score matrix."""
    gold_score = scores[np.arange(len(gold)), gold][:, None]
    rank = (scores > gold_score).sum(axis=1) + 1
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1), 0.0)


@dataclass(frozen=True)
class Fitted:
    """Constants fitted on tuning text: per-language means of paragraphs and of questions."""

    paragraph_mean: dict[str, Matrix]
    question_mean: dict[str, Matrix]
    pooled_mean: dict[str, Matrix]


def fit(
    paragraphs: dict[str, Matrix], ids: dict[str, list[str]], splits: dict[str, Split]
) -> Fitted:
    """Language means from the XQuAD dev articles (en, ar) and ARCD train (ar) only."""
    dev = xquad_dev_articles()

    def dev_rows(key: str) -> Matrix:
        keep = [int(pid.split(":")[1]) in dev for pid in ids[key]]
        rows: Matrix = paragraphs[key][np.array(keep)]
        return rows

    para = {
        "en": dev_rows("xquad-en"),
        "ar": np.concatenate([dev_rows("xquad-ar"), paragraphs["arcd-train"]]),
    }
    ques = {
        "en": splits["xquad-en-en"].questions[splits["xquad-en-en"].tuning],
        "ar": np.concatenate(
            [
                splits["xquad-ar-ar"].questions[splits["xquad-ar-ar"].tuning],
                splits["arcd-train"].questions,
            ]
        ),
    }
    return Fitted(
        {lang: m.mean(axis=0) for lang, m in para.items()},
        {lang: m.mean(axis=0) for lang, m in ques.items()},
        {lang: np.concatenate([para[lang], ques[lang]]).mean(axis=0) for lang in para},
    )


# A variant maps (question vectors, question language, paragraph vectors, paragraph language) to
# a score matrix.
Variant = Callable[[Matrix, str, Matrix, str], Matrix]


def raw(q: Matrix, ql: str, p: Matrix, pl: str) -> Matrix:
    """Cosine of the model's own vectors (the shipped dense arm)."""
    return q @ p.T


def centred(
    query_means: dict[str, Matrix], paragraph_means: dict[str, Matrix], scale: float = 1.0
) -> Variant:
    """Subtract `scale` x each side's language mean, renormalise, cosine."""

    def variant(q: Matrix, ql: str, p: Matrix, pl: str) -> Matrix:
        qc = l2_normalise(q - scale * query_means[ql])
        pc = l2_normalise(p - scale * paragraph_means[pl])
        return qc @ pc.T

    return variant


def rocchio(
    base: Variant, prepare: Callable[[Matrix, str], Matrix], depth: int, alpha: float
) -> Variant:
    """Dense pseudo-relevance feedback: q' = q + alpha x mean of the top `depth` paragraphs."""

    def variant(q: Matrix, ql: str, p: Matrix, pl: str) -> Matrix:
        scores = base(q, ql, p, pl)
        qv = prepare(q, ql)
        pv = prepare(p, pl)
        top = np.argsort(-scores, axis=1)[:, :depth]
        expanded = l2_normalise(qv + alpha * pv[top].mean(axis=1))
        return expanded @ pv.T

    return variant


def question_pools(splits: dict[str, Split]) -> dict[str, tuple[Matrix, list[str]]]:
    """The tuning questions of each language with their articles (what question means fit on)."""
    en, ar, train = splits["xquad-en-en"], splits["xquad-ar-ar"], splits["arcd-train"]

    def tuning_articles(split: Split) -> list[str]:
        return [a for a, tuning in zip(split.article, split.tuning, strict=True) if tuning]

    return {
        "en": (en.questions[en.tuning], tuning_articles(en)),
        "ar": (
            np.concatenate([ar.questions[ar.tuning], train.questions]),
            tuning_articles(ar) + train.article,
        ),
    }


def question_means(
    pools: dict[str, tuple[Matrix, list[str]]], languages: tuple[str, ...], split: Split
) -> Matrix:
    """For each question of `split`, the mean of the tuning questions of `languages`; a tuning
    question's own article is left out (cross-fitting), so tuning scores are not in-sample."""
    vectors = np.concatenate([pools[lang][0] for lang in languages])
    articles = [a for lang in languages for a in pools[lang][1]]
    total, count = vectors.sum(axis=0), len(vectors)
    sums: dict[str, Matrix] = {}
    counts: dict[str, int] = {}
    for article, vector in zip(articles, vectors, strict=True):
        sums[article] = sums.get(article, 0) + vector
        counts[article] = counts.get(article, 0) + 1
    rows = []
    for article, tuning in zip(split.article, split.tuning, strict=True):
        if tuning and article in sums:
            rows.append((total - sums[article]) / (count - counts[article]))
        else:
            rows.append(total / count)
    return np.asarray(rows, dtype=np.float32)


def query_shift(
    pools: dict[str, tuple[Matrix, list[str]]], pooled: bool, scale: float
) -> Callable[[Split], Matrix]:
    """The question vectors minus `scale` x the mean question (of their language, or of all)."""

    def shift(split: Split) -> Matrix:
        languages = ("en", "ar") if pooled else (split.question_language,)
        return l2_normalise(split.questions - scale * question_means(pools, languages, split))

    return shift


def evaluate_shift(
    shift: Callable[[Split], Matrix], paragraphs: dict[str, Matrix], splits: dict[str, Split]
) -> dict[str, tuple[float, float]]:
    """(tuning, held-out) mean nDCG@10 per task with shifted question vectors, raw paragraphs."""
    out = {}
    for name, split in splits.items():
        per_q = ndcg10(shift(split) @ paragraphs[split.paragraphs].T, split.gold)
        tune = float(per_q[split.tuning].mean()) if split.tuning.any() else float("nan")
        held = float(per_q[~split.tuning].mean()) if (~split.tuning).any() else float("nan")
        out[name] = (tune, held)
    return out


def evaluate(
    variant: Variant, paragraphs: dict[str, Matrix], splits: dict[str, Split]
) -> dict[str, tuple[float, float]]:
    """(tuning, held-out) mean nDCG@10 per task."""
    out = {}
    for name, split in splits.items():
        p = paragraphs[split.paragraphs]
        per_q = ndcg10(
            variant(split.questions, split.question_language, p, LANGUAGE_OF[split.paragraphs]),
            split.gold,
        )
        tune = float(per_q[split.tuning].mean()) if split.tuning.any() else float("nan")
        held = float(per_q[~split.tuning].mean()) if (~split.tuning).any() else float("nan")
        out[name] = (tune, held)
    return out


SCALES = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
CONSTANTS = Path(__file__).resolve().parents[1] / "app" / "providers" / "use_question_mean.py"
# Vectors kept between runs, in the checkout's eval/.cache (ignored by git).
CACHE = Path(__file__).resolve().parent / ".cache" / "use-xling.npz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument(
        "--write", action="store_true", help=f"write the chosen question mean to {CONSTANTS}"
    )
    args = parser.parse_args()
    paragraphs, ids, splits = embed_all(args.cache)
    fitted = fit(paragraphs, ids, splits)
    zero = {lang: np.zeros_like(m) for lang, m in fitted.paragraph_mean.items()}
    print("Fitted on all tuning text (so the tuning columns are in-sample for the centred rows):")
    variants: dict[str, Variant] = {"raw": raw}
    for scale in (0.5, 1.0):
        variants[f"centre both sides, paragraph means x{scale}"] = centred(
            fitted.paragraph_mean, fitted.paragraph_mean, scale
        )
        variants[f"centre both sides, paragraph+question means x{scale}"] = centred(
            fitted.pooled_mean, fitted.pooled_mean, scale
        )
        variants[f"centre both sides, each side's own means x{scale}"] = centred(
            fitted.question_mean, fitted.paragraph_mean, scale
        )
    variants["centre questions only (own-language question mean)"] = centred(
        fitted.question_mean, zero
    )
    for depth, alpha in itertools.product((1, 3, 5), (0.25, 0.5, 1.0)):
        variants[f"Rocchio PRF top {depth}, alpha {alpha}"] = rocchio(
            raw, lambda m, _l: m, depth, alpha
        )
    print_table(variants, paragraphs, splits)
    pools = question_pools(splits)
    print("\nQuestions minus a mean question (cross-fitted: a tuning question's own article is")
    print("left out of the mean), paragraphs raw:")
    pooled_means: dict[float, float] = {}
    for pooled, scale in itertools.product((False, True), SCALES):
        label = f"question minus {'pooled' if pooled else 'own-language'} mean question x{scale}"
        result = evaluate_shift(query_shift(pools, pooled, scale), paragraphs, splits)
        tuning_mean = print_row(label, result)
        if pooled:
            pooled_means[scale] = tuning_mean
    if args.write:
        best = max(SCALES, key=lambda scale: pooled_means[scale])
        write_constants(pools, best)


def write_constants(pools: dict[str, tuple[Matrix, list[str]]], scale: float) -> None:
    """The pooled mean of every tuning question (en and ar) and the chosen scale, as Python."""
    vectors = np.concatenate([pools["en"][0], pools["ar"][0]])
    mean = vectors.mean(axis=0)
    lines = [
        f"    {', '.join(f'{v:.6f}' for v in mean[i : i + 8])}," for i in range(0, len(mean), 8)
    ]
    english, arabic = len(pools["en"][0]), len(pools["ar"][0])
    CONSTANTS.write_text(
        '"""The mean question vector of USE multilingual v3 and how much of it to subtract.\n\n'
        "Generated by `python -m eval.crosslingual_dense --write` from tuning questions only\n"
        f"({english} English XQuAD dev; {arabic} Arabic XQuAD dev and ARCD train); the scale\n"
        "won on the tuning sets (cross-fitted by article). Do not edit by hand.\n"
        '"""\n\n'
        f"QUESTION_MEAN_SCALE = {scale}\n\n"
        "# fmt: off\n"
        "QUESTION_MEAN: tuple[float, ...] = (\n" + "\n".join(lines) + "\n)\n"
        "# fmt: on\n",
        encoding="utf-8",
    )
    print(f"\nwrote {CONSTANTS} (scale {scale}, {len(vectors)} questions)")


TUNING_COLUMNS = ("xquad-en-en", "xquad-ar-ar", "xquad-ar-en", "xquad-en-ar", "arcd-train")
HELD_OUT_COLUMNS = ("xquad-en-en", "xquad-ar-ar", "xquad-ar-en", "xquad-en-ar", "arcd-test")


def print_table(
    variants: dict[str, Variant], paragraphs: dict[str, Matrix], splits: dict[str, Split]
) -> None:
    """Tuning and held-out nDCG@10 per task for each variant."""
    print(
        "| variant | tuning mean | "
        + " | ".join(f"tune {n}" for n in TUNING_COLUMNS)
        + " | "
        + " | ".join(f"held {n}" for n in HELD_OUT_COLUMNS)
        + " |"
    )
    for label, variant in variants.items():
        print_row(label, evaluate(variant, paragraphs, splits))


def print_row(label: str, result: dict[str, tuple[float, float]]) -> float:
    """One table row: the tuning mean, then tuning and held-out nDCG@10 per task."""
    tune_mean = float(np.mean([result[n][0] for n in TUNING_COLUMNS]))
    cells = [f"{result[n][0]:.3f}" for n in TUNING_COLUMNS]
    cells += [f"{result[n][1]:.3f}" for n in HELD_OUT_COLUMNS]
    print(f"| {label} | {tune_mean:.4f} | " + " | ".join(cells) + " |", flush=True)
    return tune_mean


if __name__ == "__main__":
    main()
