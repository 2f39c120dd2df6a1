"""Re-scoring recorded manual answers under other citation rules or abstain thresholds.

The citation checks (app/generation/grounding.py) and the abstain threshold act on what the
model wrote and on its first-token refusal probability, never on what it writes next, so an
answer recorded with its passages and the model's own text (`--abstain-threshold 1.0` keeps the
text of answers a lower threshold would refuse) can be re-scored without the model: the
recorded text goes through the service's own marker filter, closing marker and refusal checks
(`ground`, `closing_text`, `settle`) with the rules under test.

    python -m eval.answer_replay eval/results/answers-manuals-tuning-llamacpp-dev-t1.json \
        [--threshold 0.05] [--rules today uncited-lead-0.15 ...]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.domain import Chunk, SearchHit
from app.generation import grounding
from app.generation.grounded_answer import Draft, closing_text, ground, settle
from app.providers.embeddings import build_embedder
from app.providers.types import LLM, ChatRequest, Embedder, LLMDelta
from eval.metrics import cites_gold

REFUSAL_TEXT: str = Settings.model_fields["refusal_text"].default  # what the runs used


class RecordingLLM:
    """An LLM that passes its model's deltas through and keeps the reply's raw text."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        self.text: str | None = None  # the last reply as the model wrote it

    @property
    def model_id(self) -> str:
        return self._llm.model_id

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        self.text = ""
        for delta in self._llm.stream(request):
            self.text += delta.text
            yield delta

    def take(self) -> str | None:
        """The raw text of the reply since the last take (None when the model was not asked)."""
        text, self.text = self.text, None
        return text


@dataclass(frozen=True)
class Rules:
    """The citation checks' thresholds (app/generation/grounding.py's names)."""

    weak_support: float = grounding.WEAK_SUPPORT
    strong_support: float = grounding.STRONG_SUPPORT
    clear_support: float = grounding.CLEAR_SUPPORT
    uncited_support: float = grounding.UNCITED_SUPPORT
    lead: float = grounding.LEAD
    embedding_lead: float = grounding.EMBEDDING_LEAD


