"""Metrics of a scaled-out deployment: two API processes and an rq worker share one
PROMETHEUS_MULTIPROC_DIR, so a scrape of either API process sees what every process did, and a
real Prometheus (Debian's package, as the compose `monitoring` profile runs it) scraping one of
them answers a PromQL query with the right sum.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.local_stack import ApiClient, LocalStack, Process, free_port, wait_for_port
from tests.scaleout.running_stack import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TOKEN = "scaleout-scrape-token-42"
NOTE = (
    b"The QUARTZ-4471 relief valve must be inspected every 30 days.\n\n"
    b"QUARTZ-4471 inspection results are filed with the plant safety officer on level two."
)
QUESTION = "How often must the QUARTZ-4471 relief valve be inspected?"
STAGE_BREAKDOWN = "sum by (stage) (rag_stage_duration_seconds_count)"


def scrape(api: Process) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(f"{api.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def total(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """The sum over every series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, list[Process]]]:
    root: Path = tmp_path_factory.mktemp("metrics-scaleout")
    with running_stack(
        root,
        {
            "RAG_METRICS_ENABLED": "true",
            "RAG_METRICS_TOKEN": TOKEN,
            "PROMETHEUS_MULTIPROC_DIR": str(root / "metrics"),
            "RAG_JOB_HEARTBEAT_S": "0.5",
            "RAG_JOB_STALE_AFTER_S": "3",
        },
    ) as (local, apis):
        local.create_user("plant", "operator")
        yield local, apis


def test_each_api_process_sees_the_sums_of_every_process(
    stack: tuple[LocalStack, list[Process]],
) -> None:
    local, (api1, api2) = stack
    first, second = ApiClient(api1.url), ApiClient(api2.url)
    try:
        first.login("operator")
        second.login("operator")
        uploaded_at = time.time()
        job = first.upload("valve.txt", NOTE)
        local.job_ids.add(job["job_id"])
        done = first.wait_job(job["job_id"])
        assert done["status"] == "done", done
        answered = second.query(QUESTION)  # a miss on api2
        assert answered["cache"] == "miss" and not answered["refused"], answered
        assert first.query(QUESTION)["cache"] == "hit"  # the shared Redis cache, on api1
    finally:
        first.close()
        second.close()
    for api in (api1, api2):
        samples = scrape(api)
        # The job ran in the worker process; either API process reports it.
        assert total(samples, "rag_jobs_total", outcome="done") == 1
        assert total(samples, "rag_ingested_chunks_total") == done["chunks_indexed"]
        assert total(samples, "rag_job_duration_seconds_count", stage="embed") == 1
        assert total(samples, "rag_answers_total", outcome="answered") == 1
        assert total(samples, "rag_answers_total", outcome="cache_hit") == 1
        query = {"route": "/query", "method": "POST", "status": "200"}
        assert total(samples, "rag_http_requests_total", **query) == 2  # one on each process
        assert total(samples, "rag_http_requests_total", route="/auth/token") == 2
        # The worker keeps beating after this upload (every RAG_JOB_HEARTBEAT_S, each process
        # sees it); its sweeper thread may be a beat behind on a busy machine, so wait for one.
        assert _heartbeat_after(api, uploaded_at) >= uploaded_at
        assert total(samples, "rag_jobs_queued", queue="ingest") == 0


def _heartbeat_after(api: Process, moment: float, patience_s: float = 30.0) -> float:
    """The worker heartbeat `api` reports, once it is past `moment` or after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while True:
        beat = total(scrape(api), "rag_worker_heartbeat_timestamp_seconds")
        if beat >= moment or time.monotonic() > deadline:
            return beat
        time.sleep(0.2)


ALERTS = Path(__file__).resolve().parents[2] / "docker" / "prometheus" / "alerts.yml"


def _prometheus_config(path: Path, target: Process) -> None:
    path.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        f"rule_files: ['{ALERTS}']\n"
        "scrape_configs:\n"
        "  - job_name: rag\n"
        "    authorization:\n"
        "      type: Bearer\n"
        f"      credentials: {TOKEN}\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target.port}']\n",
        encoding="utf-8",
    )


def test_a_real_prometheus_scrapes_the_service_and_answers_promql(
    stack: tuple[LocalStack, list[Process]], tmp_path: Path
) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is missing: run scripts/install.sh (as root)"
    _, (api1, _) = stack
    config = tmp_path / "prometheus.yml"
    _prometheus_config(config, api1)
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, 60)
        query = 'sum(rag_jobs_total{outcome="done"})'
        deadline = time.monotonic() + 90
        result: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            body = httpx.get(
                f"http://127.0.0.1:{port}/api/v1/query", params={"query": query}
            ).json()
            assert body["status"] == "success", body
            result = body["data"]["result"]
            if result:
                break
            time.sleep(0.5)
        assert result, (tmp_path / "prometheus.log").read_text(errors="replace")[-2000:]
        assert float(result[0]["value"][1]) == 1.0  # type: ignore[index]

        def promql(expression: str) -> list[dict[str, Any]]:
            answer = httpx.get(
                f"http://127.0.0.1:{port}/api/v1/query", params={"query": expression}
            ).json()
            assert answer["status"] == "success", answer
            found: list[dict[str, Any]] = answer["data"]["result"]
            return found

        assert float(promql("up")[0]["value"][1]) == 1.0
        # The stage breakdown of the docs: one answer's stages, from the api2 process.
        stages = {r["metric"]["stage"] for r in promql(STAGE_BREAKDOWN)}
        assert {"cache", "embed_query", "dense", "keyword", "generate"} <= stages
        # The alert rules load and evaluate on the live series: a worker beats, so the
        # heartbeat alert is neither pending nor firing, and no other alert is either.
        rules = httpx.get(f"http://127.0.0.1:{port}/api/v1/rules").json()["data"]["groups"]
        assert len(rules[0]["rules"]) == 6
        assert all(rule["health"] == "ok" for rule in rules[0]["rules"]), rules
        # (An evaluation before the first scrape may have left one pending for a second.)
        settled = time.monotonic() + 15
        while promql("ALERTS") and time.monotonic() < settled:
            time.sleep(0.5)
        assert promql("ALERTS") == []
    finally:
        server.terminate()
        server.wait(30)
        log.close()
