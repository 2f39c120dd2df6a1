"""Answer ids and the per-tenant answer record (RAG_ANSWER_LOG_DAYS).

Each answer gets an id when it is asked. When it is finished, its record is written: the
question, the documents and pages it cited, the documents it retrieved with their ranks, the
stage timings, the model. With RAG_ANSWER_LOG_DAYS=0 only the ids are written (tenant, user,
time), so the person can still rate the answer and nobody else can; no question text is stored.
Writing a record never fails an answer: an error is logged and the answer goes out.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.storage.answer_records import AnswerRecord, AnswerRecordStore
from app.storage.db import utc_now
from app.timing import AtMostEvery

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.generation.citations import Citation

log = logging.getLogger(__name__)

# With the record off, the bare ids of an answer are kept this long (a rating comes soon after
# the answer was read; later, the answer can no longer be rated).
BARE_RECORD_DAYS = 30
PRUNE_EVERY_S = 3600.0


COMPLETION_PREFIX = "chatcmpl-"


def new_answer_id() -> str:
    """A fresh answer id (32 hex characters, also a conversation message id)."""
    return secrets.token_hex(16)


def completion_id_of(answer_id: str) -> str:
    """The id a chat completion shows for its answer (OpenAI's form, the answer id inside)."""
    return f"{COMPLETION_PREFIX}{answer_id or new_answer_id()}"


def answer_id_of(given: str) -> str:
    """The answer id in what a client sends: an answer id, a message id or a completion id."""
    return given.removeprefix(COMPLETION_PREFIX)


@dataclass(frozen=True)
class AskedAs:
    """A question rewritten from earlier turns: as the person typed it, and the documents the
    rewrite may quote (None when not known). The record shows the rewrite only to readers of
    all of them."""

    typed: str
    sources: tuple[str, ...] | None


@dataclass(frozen=True)
class FinishedAnswer:
    """What the answer service knows once an answer is complete."""

    answer_id: str
    tenant_id: str
    user_id: str
    question: str
    citations: Sequence[Citation]
    refused: bool
    cache: str
    timings: dict[str, float]
    total_ms: float
    corpus_version: int
    retrieved: Sequence[dict[str, object]] = ()  # retrieved_ranks of the answer's retrieval
    asked_as: AskedAs | None = None  # when `question` is a rewrite


def cited_pages(citations: Sequence[Citation]) -> list[dict[str, object]]:
    """The documents and pages an answer cited, each with its marker."""
    return [
        {"marker": c.marker, "document_id": c.document_id, "source": c.source, "page": c.page}
        for c in citations
    ]


def retrieved_ranks(retrieval: RetrievalResult) -> list[dict[str, object]]:
    """The passages retrieval ranked for the answer: document, page, rank (what the answer
    cache keeps with the answer, so a cache hit's record names them as the fresh one's did)."""
    return [
        {
            "rank": rank,
            "document_id": hit.chunk.document_id,
            "source": hit.chunk.source,
            "page": hit.chunk.page,
        }
        for rank, hit in enumerate(retrieval.hits, start=1)
    ]


class AnswerLog:
    """Writes each finished answer's record and drops records past their days."""

    def __init__(self, store: AnswerRecordStore, keep_days: int, model_id: str) -> None:
        self.store = store
        self.keep_days = keep_days
        self.model_id = model_id
        self.pruning = AtMostEvery(PRUNE_EVERY_S)

    @property
    def keeps_questions(self) -> bool:
        """Whether the record keeps questions (RAG_ANSWER_LOG_DAYS > 0)."""
        return self.keep_days > 0

    def record(self, finished: FinishedAnswer) -> None:
        """Write the record of a finished answer (only its ids with the record off)."""
        if self.keeps_questions:
            asked = finished.asked_as
            sources = None if asked is None or asked.sources is None else list(asked.sources)
            record = AnswerRecord(
                answer_id=finished.answer_id,
                tenant_id=finished.tenant_id,
                user_id=finished.user_id,
                created_at=utc_now(),
                question=finished.question,
                refused=finished.refused,
                cache=finished.cache,
                model=self.model_id,
                corpus_version=finished.corpus_version,
                cited=cited_pages(finished.citations),
                retrieved=list(finished.retrieved),
                timings=finished.timings,
                total_ms=finished.total_ms,
                typed_question=None if asked is None else asked.typed,
                rewrite_sources=sources,
            )
        else:
            record = AnswerRecord(
                finished.answer_id, finished.tenant_id, finished.user_id, utc_now()
            )
        try:
            self.store.add(record)
            self.prune_now_and_then()
        except Exception:
            log.exception("answer record not written", extra={"answer_id": finished.answer_id})

    def prune_now_and_then(self) -> int:
        """Delete records past their days, if this process has not done so lately (called at
        start-up, after a record is written and before the record is read)."""
        return self.store.prune(self.keep_days or BARE_RECORD_DAYS) if self.pruning.due() else 0
