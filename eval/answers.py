"""Answer evaluation on real data: gold span, citation accuracy, valid markers, refusal.

For each task (XQuAD en, XQuAD ar, ARCD test) a fixed-seed sample of questions is asked twice
through the real retriever and the real generation code:
- of a tenant holding the whole corpus (answerable): does the answer contain a gold answer span
  (normalised token match), and does it cite the gold paragraph (scored on all questions and on
  those whose gold paragraph was among the passages the model saw);
- of a tenant holding the corpus minus the sampled questions' gold paragraphs (unanswerable):
  is the answer a refusal (by the relevance gate before the model, or by the model).

    python -m eval.answers [--providers llamacpp extractive] [--questions 50] [--seed 2026]

The `manuals` task asks the natural questions of eval/manuals of each manual's own
tenant, with the service's settings (abstain threshold included), and scores the pages cited:
answers citing a gold page, answered but citing only wrong pages, answerable questions refused,
seconds to the first token and to the end; and, for every answer not citing a gold page, its
cause: gold not among the shown passages, gold shown but another passage cited, refused with
gold shown.

    python -m eval.answers --tasks manuals --split tuning --questions 40 --providers llamacpp

The providers are configured as the service's are, from `RAG_*` variables (`.env` is not read):
`RAG_LLM_PROVIDER=openai RAG_LLM_MODEL=... RAG_OPENAI_BASE_URL=... RAG_OPENAI_API_KEY=...
python -m eval.answers` evaluates a model served elsewhere.

Prints a table per provider and writes eval/results/answers-<provider>.json with every answer.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.container import Container
from app.domain import RetrievalResult, SearchHit
from app.generation.answer_limits import GenerationLimits
from app.generation.citations import MARKER_GROUP, marker_numbers
from app.generation.grounded_answer import (
    Answer,
    AnswerDelta,
    AnswerDone,
)
from app.providers.llms import build_llm
from app.providers.types import LLM, Embedder
from app.text.tokenizer import tokenize
from eval.answer_replay import RecordingLLM
from eval.datasets import Question, RetrievalTask, load_task
from eval.manual_questions import GOLD_FILE, SPLITS, ingest_manual
from eval.manual_sample import MANUAL_SETS, ManualSet, sample_manual_questions
from eval.metrics import cites_gold, percentile
from eval.retrieval import (
    CORPUS_OF_TASK,
    RESULTS_DIR,
    git_commit,
    ingest_paragraphs,
    portable_model_id,
)

TASKS = ("xquad-en-en", "xquad-ar-ar", "arcd-test")
MANUALS = "manuals"


@dataclass
class Outcome:
    """One question asked of one tenant with one provider."""

    task: str
    setting: str  # "answerable" or "unanswerable"
    question: str
    gold_answers: list[str]
    answer: str
    refused: bool
    gate_refused: bool
    gold_shown: bool  # the gold paragraph was among the passages given to the model
    contains_gold: bool
    cites_gold: bool
    shown_markers: int
    shown_invalid: int
    dropped_markers: int
    prompt_tokens: int | None
    refusal_probability: float | None
    seconds: float
    # What the model read and wrote (as ManualOutcome records it), and which passages were a
    # gold paragraph, so eval.answer_replay can re-score other citation rules.
    shown_texts: list[str] = field(default_factory=list)
    shown_is_gold: list[bool] = field(default_factory=list)
    model_text: str | None = None


def contains_span(answer: str, gold: str) -> bool:
    """Whether the gold span's normalised tokens occur, in order and adjacent, in the answer."""
    needle, haystack = tokenize(gold), tokenize(answer)
    if not needle:
        return False
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))


def shown_marker_counts(text: str, passages: int) -> tuple[int, int]:
    """(markers shown, of which outside 1..passages) in an answer's text."""
    numbers = [n for m in MARKER_GROUP.finditer(text) for n in marker_numbers(m.group(1))]
    return len(numbers), sum(1 for n in numbers if not 1 <= n <= passages)


def sample_questions(task: RetrievalTask, count: int, seed: int) -> list[Question]:
    """A fixed-seed sample of questions that have a gold answer span."""
    answerable = [q for q in task.questions if q.answers]
    return random.Random(seed).sample(answerable, min(count, len(answerable)))


