"""The contents-page case skips with a clear message when the R manuals are not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.container import Container
from eval import contents_case
from tests.availability import needs
from tests.fakes import fake_providers

pytestmark = pytest.mark.unit


def test_missing_manuals_are_skipped_with_the_package_to_install(
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(contents_case, "R_MANUAL_DIR", tmp_path / "nowhere")
    report = contents_case.evaluate_contents_case(
        Container(settings, fake_providers()), tmp_path / "work"
    )
    assert set(report) == set(contents_case.MANUALS)
    for entry in report.values():
        assert "apt-get install -y r-doc-pdf" in entry["skipped"]
    assert "SKIPPED contents-page case" in capsys.readouterr().out


@needs(
    (contents_case.R_MANUAL_DIR / "R-intro.pdf").is_file(),
    "the R manuals are missing: apt-get install -y r-doc-pdf",
)
def test_outline_questions_come_from_the_bookmarks_without_role_pages() -> None:
    questions = dict(contents_case.outline_questions(contents_case.R_MANUAL_DIR / "R-intro.pdf"))
    assert questions["R and statistics"] == 8  # "1.3 R and statistics": number stripped, R kept
    assert questions["A sample session"] == 94  # "A A sample session": appendix letter stripped
    assert "Concept index" not in questions and "References" not in questions
