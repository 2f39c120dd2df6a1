"""Settings that would break a multi-process deployment are refused at start-up, and the job
queue follows RAG_JOB_BACKEND (the default stays the in-process pool of `make run`)."""

from __future__ import annotations

import pytest

from app.config import Settings, load_settings
from app.container import Container
from app.errors import ConfigurationError
from app.jobs.redis_queue import RedisJobQueue, queue_name
from app.jobs.threads import IngestWorkerPool

pytestmark = pytest.mark.unit


def test_separate_workers_with_an_embedded_chroma_directory_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="RAG_VECTOR_BACKEND=chroma-http"):
        load_settings(_env_file=None, job_backend="redis")
    assert load_settings(_env_file=None, job_backend="redis", vector_backend="chroma-http")


def test_a_stale_threshold_close_to_the_heartbeat_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="RAG_JOB_STALE_AFTER_S"):
        load_settings(_env_file=None, job_heartbeat_s=5, job_stale_after_s=10)


@pytest.mark.parametrize("prefix", ["", "a b", "rag:x", "x" * 65])
def test_a_redis_key_prefix_must_be_a_plain_word(prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="RAG_REDIS_KEY_PREFIX"):
        load_settings(_env_file=None, redis_key_prefix=prefix)


def test_the_default_job_queue_is_the_in_process_pool(settings: Settings) -> None:
    assert isinstance(Container(settings).job_queue, IngestWorkerPool)


def test_the_redis_backend_sends_to_a_queue_named_by_the_prefix(settings: Settings) -> None:
    scaled = settings.model_copy(
        update={"job_backend": "redis", "vector_backend": "chroma-http", "redis_key_prefix": "blue"}
    )
    queue = Container(scaled).job_queue  # no connection is opened yet
    assert isinstance(queue, RedisJobQueue)
    assert queue.name == queue_name(scaled) == "blue-ingest"
