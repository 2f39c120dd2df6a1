"""scripts/check_docs.py (run by `make lint`): broken links, anchors and quick-start commands
are reported; the repository's own documents pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.repo_scripts import load_script

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


check_docs = load_script("check_docs")


def write_repo(root: Path, readme: str, guide: str = "# Guide\n\n## Running it\n") -> None:
    (root / "docs").mkdir()
    (root / "README.md").write_text(readme, encoding="utf-8")
    (root / "docs" / "guide.md").write_text(guide, encoding="utf-8")
    (root / "Makefile").write_text("run: .venv\n\tserve\n\ntest:\n\tpytest\n", encoding="utf-8")


QUICK_START = "# Project\n\n## Quick start\n\n```sh\nmake run\nmake test\n```\n"


def test_the_repository_documents_pass() -> None:
    problems = check_docs.quick_start_problems()
    for path in check_docs.markdown_files():
        problems += check_docs.link_problems(path)
        problems += check_docs.tracker_references(path)
        problems += check_docs.machine_paths(path)
    assert problems == []


def test_a_document_naming_a_folder_of_one_machine_is_reported(tmp_path: Path) -> None:
    write_repo(
        tmp_path,
        QUICK_START + "Run it with `RAG_EVAL_DATA_DIR=/work/shared/data`.\n"
        "```\ncd /home/sara/rag && make eval\n```\n"
        "Not a machine's folder: `eval/work/notes`, `~/.config/rag`, `/srv/rag/data`.\n",
    )
    problems = check_docs.machine_paths(tmp_path / "README.md", tmp_path)
    assert [p.split("(")[1].split(")")[0] for p in problems] == ["'/work/shared'", "'/home/sara'"]


def test_a_document_naming_an_issue_by_its_number_is_reported(tmp_path: Path) -> None:
    write_repo(
        tmp_path,
        QUICK_START + "Fixed for #37, see issue 38 and Issue #4.\n"
        "Not references: `invoice #45`, [a date](#2026-12-06-entry), &#39; and a C# note.\n",
    )
    problems = check_docs.tracker_references(tmp_path / "README.md", tmp_path)
    assert [p.split("(")[1] for p in problems] == [
        "'#37'); say what it is",
        "'issue 38'); say what it is",
        "'Issue #4'); say what it is",
    ]


def test_good_links_and_anchors_pass(tmp_path: Path) -> None:
    write_repo(
        tmp_path, QUICK_START + "See [running](docs/guide.md#running-it), [top](#quick-start).\n"
    )
    assert check_docs.link_problems(tmp_path / "README.md", tmp_path) == []
    assert check_docs.quick_start_problems(tmp_path) == []


def test_a_missing_file_and_a_missing_anchor_are_reported(tmp_path: Path) -> None:
    write_repo(tmp_path, QUICK_START + "[a](docs/missing.md) [b](docs/guide.md#no-such-heading)\n")
    problems = check_docs.link_problems(tmp_path / "README.md", tmp_path)
    assert len(problems) == 2
    assert "docs/missing.md: no such file" in problems[0]
    assert "no heading with anchor #no-such-heading" in problems[1]


def test_links_in_code_are_not_checked(tmp_path: Path) -> None:
    write_repo(tmp_path, QUICK_START + "```\n[x](nowhere.md)\n```\n`[y](nowhere.md)`\n")
    assert check_docs.link_problems(tmp_path / "README.md", tmp_path) == []


def test_a_quick_start_command_that_is_no_make_target_is_reported(tmp_path: Path) -> None:
    write_repo(tmp_path, QUICK_START.replace("make test", "make check"))
    assert check_docs.quick_start_problems(tmp_path) == [
        "README.md quick start: `make check` is not a Makefile target"
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "Answers (`python -m eval.answers`, fixed seed 2026)",
            "answers-python--m-evalanswers-fixed-seed-2026",
        ),
        ("The local model's prompt prefix", "the-local-models-prompt-prefix"),
        ("What `make docker-check` verified", "what-make-docker-check-verified"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert check_docs.slug(heading) == anchor
