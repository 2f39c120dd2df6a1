"""The answer-quality stores on a real SQLite file and a real PostgreSQL database: one rating
per person per answer however many clicks race, records and feedback read within one tenant,
exports that page through every row, retention, and evaluation runs as jobs of the queue."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from app.domain import ListedPage
from app.jobs.evaluation_runs import EvaluationRunStore, NewRun
from app.jobs.store import JobLimitReached, JobStore
from app.storage.answer_records import AnswerRecord, AnswerRecordStore
from app.storage.db import Database, utc_now
from app.storage.feedback import FeedbackFilter, FeedbackStore, NewFeedback
from tests.queued_jobs import queue_job

pytestmark = pytest.mark.integration


def record(
    answer_id: str, tenant: str = "t1", user: str = "u1", days_old: float = 0
) -> AnswerRecord:
    return AnswerRecord(
        answer_id=answer_id,
        tenant_id=tenant,
        user_id=user,
        created_at=utc_now() - timedelta(days=days_old),
        question=f"question of {answer_id}",
        cited=[{"marker": 1, "document_id": "d1", "source": "a.pdf", "page": 2}],
    )


def test_racing_ratings_of_one_person_leave_one_row(sql_database: Database) -> None:
    AnswerRecordStore(sql_database).add(record("a1"))
    feedback = FeedbackStore(sql_database)
    errors: list[BaseException] = []

    def click(rating: str) -> None:
        try:
            feedback.rate("t1", "a1", "u1", NewFeedback(rating))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=click, args=("up" if n % 2 else "down",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    found = feedback.page("t1", FeedbackFilter(), 50)
    rows = found.records
    assert found.total == 1 and rows[0].question == "question of a1"
    assert rows[0].cited[0]["page"] == 2
    stored, previous = feedback.rate("t1", "a1", "u1", NewFeedback("up", "fine"))
    assert previous in ("up", "down") and stored.comment == "fine"
    assert feedback.page("t1", FeedbackFilter(), 50).total == 1


def test_records_and_feedback_stay_in_their_tenant(sql_database: Database) -> None:
    records, feedback = AnswerRecordStore(sql_database), FeedbackStore(sql_database)
    records.add(record("a1", "t1"))
    records.add(record("b1", "t2"))
    feedback.rate("t2", "b1", "u9", NewFeedback("down"))
    assert records.get("t1", "b1") is None
    assert records.get("t1", "a1", user_id="someone else") is None
    assert records.get("t1", "a1", user_id="u1") is not None
    assert feedback.page("t1", FeedbackFilter(), 50) == ListedPage([], 0)
    # The same answer id in another tenant is not joined to this tenant's feedback.
    records.add(record("b1-twin", "t1"))
    assert [r.answer_id for r in records.export("t2")] == ["b1"]


def test_exports_page_through_every_row_and_old_records_go(sql_database: Database) -> None:
    records, feedback = AnswerRecordStore(sql_database), FeedbackStore(sql_database)
    for n in range(1203):  # more than two export batches
        records.add(record(f"a{n:05d}", days_old=40 if n < 3 else 0))
        feedback.rate("t1", f"a{n:05d}", "u1", NewFeedback("up" if n % 3 else "down"))
    assert len(list(records.export("t1"))) == 1203
    downs = list(feedback.export("t1", FeedbackFilter(rating="down")))
    assert len(downs) == 401 and {f.rating for f in downs} == {"down"}
    assert records.prune(30) == 3
    assert len(list(records.export("t1"))) == 1200
    assert records.delete("t1", before=utc_now() + timedelta(seconds=1)) == 1200


def _new_run(set_id: str, collections: tuple[str, ...] = ("general",)) -> NewRun:
    return NewRun(set_id, False, 3, 1, {}, {}, "u1", collections)


def test_a_run_keeps_its_collections_and_a_listing_pages_what_a_viewer_sees(
    sql_database: Database,
) -> None:
    runs = EvaluationRunStore(sql_database)
    wide = [runs.create("t1", _new_run(f"w{n}", ("general", "board"))) for n in range(3)]
    narrow = [runs.create("t1", _new_run(f"n{n}", ("general",))) for n in range(4)]
    found = runs.get("t1", wide[0].run_id)
    assert found is not None and found.collections == ("board", "general")

    def sees(run: Any) -> bool:
        return set(run.collections) <= {"general"}

    first = runs.page("t1", 3, 0, visible=sees)
    rest = runs.page("t1", 3, 3, visible=sees).records
    shown = [r.run_id for r in first.records + rest]
    assert first.total == 4 and shown == [r.run_id for r in narrow]
    assert runs.page("t1", 10).total == 7  # no viewer: every run, counted in the database


def _queue_run(jobs: JobStore, runs: EvaluationRunStore, tenant: str, answers: bool) -> str:
    new = NewRun("s1", answers, 3, 1, {}, {}, "u1", ("general",))
    job = jobs.queue_evaluation_run(
        tenant, 3, "my set", 3, "u1", lambda session, job_id: runs.add(session, tenant, new, job_id)
    )
    return job.job_id


def test_a_run_is_a_job_of_the_queue_quota_claimed_once_and_alone(
    sql_database: Database,
) -> None:
    jobs, runs = JobStore(sql_database), EvaluationRunStore(sql_database)
    first = _queue_run(jobs, runs, "t1", answers=False)
    answering = _queue_run(jobs, runs, "t1", answers=True)
    upload = queue_job(jobs, "t1", "doc_a", "a.txt", "/data/uploads/a.bin", 10).job_id
    with pytest.raises(JobLimitReached):  # two runs and an upload fill a queue of 3
        _queue_run(jobs, runs, "t1", answers=False)
    assert runs.page("t1", 10).total == 2  # the refused run left no row behind
    assert jobs.count_active("t1") == 3
    found = jobs.get("t1", first)
    assert found is not None and (found.kind, found.source, found.progress_total) == (
        "evaluation_run",
        "my set",
        3,
    )
    # A worker never takes the run that answers; the API's claimer takes only that one.
    assert jobs.claim_next(scope="api") is not None
    assert not jobs.has_claimable("api")
    batch = jobs.claim_batch(max_jobs=10, scope="worker")
    assert [job.job_id for job in batch] == [first]  # alone: the upload is not batched with it
    after = jobs.claim_batch(max_jobs=10, scope="worker")
    assert [job.job_id for job in after] == [upload]
    assert jobs.claim_next() is None and answering not in {first, upload}


def test_the_threads_pool_never_takes_a_run_and_the_evaluation_runner_takes_only_runs(
    sql_database: Database,
) -> None:
    jobs, runs = JobStore(sql_database), EvaluationRunStore(sql_database)
    run = _queue_run(jobs, runs, "t1", answers=True)
    upload = queue_job(jobs, "t1", "doc_a", "a.txt", "/data/uploads/a.bin", 10).job_id
    assert [job.job_id for job in jobs.claim_batch(max_jobs=10, scope="jobs")] == [upload]
    assert not jobs.has_claimable("jobs") and jobs.has_claimable("evaluations")
    claimed = jobs.claim_next(scope="evaluations")
    assert claimed is not None and claimed.job_id == run


def test_a_run_queued_before_runs_were_jobs_is_failed_not_left_waiting(
    sql_database: Database,
) -> None:
    jobs, runs = JobStore(sql_database), EvaluationRunStore(sql_database)
    legacy = runs.create("t1", _new_run("s1"))  # its own row only, as before
    current = _queue_run(jobs, runs, "t1", answers=False)
    assert runs.fail_jobless() == 1
    failed = runs.get("t1", legacy.run_id)
    assert (
        failed is not None
        and failed.status == "failed"
        and "start the run again" in (failed.error or "")
    )
    waiting = runs.get("t1", current)
    assert waiting is not None and waiting.status == "queued"
