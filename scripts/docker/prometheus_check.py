"""`make docker-check`'s monitoring step: the compose stack's Prometheus scrapes the api and the
workers, has loaded every alert rule, and sees the user flow's upload and requests.

    python scripts/docker/prometheus_check.py --url http://127.0.0.1:19090
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

# Up to two scrape intervals after the flow, plus Prometheus's own start-up.
WAIT_S = 120


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.load(response)
    return body


def query(base: str, promql: str) -> float | None:
    """The single value of an instant query, or None while it has none."""
    data = get(f"{base}/api/v1/query?query={urllib.parse.quote(promql)}")["data"]["result"]
    return float(data[0]["value"][1]) if data else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    base = parser.parse_args().url.rstrip("/")
    # The flow restarts the stack (down/up), which resets the counters: look back over the run.
    # It uploads once more after the restart, so a done job is always counted after it.
    checks = {
        "api and worker targets up": ('count(up{job=~"rag-.*"} == 1)', 2.0),
        "an upload indexed": ('sum(max_over_time(rag_jobs_total{outcome="done"}[30m]))', 1.0),
        # The flow's answer comes just before the restart, often between two scrapes; the
        # requests after the restart are always seen (answers are counted by the tests).
        "requests counted": ("sum(max_over_time(rag_http_requests_total[30m]))", 1.0),
        "build info": ("count(rag_build_info)", 1.0),
    }
    deadline = time.monotonic() + WAIT_S
    pending = dict(checks)
    while pending and time.monotonic() < deadline:
        for name, (promql, at_least) in list(pending.items()):
            try:
                value = query(base, promql)
            except OSError:
                value = None
            if value is not None and value >= at_least:
                print(f"ok: {name} ({promql} = {value:g})")
                del pending[name]
        if pending:
            time.sleep(5)
    rules = get(f"{base}/api/v1/rules")["data"]["groups"]
    unhealthy = [r["name"] for g in rules for r in g["rules"] if r.get("health") != "ok"]
    count = sum(len(g["rules"]) for g in rules)
    print(f"{count} alert rules loaded, unhealthy: {unhealthy or 'none'}")
    for name, (promql, at_least) in pending.items():
        print(f"FAILED: {name}: {promql} did not reach {at_least:g} in {WAIT_S} s")
    return 1 if pending or unhealthy or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