@contextmanager
def _thresholds(rules: Rules) -> Iterator[None]:
    """The grounding module's thresholds set to `rules` for the block, then restored."""
    names = {
        "WEAK_SUPPORT": rules.weak_support,
        "STRONG_SUPPORT": rules.strong_support,
        "CLEAR_SUPPORT": rules.clear_support,
        "UNCITED_SUPPORT": rules.uncited_support,
        "LEAD": rules.lead,
        "EMBEDDING_LEAD": rules.embedding_lead,
    }
    before = {name: getattr(grounding, name) for name in names}
    for name, value in names.items():
        setattr(grounding, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(grounding, name, value)


def _hits(row: dict[str, Any]) -> list[SearchHit]:
    return [
        SearchHit(
            chunk=Chunk(
                id=f"{row['id']}-{place}",
                tenant_id="replay",
                document_id=row["manual"],
                source=row["manual"],
                page=page,
                page_label=str(page),
                chunk_index=place,
                start=0,
                end=len(text),
                text=text,
            ),
            score=1.0,
        )
        for place, (page, text) in enumerate(
            zip(row["shown_pages"], row["shown_texts"], strict=True)
        )
    ]


@cache
def shipped_embedder() -> Embedder:
    """The service's default embedder (the citation check's, as the runs answered with it)."""
    return build_embedder(load_settings(_env_file=None, embedding_provider="use"))


def replay(
    row: dict[str, Any],
    threshold: float,
    rules: Rules = Rules(),
    embedder: Embedder | None = None,
) -> tuple[bool, list[int]]:
    """(refused, cited pages) of one recorded answer under `threshold` and `rules`, the
    citation check comparing with `embedder` (None: terms only)."""
    text = row.get("model_text")
    probability = row.get("refusal_probability")
    if text is None or (probability is not None and probability >= threshold):
        return True, []
    with _thresholds(rules):
        prompt = ground(row["question"], _hits(row), REFUSAL_TEXT, embedder)
        draft = Draft(refusal_probability=probability)
        shown = prompt.markers.feed(text)
        if shown:
            draft.shown.append(shown)
        tail = closing_text(prompt, shown, REFUSAL_TEXT)
        if tail:
            draft.shown.append(tail)
        answer = settle(prompt, draft, REFUSAL_TEXT, "replay")
    return answer.refused, [c.page for c in answer.citations]


def cause(row: dict[str, Any], refused: bool, cited: list[int]) -> str:
    """Why an answer does not cite a gold page ("" when it does), as eval.answers counts it."""
    if cites_gold(cited, row["gold_pages"]):
        return ""
    if not set(row["shown_pages"]) & set(row["gold_pages"]):
        return "gold_not_shown"
    return "refused_gold_shown" if refused else "other_cited"


def rescore(
    rows: list[dict[str, Any]],
    threshold: float,
    rules: Rules = Rules(),
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Cites-gold share, refusals and the count of each cause, overall and per manual."""
    scored = []
    for row in rows:
        refused, cited = replay(row, threshold, rules, embedder)
        scored.append((row["manual"], refused, cause(row, refused, cited)))

    def summary(items: list[tuple[str, bool, str]]) -> dict[str, float]:
        causes = [c for _, _, c in items]
        return {
            "questions": len(items),
            "cites_gold": causes.count("") / len(items),
            "refused": sum(r for _, r, _ in items) / len(items),
            **{c: causes.count(c) for c in ("gold_not_shown", "other_cited", "refused_gold_shown")},
        }

    manuals = dict.fromkeys(m for m, _, _ in scored)
    return {
        "all": summary(scored),
        "manuals": {m: summary([s for s in scored if s[0] == m]) for m in manuals},
    }


# Candidate rule sets, by name: today's, the terms alone (no embedder check), other cosine
# leads for the embedder check, and looser variants of the uncited-answer rule (the model often
# writes the answer of one passage and no marker) and of the term re-pointing rules.
CANDIDATES: dict[str, Rules] = {
    "today": Rules(),
    "terms-only": Rules(embedding_lead=0.0),
    "embedding-0.05": Rules(embedding_lead=0.05),
    "embedding-0.15": Rules(embedding_lead=0.15),
    "embedding-0.2": Rules(embedding_lead=0.2),
    "uncited-0.3": Rules(uncited_support=0.3),
    "uncited-lead-0.15": Rules(lead=0.15),
    "uncited-0.3-lead-0.15": Rules(uncited_support=0.3, lead=0.15),
    "strong-0.7": Rules(strong_support=0.7),
    "weak-0.6": Rules(weak_support=0.6),
    "clear-0.5": Rules(clear_support=0.5),
}


def print_table(label: str, rows: dict[str, dict[str, float]]) -> None:
    """A markdown table: one row per label (rules or manual)."""
    print(
        f"| {label} | n | cites gold | refused | gold not shown | other cited "
        "| refused, gold shown |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, s in rows.items():
        print(
            f"| {name} | {s['questions']} | {s['cites_gold']:.3f} | {s['refused']:.2f} "
            f"| {s['gold_not_shown']} | {s['other_cited']} | {s['refused_gold_shown']} |"
        )


def paragraph_row(answer: dict[str, Any]) -> dict[str, Any]:
    """An XQuAD / ARCD answer (eval.answers' `Outcome` with its recorded passages) in the
    manual rows' shape: the shown passages' places stand for pages, the gold ones for gold."""
    places = list(range(1, len(answer["shown_texts"]) + 1))
    return {
        "id": answer["question"],
        "manual": answer["task"],
        "question": answer["question"],
        "gold_pages": [p for p, gold in zip(places, answer["shown_is_gold"], strict=True) if gold],
        "shown_pages": places,
        "shown_texts": answer["shown_texts"],
        "model_text": answer["model_text"],
        "refusal_probability": answer["refusal_probability"],
    }


def replay_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a results file can replay: every manual answer, or the answerable paragraph
    answers that recorded their passages (a re-pointed marker cannot change a refusal)."""
    return [
        paragraph_row(a) if "task" in a else a
        for a in report["answers"]
        if "task" not in a or (a["setting"] == "answerable" and "shown_texts" in a)
    ]


def print_cases(
    rows: list[dict[str, Any]], threshold: float, rules: Rules, embedder: Embedder
) -> None:
    """Every answer missing a gold page under `rules` with its cause, and every answer whose
    citations the rules change against the terms alone."""
    for row in rows:
        refused, cited = replay(row, threshold, rules, embedder)
        before = replay(row, threshold, Rules(embedding_lead=0.0), embedder)
        why = cause(row, refused, cited)
        if why or before != (refused, cited):
            print(
                f"{row['manual']} {row['id'][:60]!r}: {why or 'cites gold'}; gold "
                f"{row['gold_pages']}, shown {row['shown_pages']}, cited {cited} "
                f"(terms only: {before[1]})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--rules", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--per-manual", action="store_true", help="one row per manual as well")
    parser.add_argument(
        "--cases", action="store_true", help="each miss and each change of the first rules"
    )
    args = parser.parse_args()
    rows = [
        row
        for path in args.results
        for row in replay_rows(json.loads(path.read_text(encoding="utf-8")))
    ]
    embedder = shipped_embedder()
    scores = {
        name: rescore(rows, args.threshold, CANDIDATES[name], embedder) for name in args.rules
    }
    print_table("rules", {name: s["all"] for name, s in scores.items()})
    if args.cases:
        print_cases(rows, args.threshold, CANDIDATES[args.rules[0]], embedder)
    if args.per_manual:
        for name, s in scores.items():
            print(f"\nrules: {name}")
            print_table("manual", {**s["manuals"], "all": s["all"]})


if __name__ == "__main__":
    main()
