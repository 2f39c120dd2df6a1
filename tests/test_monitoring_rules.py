"""The operator kit of docker/prometheus: the alert rules and the scrape configuration are
valid for Prometheus, and each alert fires on what it names and not on a healthy service
(`promtool test rules` over docker/prometheus/alerts_test.yml). Uses Debian's `prometheus`
package (scripts/install.sh installs it); it fails, never skips, when promtool is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[1] / "docker" / "prometheus"
ALERTS = (
    "RagAnswerLatencyHigh",
    "RagAdmissionRefusalsRising",
    "RagJobFailureRatioHigh",
    "RagIngestQueueStuck",
    "RagWorkerHeartbeatMissing",
    "RagCacheHitRatioCollapsed",
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: install Debian's prometheus (scripts/install.sh)"
    return subprocess.run(
        [binary, *args], cwd=KIT, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_alert_rules_are_valid() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


def test_the_scrape_configuration_is_valid() -> None:
    checked = promtool("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_alert_fires_on_its_situation_and_not_on_a_healthy_one() -> None:
    tested = promtool("test", "rules", "alerts_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    cases = yaml.safe_load((KIT / "alerts_test.yml").read_text(encoding="utf-8"))
    covered = {case["alertname"] for test in cases["tests"] for case in test["alert_rule_test"]}
    assert covered == set(ALERTS)


def test_the_rules_use_only_metrics_the_service_exposes() -> None:
    from app.metrics import _create

    registry = _create(frozenset()).registry  # a registry of its own; metrics stay off here
    assert registry is not None
    exposed = set()
    for family in registry.collect():
        exposed.add(family.name)
        exposed |= {f"{family.name}{suffix}" for suffix in ("_total", "_bucket", "_count")}
    exposed.add("rag_jobs_oldest_queued_age_seconds")  # created at the first scrape
    used = set(re.findall(r"\brag_[a-z_]+", (KIT / "alerts.yml").read_text(encoding="utf-8")))
    assert used and used <= exposed, used - exposed
