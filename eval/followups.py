"""Follow-up questions: retrieval hit@5 of the raw follow-up, the fallback and the LLM rewrite.

The follow-ups are made from XQuAD English, deterministically (no one wrote them by hand):
a question Q2 whose subject, a capitalised name such as "Tesla" or "Super Bowl", also appears in
an earlier question Q1 of the same article becomes a follow-up by replacing that name with "it"
("its" for a possessive, "the Panthers" -> "it"). Q1 is the conversation's first question and its
gold answer span is the assistant's reply; Q2's gold paragraph is the follow-up's gold. Two sets:

- same-paragraph: Q1 asks about the same paragraph as Q2 (the follow-up stays on the passage);
- other-paragraph: Q1 asks about another paragraph of the article (the follow-up moves on, so
  the previous question can pull retrieval toward the wrong passage).

And each with three turns ("..., 3 turns"): a third question Q3 of the article naming the same
subject becomes the last follow-up, and Q2 (made a follow-up the same way) is the middle turn, so
only the first question names the subject. Same paragraph: Q1, Q2 and Q3 ask about one paragraph;
other paragraph: Q1 and Q2 ask about paragraphs other than Q3's.

All 240 paragraphs are ingested through the service's pipeline into one tenant and each question
is asked through the service's retriever (its default mode), top 5 documents.

    python -m eval.followups [--limit 30] [--llm llamacpp|none]

Prints a table and writes eval/results/followups-<llm>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.container import Container
from app.providers.types import LLM
from app.services.blocks.followups import Turn, fallback_question, standalone_question
from eval.datasets import Question, load_task
from eval.metrics import hit_at_k
from eval.retrieval import RESULTS_DIR, git_commit, ingest_paragraphs, portable_model_id

TENANT = "followups"
# A run of capitalised words ("Super Bowl", "Nikola Tesla"); the question's first word is skipped.
_NAME = re.compile(r"[A-Z][A-Za-z0-9\-]+(?:\s+[A-Z][A-Za-z0-9\-]+)*")
VARIANTS = ("same-paragraph", "other-paragraph")
# Questions in a conversation: the follow-up is the last; only the first names the subject.
TURNS = (2, 3)


@dataclass(frozen=True)
class FollowUp:
    """The turns before (the first question as asked, then follow-ups, each with its reply), the
    last follow-up, the question it was made from and that question's gold paragraph."""

    earlier: tuple[Turn, ...]
    follow_up: str
    original: str
    gold: str


def _names(question: str) -> list[str]:
    return [m.group(0) for m in _NAME.finditer(question) if m.start() > 0 and len(m.group(0)) >= 4]


def _mentions(text: str, name: str) -> bool:
    return re.search(r"\b" + re.escape(name) + r"\b", text) is not None


def as_follow_up(question: str, subject: str) -> str | None:
    """`question` with `subject` replaced by a pronoun, or None when it does not occur once.

    Possessives become "its"; an attributive use ("the Panthers defense") becomes "it defense",
    ungrammatical but still a follow-up a user could type."""
    if len(re.findall(r"\b" + re.escape(subject) + r"\b", question)) != 1:
        return None
    pattern = re.compile(r"(?:\b[Tt]he\s+)?\b" + re.escape(subject) + r"\b(['’]s|['’])?")
    return pattern.sub(lambda m: "its" if m.group(1) else "it", question, count=1)


def _paragraph(question: Question) -> str:
    return next(iter(question.gold))


def _reply(question: Question) -> str:
    return (question.answers[0] if question.answers else "") + "."


def _middle_turn(
    candidates: list[Question], taken: tuple[Question, ...], subject: str, variant: str, gold: str
) -> Turn | None:
    """A question of the article about `subject` made a follow-up, as the middle turn, on the
    gold paragraph (same-paragraph) or off it (other-paragraph); None when there is none."""
    for middle in candidates:
        if middle in taken or (_paragraph(middle) == gold) != (variant == "same-paragraph"):
            continue
        follow_up = as_follow_up(middle.text, subject)
        if follow_up is not None:
            return Turn(follow_up, _reply(middle))
    return None


def _conversation(
    article_questions: list[Question], last: Question, variant: str, turns: int
) -> FollowUp | None:
    """The first conversation of `turns` questions that ends with `last` made a follow-up."""
    gold = _paragraph(last)
    for first in article_questions:
        same = _paragraph(first) == gold
        if first is last or same != (variant == "same-paragraph"):
            continue
        shared = [n for n in _names(last.text) if _mentions(first.text, n)]
        if not shared:
            continue
        subject = max(shared, key=len)
        follow_up = as_follow_up(last.text, subject)
        if follow_up is None:
            continue
        earlier = [Turn(first.text, _reply(first))]
        if turns == 3:
            middle = _middle_turn(article_questions, (first, last), subject, variant, gold)
            if middle is None:
                continue
            earlier.append(middle)
        return FollowUp(tuple(earlier), follow_up, last.text, gold)
    return None