def ask(
    llm: LLM,
    settings: Settings,
    question: Question,
    retrieval: RetrievalResult,
    doc_map: dict[str, str],
    embedder: Embedder | None = None,
) -> tuple[Answer, bool, float, list[SearchHit]]:
    """Answer one question (the citation check comparing with `embedder`, as the service's
    does); returns the answer, whether gold was shown, seconds taken and the passages the model
    read (its valid markers)."""
    shown = GenerationLimits.from_settings(settings).passages.shown(question.text, retrieval.hits)
    gold_shown = retrieval.relevant and any(
        doc_map.get(hit.chunk.document_id) in question.gold for hit in shown
    )
    started = time.perf_counter()
    limits = GenerationLimits.from_settings(settings)
    answer = limits.answer(question.text, retrieval, llm, embedder)
    return answer, gold_shown, time.perf_counter() - started, shown


def outcome(
    task: str,
    setting: str,
    question: Question,
    retrieval: RetrievalResult,
    answer: Answer,
    gold_shown: bool,
    seconds: float,
    doc_map: dict[str, str],
    passages: list[SearchHit],
    model_text: str | None = None,
) -> Outcome:
    """Score one answer."""
    shown, invalid = shown_marker_counts(answer.text, len(passages))
    read = passages if retrieval.relevant else []
    return Outcome(
        task=task,
        setting=setting,
        question=question.text,
        gold_answers=list(question.answers),
        answer=answer.text,
        refused=answer.refused,
        gate_refused=not retrieval.relevant or not retrieval.hits,
        gold_shown=gold_shown,
        contains_gold=not answer.refused
        and any(contains_span(answer.text, gold) for gold in question.answers),
        cites_gold=cites_gold(
            (doc_map.get(c.document_id) for c in answer.citations), question.gold
        ),
        shown_markers=shown,
        shown_invalid=invalid,
        dropped_markers=answer.dropped_markers,
        prompt_tokens=answer.prompt_tokens,
        refusal_probability=answer.refusal_probability,
        seconds=seconds,
        shown_texts=[hit.chunk.text for hit in read],
        shown_is_gold=[doc_map.get(hit.chunk.document_id) in question.gold for hit in read],
        model_text=model_text,
    )


def _rate(values: list[bool]) -> float:
    return statistics.fmean(values) if values else float("nan")


def summarise(outcomes: list[Outcome]) -> dict[str, float]:
    """The reported metrics of one task and provider."""
    answerable = [o for o in outcomes if o.setting == "answerable"]
    unanswerable = [o for o in outcomes if o.setting == "unanswerable"]
    gold_shown = [o for o in answerable if o.gold_shown]
    shown = sum(o.shown_markers for o in outcomes)
    emitted = shown + sum(o.dropped_markers for o in outcomes)
    tokens = [o.prompt_tokens for o in outcomes if o.prompt_tokens]
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "contains_gold": _rate([o.contains_gold for o in answerable]),
        "citation_acc_gold_shown": _rate([o.cites_gold for o in gold_shown]),
        "citation_acc_all": _rate([o.cites_gold for o in answerable]),
        "gold_shown": _rate([o.gold_shown for o in answerable]),
        "false_refusal": _rate([o.refused for o in answerable]),
        "shown_markers_valid": 1 - sum(o.shown_invalid for o in outcomes) / shown if shown else 1.0,
        "emitted_markers_valid": shown / emitted if emitted else 1.0,
        "refusal_unanswerable": _rate([o.refused for o in unanswerable]),
        "refused_by_gate": _rate([o.gate_refused for o in unanswerable]),
        "prompt_tokens_mean": statistics.fmean(tokens) if tokens else float("nan"),
        "seconds_p50": statistics.median([o.seconds for o in outcomes]),
    }


SWEEP_THRESHOLDS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def abstention_sweep(outcomes: list[Outcome], ran_with: float) -> list[dict[str, float]]:
    """What each abstain threshold <= the one the run used would have scored, computed from the
    recorded first-token refusal probabilities (exact: a lower threshold only turns more
    answers into refusals, and the text of the others does not change)."""
    answerable = [o for o in outcomes if o.setting == "answerable"]
    unanswerable = [o for o in outcomes if o.setting == "unanswerable"]
    gold_shown = [o for o in answerable if o.gold_shown]
    rows = []
    for threshold in (t for t in SWEEP_THRESHOLDS if t <= ran_with):

        def refuses(o: Outcome, threshold: float = threshold) -> bool:
            p = o.refusal_probability
            return o.refused or (p is not None and p >= threshold)

        rows.append(
            {
                "threshold": threshold,
                "refusal_unanswerable": _rate([refuses(o) for o in unanswerable]),
                "false_refusal": _rate([refuses(o) for o in answerable]),
                "contains_gold": _rate([o.contains_gold and not refuses(o) for o in answerable]),
                "citation_acc_gold_shown": _rate(
                    [o.cites_gold and not refuses(o) for o in gold_shown]
                ),
            }
        )
    return rows


