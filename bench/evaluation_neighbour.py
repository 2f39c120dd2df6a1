"""Another tenant's `/search` while an evaluation run of 200 items executes, against the same
searches with no run: the run must not move the neighbour's p95 past 1 s.

In one process on the real stack (TestClient, the shipped `use` embedder, embedded Chroma, the
evaluation runner thread): tenant A runs a 200-item set; tenant B searches its own document in a
loop until the run ends. The same number of searches without a run is the baseline.

    python -m bench.evaluation_neighbour [--items 200]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from fastapi.testclient import TestClient

from app.config import load_settings
from app.main import create_app
from bench.common import median, percentile, table
from testkit.builders import pdf_document, text_document

PASSWORD = "bench evaluation password"
TOPICS = [
    f"Pump P-{n}: replace seal {n} every {n * 100} hours; check bearing {n}." for n in range(20)
]
NEIGHBOUR_QUESTION = "When is lunch served in the canteen?"


def _token(client: TestClient, container: object, tenant: str) -> dict[str, str]:
    users = container.users  # type: ignore[attr-defined]
    name = f"bench-{tenant}"
    users.create_user(tenant_id=tenant, username=name, password=PASSWORD, role=None)
    issued = client.post("/auth/token", data={"username": name, "password": PASSWORD}).json()
    return {"Authorization": f"Bearer {issued['access_token']}"}


def _upload(client: TestClient, headers: dict[str, str], name: str, content: bytes) -> None:
    job = client.post("/documents", files={"file": (name, content)}, headers=headers).json()
    while client.get(f"/jobs/{job['job_id']}", headers=headers).json()["status"] not in (
        "done",
        "failed",
    ):
        time.sleep(0.05)


def _search(client: TestClient, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    response = client.post("/search", json={"query": NEIGHBOUR_QUESTION}, headers=headers)
    assert response.status_code == 200, response.text
    return (time.perf_counter() - started) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as folder:
        settings = load_settings(
            _env_file=None,
            data_dir=Path(folder),
            embedding_provider="use",
            llm_provider="extractive",
            env="development",
            jwt_secret="bench-evaluation-neighbour-secret-0123456789",
            rate_limit_query_per_minute=1_000_000,
            rate_limit_auth_per_minute=1_000,
        )
        with TestClient(create_app(settings)) as client:
            container = client.app.state.container  # type: ignore[attr-defined]
            runner, neighbour = _token(client, container, "a"), _token(client, container, "b")
            _upload(client, runner, "manual.pdf", pdf_document(*TOPICS))
            _upload(client, neighbour, "canteen.txt", text_document("Lunch is served from noon."))
            items = [
                {
                    "question": f"How often is seal {n % 20} replaced? ({n})",
                    "expected": [{"source": "manual.pdf", "page": n % 20 + 1}],
                }
                for n in range(args.items)
            ]
            made = client.post(
                "/evaluations/sets", json={"name": "bench", "items": items}, headers=runner
            ).json()
            for _ in range(5):
                _search(client, neighbour)  # warm
            run = client.post(
                "/evaluations/runs", json={"set_id": made["set_id"]}, headers=runner
            ).json()
            started = time.perf_counter()
            during: list[float] = []
            while client.get(f"/evaluations/runs/{run['run_id']}", headers=runner).json()[
                "status"
            ] in ("queued", "processing"):
                during.append(_search(client, neighbour))
                time.sleep(0.05)
            run_s = time.perf_counter() - started
            alone = []
            for _ in range(len(during)):
                alone.append(_search(client, neighbour))
                time.sleep(0.05)
            summary = client.get(f"/evaluations/runs/{run['run_id']}", headers=runner).json()
    rows = [
        ["neighbour /search, no run", len(alone), median(alone), percentile(alone, 95), 1.0],
        [
            f"neighbour /search, {args.items}-item run",
            len(during),
            median(during),
            percentile(during, 95),
            percentile(during, 95) / percentile(alone, 95),
        ],
    ]
    print(table(["workload", "searches", "median ms", "p95 ms", "p95 ratio"], rows))
    print(
        f"\nrun: {args.items} items in {run_s:.1f} s, item p50 "
        f"{summary['summary']['latency_p50_ms']} ms, p95 {summary['summary']['latency_p95_ms']} ms"
    )


if __name__ == "__main__":
    main()