def build_follow_ups(
    questions: list[Question], variant: str, limit: int, turns: int = 2
) -> list[FollowUp]:
    """Up to `limit` conversations of `turns` questions, one per paragraph of the last, taken
    from the articles in turn."""
    by_article: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        by_article[_paragraph(question).split(":")[1]].append(question)
    per_article: list[list[FollowUp]] = []
    for article_questions in by_article.values():
        found: list[FollowUp] = []
        used: set[str] = set()
        for last in article_questions:
            if _paragraph(last) in used:
                continue
            conversation = _conversation(article_questions, last, variant, turns)
            if conversation is not None:
                found.append(conversation)
                used.add(conversation.gold)
        per_article.append(found)
    chosen: list[FollowUp] = []
    for round_ in range(max((len(f) for f in per_article), default=0)):
        chosen.extend(found[round_] for found in per_article if round_ < len(found))
    return chosen[:limit]


def top_paragraphs(container: Container, doc_to_paragraph: dict[str, str], query: str) -> list[str]:
    """The paragraph ids of the top 5 documents for `query` (the service's retrieval)."""
    hits = container.retriever.search(TENANT, query, 30).hits
    documents = list(dict.fromkeys(hit.chunk.document_id for hit in hits))[:5]
    return [doc_to_paragraph[d] for d in documents]


def evaluate(
    container: Container,
    doc_to_paragraph: dict[str, str],
    follow_ups: list[FollowUp],
    llm: LLM | None,
) -> dict[str, Any]:
    """hit@5 of each way of asking, the LLM's usable share and its rewrite latency."""
    settings = container.settings
    hits: dict[str, list[bool]] = defaultdict(list)
    latencies: list[float] = []
    usable = 0
    examples: list[dict[str, str]] = []
    for item in follow_ups:
        history = list(item.earlier)
        asked = {
            "original question (ceiling)": item.original,
            "raw follow-up": item.follow_up,
            "fallback": fallback_question(history, item.follow_up, settings.max_question_chars),
        }
        if llm is not None:
            rewrite = standalone_question(
                llm,
                history,
                item.follow_up,
                refusal_text=settings.refusal_text,
                max_chars=settings.max_question_chars,
                timeout_s=300.0,  # measure the model, not the service's budget
            )
            latencies.append(rewrite.llm_ms)
            usable += rewrite.method == "llm"
            asked["llm rewrite"] = rewrite.question
        print(
            f"  {len(hits['fallback']) + 1}/{len(follow_ups)} rewrite "
            f"{latencies[-1] if latencies else 0:.0f} ms: {asked.get('llm rewrite', '')!r}",
            file=sys.stderr,
            flush=True,
        )
        for way, query in asked.items():
            top = top_paragraphs(container, doc_to_paragraph, query)
            hits[way].append(hit_at_k(top, {item.gold}, 5) == 1.0)
        if len(examples) < 5:
            examples.append(asked | {"earlier": " | ".join(t.question for t in item.earlier)})
    result: dict[str, Any] = {
        "pairs": len(follow_ups),
        "hit@5": {way: round(sum(v) / len(v), 3) for way, v in hits.items()},
        "examples": examples,
    }
    if latencies:
        ordered = sorted(latencies)
        result["llm_usable"] = round(usable / len(follow_ups), 3)
        result["rewrite_ms"] = {
            "p50": round(statistics.median(ordered), 1),
            "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 1),
            "max": round(ordered[-1], 1),
            "over_default_budget": sum(
                ms > settings.conversation_rewrite_timeout_s * 1000 for ms in ordered
            ),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=30, help="follow-ups per set")
    parser.add_argument("--llm", default="llamacpp", help="LLM provider for rewrites, or none")
    args = parser.parse_args()
    task = load_task("xquad-en-en")
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            _env_file=None,
            data_dir=Path(tmp) / "data",
            embedding_provider="use",
            llm_provider="extractive" if args.llm == "none" else args.llm,
            env="development",
        )
        container = Container(settings)
        started = time.perf_counter()
        doc_to_paragraph = ingest_paragraphs(
            container, TENANT, task.paragraphs, Path(tmp) / "paragraphs"
        )
        ingest_s = time.perf_counter() - started
        print(f"ingested {len(doc_to_paragraph)} paragraphs in {ingest_s:.0f} s", file=sys.stderr)
        llm = None if args.llm == "none" else container.llm
        results = {
            variant + ("" if turns == 2 else f", {turns} turns"): evaluate(
                container,
                doc_to_paragraph,
                build_follow_ups(task.questions, variant, args.limit, turns),
                llm,
            )
            for turns in TURNS
            for variant in VARIANTS
        }
    print("| set | pairs | way of asking | hit@5 |")
    print("|---|---|---|---|")
    for variant, result in results.items():
        for way, value in result["hit@5"].items():
            print(f"| {variant} | {result['pairs']} | {way} | {value:.3f} |")
        if "rewrite_ms" in result:
            print(
                f"\n{variant}: LLM output usable {result['llm_usable']:.0%}, rewrite ms "
                f"{result['rewrite_ms']}\n"
            )
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "llm": portable_model_id(llm.model_id) if llm is not None else None,
        "embedder": portable_model_id(container.embedder.model_id),
        "ingest_seconds": round(ingest_s, 1),
        "results": results,
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"followups-{args.llm}.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