def print_sweep(rows: list[dict[str, float]]) -> None:
    """A markdown table of the abstention sweep."""
    print(
        "| abstain threshold | refusal unanswerable | false refusal | contains gold "
        "| cites gold (gold shown) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['threshold']:g} | {r['refusal_unanswerable']:.2f} | {r['false_refusal']:.2f} "
            f"| {r['contains_gold']:.2f} | {r['citation_acc_gold_shown']:.2f} |"
        )


def print_table(provider: str, summaries: dict[str, dict[str, float]]) -> None:
    """A markdown table: one row per task."""
    print(f"\nprovider: {provider}")
    print(
        "| task | n | contains gold | cites gold (gold shown) | cites gold (all) | gold shown "
        "| false refusal | markers valid (shown / emitted) | refusal unanswerable (gate) "
        "| prompt tokens | s/answer p50 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for task, s in summaries.items():
        print(
            f"| {task} | {s['answerable']:.0f}+{s['unanswerable']:.0f} | {s['contains_gold']:.2f} "
            f"| {s['citation_acc_gold_shown']:.2f} | {s['citation_acc_all']:.2f} "
            f"| {s['gold_shown']:.2f} | {s['false_refusal']:.2f} "
            f"| {s['shown_markers_valid']:.3f} / {s['emitted_markers_valid']:.3f} "
            f"| {s['refusal_unanswerable']:.2f} ({s['refused_by_gate']:.2f}) "
            f"| {s['prompt_tokens_mean']:.0f} | {s['seconds_p50']:.2f} |"
        )


def run(
    settings: Settings,
    providers: list[str],
    tasks: list[str],
    count: int,
    seed: int,
    tag: str = "",
) -> None:
    """Ingest the tenants, ask every sampled question, print and write the results."""
    container = Container(settings)
    llms = {
        p: RecordingLLM(build_llm(settings.model_copy(update={"llm_provider": p})))
        for p in providers
    }
    outcomes: dict[str, list[Outcome]] = {p: [] for p in providers}
    corpora: dict[str, dict[str, str]] = {}
    files = settings.data_dir / "eval-files"
    for name in tasks:
        task = load_task(name)
        questions = sample_questions(task, count, seed)
        corpus = CORPUS_OF_TASK[name]
        if corpus not in corpora:
            corpora[corpus] = ingest_paragraphs(container, corpus, task.paragraphs, files / corpus)
        gold = set().union(*(q.gold for q in questions))
        missing = {pid: text for pid, text in task.paragraphs.items() if pid not in gold}
        no_gold_tenant = f"{name}-without-gold"
        doc_map = dict(corpora[corpus])
        doc_map.update(
            ingest_paragraphs(container, no_gold_tenant, missing, files / no_gold_tenant)
        )
        for setting, tenant in (("answerable", corpus), ("unanswerable", no_gold_tenant)):
            for number, question in enumerate(questions, start=1):
                retrieval = container.retriever.search(tenant, question.text, settings.top_k)
                for provider, llm in llms.items():
                    answer, shown, seconds, passages = ask(
                        llm, settings, question, retrieval, doc_map, container.embedder
                    )
                    outcomes[provider].append(
                        outcome(
                            name,
                            setting,
                            question,
                            retrieval,
                            answer,
                            shown,
                            seconds,
                            doc_map,
                            passages,
                            llm.take(),
                        )
                    )
                print(f"{name} {setting} {number}/{len(questions)}", file=sys.stderr, flush=True)
    RESULTS_DIR.mkdir(exist_ok=True)
    for provider, results in outcomes.items():
        summaries = {name: summarise([o for o in results if o.task == name]) for name in tasks}
        print_table(provider, summaries)
        sweep = {}
        if any(o.refusal_probability is not None for o in results):
            sweep = {
                name: abstention_sweep(
                    [o for o in results if o.task == name], settings.llm_abstain_threshold
                )
                for name in tasks
            }
            sweep["all"] = abstention_sweep(results, settings.llm_abstain_threshold)
            print("\nabstention sweep, all tasks:")
            print_sweep(sweep["all"])
        report: dict[str, Any] = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "provider": provider,
            "model": portable_model_id(llms[provider].model_id),
            "embedder": portable_model_id(container.embedder.model_id),
            "questions_per_task": count,
            "seed": seed,
            "abstain_threshold": settings.llm_abstain_threshold,
            "summary": summaries,
            "abstention_sweep": sweep,
            "answers": [asdict(o) for o in results],
        }
        out = RESULTS_DIR / f"answers-{provider}{'-' + tag if tag else ''}.json"
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")


@dataclass
class ManualOutcome:
    """One natural question asked of its manual's tenant, scored by the pages it cites."""

    id: str
    manual: str
    question: str
    gold_pages: list[int]
    shown_pages: list[int]  # pages of the passages the model read, in the order shown
    cited_pages: list[int]
    answer: str
    refused: bool
    gate_refused: bool
    refusal_probability: float | None
    first_token_seconds: float
    seconds: float
    # What the model read (after cutting) and wrote (before the marker checks), so other
    # citation rules and thresholds can be scored from the record (eval.answer_replay).
    shown_texts: list[str] = field(default_factory=list)
    model_text: str | None = None  # None: the model was not asked

    @property
    def gold_shown(self) -> bool:
        return bool(set(self.shown_pages) & set(self.gold_pages))

    @property
    def cites_gold(self) -> bool:
        return cites_gold(self.cited_pages, self.gold_pages)

    @property
    def cause(self) -> str:
        """Why the answer does not cite a gold page ("" when it does)."""
        if self.cites_gold:
            return ""
        if not self.gold_shown:
            return "gold_not_shown"
        return "refused_gold_shown" if self.refused else "other_cited"


CAUSES = ("gold_not_shown", "other_cited", "refused_gold_shown")


def ask_streamed(
    llm: LLM,
    settings: Settings,
    question: str,
    retrieval: RetrievalResult,
    embedder: Embedder | None = None,
) -> tuple[Answer, float, float]:
    """Answer as /query streams it (with the service's embedder for the citation check);
    returns the answer, seconds to its first text and in all."""
    started = time.perf_counter()
    first = float("nan")
    limits = GenerationLimits.from_settings(settings)
    for event in limits.stream(question, retrieval, llm, embedder):
        if isinstance(event, AnswerDelta) and first != first:
            first = time.perf_counter() - started
        if isinstance(event, AnswerDone):
            return event.answer, first, time.perf_counter() - started
    raise RuntimeError("stream_answer ended without a final event")


def summarise_manuals(outcomes: list[ManualOutcome]) -> dict[str, float]:
    """The manual-question answer measures and the count of each cause of a missed gold page."""
    answered = [not o.refused for o in outcomes]
    seconds = [o.seconds for o in outcomes]
    first = [o.first_token_seconds for o in outcomes]
    return {
        "questions": len(outcomes),
        "cites_gold": _rate([o.cites_gold for o in outcomes]),
        "answered_citing_only_wrong": _rate(
            [a and not o.cites_gold for a, o in zip(answered, outcomes, strict=True)]
        ),
        "refused": _rate([o.refused for o in outcomes]),
        "refused_by_gate": _rate([o.gate_refused for o in outcomes]),
        "gold_shown": _rate([o.gold_shown for o in outcomes]),
        "seconds_p50": percentile(seconds, 0.5),
        "seconds_p95": percentile(seconds, 0.95),
        "first_token_p50": percentile(first, 0.5),
        **{cause: sum(o.cause == cause for o in outcomes) for cause in CAUSES},
    }


def print_manual_answers(provider: str, summaries: dict[str, dict[str, float]]) -> None:
    """A markdown table: one row per manual and one for all."""
    print(f"\nprovider: {provider}")
    print(
        "| manual | n | cites gold | answered, only wrong pages | refused (gate) | gold shown "
        "| s p50 / p95 | first token p50 | gold not shown | other cited | refused, gold shown |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in summaries.items():
        print(
            f"| {name} | {s['questions']:.0f} | {s['cites_gold']:.2f} "
            f"| {s['answered_citing_only_wrong']:.2f} "
            f"| {s['refused']:.2f} ({s['refused_by_gate']:.2f}) | {s['gold_shown']:.2f} "
            f"| {s['seconds_p50']:.1f} / {s['seconds_p95']:.1f} | {s['first_token_p50']:.1f} "
            f"| {s['gold_not_shown']:.0f} | {s['other_cited']:.0f} "
            f"| {s['refused_gold_shown']:.0f} |"
        )


def run_manuals(
    settings: Settings,
    providers: list[str],
    split: str,
    count: int,
    seed: int,
    tag: str,
    manual_set: ManualSet = "development",
) -> None:
    """Ingest the sampled questions' manuals, answer each question, print and write results."""
    container = Container(settings)
    llms = {
        p: RecordingLLM(build_llm(settings.model_copy(update={"llm_provider": p})))
        for p in providers
    }
    questions = sample_manual_questions(split, count, seed, manual_set)
    gold: dict[str, list[int]] = json.loads(GOLD_FILE.read_text(encoding="utf-8"))
    outcomes: dict[str, list[ManualOutcome]] = {p: [] for p in providers}
    files = settings.data_dir / "eval-files"
    files.mkdir(parents=True, exist_ok=True)
    for manual in dict.fromkeys(q.manual for q in questions):
        tenant = ingest_manual(container, manual)
        mine = [q for q in questions if q.manual == manual]
        for number, question in enumerate(mine, start=1):
            retrieval = container.retriever.search(tenant, question.text, settings.top_k)
            shown = GenerationLimits.from_settings(settings).passages.shown(
                question.text, retrieval.hits
            )
            for provider, llm in llms.items():
                answer, first, seconds = ask_streamed(
                    llm, settings, question.text, retrieval, container.embedder
                )
                outcomes[provider].append(
                    ManualOutcome(
                        id=question.id,
                        manual=manual,
                        question=question.text,
                        gold_pages=gold[question.id],
                        shown_pages=[h.chunk.page for h in shown] if retrieval.relevant else [],
                        cited_pages=[c.page for c in answer.citations],
                        answer=answer.text,
                        refused=answer.refused,
                        gate_refused=not retrieval.relevant or not retrieval.hits,
                        refusal_probability=answer.refusal_probability,
                        first_token_seconds=first,
                        seconds=seconds,
                        shown_texts=[h.chunk.text for h in shown] if retrieval.relevant else [],
                        model_text=llm.take(),
                    )
                )
            print(f"{manual} {number}/{len(mine)}", file=sys.stderr, flush=True)
    RESULTS_DIR.mkdir(exist_ok=True)
    for provider, results in outcomes.items():
        summaries = {
            m: summarise_manuals([o for o in results if o.manual == m])
            for m in dict.fromkeys(o.manual for o in results)
        }
        summaries["all"] = summarise_manuals(results)
        print_manual_answers(provider, summaries)
        report: dict[str, Any] = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "provider": provider,
            "model": portable_model_id(llms[provider].model_id),
            "embedder": portable_model_id(container.embedder.model_id),
            "manual_set": manual_set,
            "split": split,
            "questions": count,
            "seed": seed,
            "abstain_threshold": settings.llm_abstain_threshold,
            "summary": summaries,
            "answers": [{**asdict(o), "cause": o.cause} for o in results],
        }
        prefix = "answers-manuals" if manual_set == "halved" else "answers-manuals-dev"
        name = f"{prefix}-{split}-{provider}{'-' + tag if tag else ''}.json"
        out = RESULTS_DIR / name
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--providers",
        nargs="+",
        help="default: RAG_LLM_PROVIDER when set (with its RAG_LLM_MODEL, base URL and key), "
        "else llamacpp and extractive",
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=(*TASKS, MANUALS))
    parser.add_argument("--questions", type=int, default=50, help="questions per task")
    parser.add_argument(
        "--split", default="tuning", choices=SPLITS, help="the manuals task's split"
    )
    parser.add_argument(
        "--manual-set",
        default="development",
        choices=MANUAL_SETS,
        help="the manuals task's manuals: all 15 development manuals, the same number of "
        "questions from each (default), or `halved`, the first five pooled (runs before "
        "2026-12-06)",
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--embedding-provider", default="use")
    parser.add_argument(
        "--abstain-threshold",
        type=float,
        default=None,
        help="RAG_LLM_ABSTAIN_THRESHOLD for this run; default 1 (records the sweep for every "
        "threshold), except for the manuals task, which answers as the service does",
    )
    parser.add_argument("--tag", default="", help="suffix of the results file name")
    args = parser.parse_args()
    tasks = [t for t in args.tasks if t != MANUALS]
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None,
            data_dir=Path(data),
            embedding_provider=args.embedding_provider,
            env="development",
        )
        providers = args.providers or (
            [settings.llm_provider]
            if "llm_provider" in settings.model_fields_set
            else ["llamacpp", "extractive"]
        )
        if MANUALS in args.tasks:
            manual_settings = settings
            if args.abstain_threshold is not None:
                manual_settings = settings.model_copy(
                    update={"llm_abstain_threshold": args.abstain_threshold}
                )
            run_manuals(
                manual_settings,
                providers,
                args.split,
                args.questions,
                args.seed,
                args.tag,
                args.manual_set,
            )
        if tasks:
            threshold = 1.0 if args.abstain_threshold is None else args.abstain_threshold
            settings = settings.model_copy(update={"llm_abstain_threshold": threshold})
            run(settings, providers, tasks, args.questions, args.seed, args.tag)


if __name__ == "__main__":
    main()
