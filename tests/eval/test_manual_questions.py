"""The natural-question sets on real manuals: their shape, their split and their gold pages."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from pypdf import PdfWriter

from app.config import Settings
from app.container import Container
from eval import manual_questions as mq
from tests.availability import needs
from tests.fakes import fake_providers


@pytest.mark.unit
def test_the_sets_have_enough_questions_on_every_manual_and_none_on_the_unseen_ones() -> None:
    questions = mq.load_questions()
    assert len(questions) >= 150
    per_manual = Counter(q.manual for q in questions)
    assert set(per_manual) == set(mq.SOURCES)
    assert min(per_manual.values()) >= 30
    assert not {s.name for s in mq.SOURCES.values()} & mq.UNSEEN_MANUALS
    assert len({q.id for q in questions}) == len(questions)
    assert len({q.text.casefold() for q in questions}) == len(questions)
    assert all(q.text.endswith("?") for q in questions), "questions are worded as users ask"


@pytest.mark.unit
def test_each_manual_is_split_in_halves_that_do_not_move_when_a_question_is_reworded() -> None:
    questions = mq.load_questions()
    for manual in mq.SOURCES:
        splits = Counter(q.split for q in questions if q.manual == manual)
        assert abs(splits["tuning"] - splits["test"]) <= 1, (manual, splits)
    reworded = [replace(q, text=q.text + " Please help.") for q in questions]
    assert [q.split for q in mq.assign_splits(reworded)] == [q.split for q in questions]


@pytest.mark.unit
def test_the_wide_set_has_eight_or_more_manuals_from_other_packages_and_domains() -> None:
    wide = mq.DEV_WIDE_SOURCES
    questions = mq.load_questions(sources=wide)
    per_manual = Counter(q.manual for q in questions)
    assert set(per_manual) == set(wide)
    assert len(wide) >= 8 and min(per_manual.values()) >= 25, per_manual
    assert len({s.package for s in wide.values()}) == len(wide), "one Debian package each"
    assert len({s.domain for s in wide.values()}) >= 6
    assert not {s.package for s in wide.values()} & {s.package for s in mq.SOURCES.values()}
    assert not {s.name for s in wide.values()} & mq.UNSEEN_MANUALS
    assert {s.group for s in wide.values()} == {"dev-wide"}
    # Leave-one-manual-out needs every question: none is held back in a test half.
    assert {q.split for q in questions} == {"dev"}
    everything = mq.load_questions(sources=mq.ALL_SOURCES)
    assert len({q.id for q in everything}) == len(everything)
    assert all(q.text.endswith(("?", "؟")) for q in questions)
    arabic = [q for q in questions if wide[q.manual].language == "ar"]
    assert len(arabic) >= 25 and all(re.search("[\u0600-\u06ff]", q.text) for q in arabic)
    # The first (halved) set is loaded as before, halves and all.
    assert {q.manual for q in mq.load_questions()} == set(mq.SOURCES)


@pytest.mark.unit
def test_a_gzipped_manual_is_read_from_an_unpacked_copy(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    plain = tmp_path / "guide.pdf"
    with plain.open("wb") as out:
        writer.write(out)
    packed = tmp_path / "guide.pdf.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    unpacked = mq.readable_pdf(packed)
    assert unpacked.name == "guide.pdf" and unpacked.read_bytes() == plain.read_bytes()
    assert mq.readable_pdf(plain) == plain


@pytest.mark.unit
def test_evidence_is_matched_across_line_breaks_and_case_and_must_pin_a_few_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pages = {
        3: "set datafile separator comma",
        7: "The command SET DATAFILE\nseparator tells gnuplot",
        8: "plot sin(x)",
        9: "plot sin(x)",
        10: "plot sin(x)",
        11: "plot sin(x)",
    }
    assert mq.evidence_pages(
        "set datafile   separator", {n: mq._squashed(t) for n, t in pages.items()}
    ) == [3, 7]
    monkeypatch.setattr(
        mq, "content_pages", lambda path: {n: mq._squashed(t) for n, t in pages.items()}
    )
    found = mq.ManualQuestion("g-1", "gnuplot", "How do I read a CSV file?", ("separator tells",))
    assert mq.resolve_gold([found]) == {"g-1": [7]}
    missing = mq.ManualQuestion("g-2", "gnuplot", "Why?", ("not in the manual",))
    everywhere = mq.ManualQuestion("g-3", "gnuplot", "How?", ("plot sin(x)",))
    with pytest.raises(mq.EvidenceError) as raised:
        mq.resolve_gold([found, missing, everywhere])
    assert "g-2" in str(raised.value) and "no content page" in str(raised.value)
    assert "g-3" in str(raised.value) and "4 pages" in str(raised.value)


@pytest.mark.unit
def test_missing_manuals_are_skipped_with_the_packages_to_install(
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nowhere = {
        name: replace(source, path=tmp_path / "nowhere" / source.name)
        for name, source in mq.SOURCES.items()
    }
    monkeypatch.setattr(mq, "SOURCES", nowhere)
    report = mq.evaluate_manual_questions(Container(settings, fake_providers()), tmp_path / "work")
    assert set(report["manuals"]) == set(nowhere)
    assert "apt-get install -y r-doc-pdf" in report["manuals"]["R-lang"]["skipped"]
    assert "apt-get install -y gnuplot-doc" in report["manuals"]["gnuplot"]["skipped"]
    assert "SKIPPED manual questions" in capsys.readouterr().out


@pytest.mark.integration
@needs(
    not mq.missing_sources(mq.KNOWN_SOURCES),
    f"manuals missing: {mq.install_hint(mq.KNOWN_SOURCES.values())}",
)
def test_every_evidence_string_resolves_to_the_committed_gold_pages_of_the_real_pdf() -> None:
    gold = mq.resolve_gold(mq.load_questions(sources=mq.KNOWN_SOURCES))
    assert all(1 <= len(pages) <= mq.MAX_GOLD_PAGES for pages in gold.values())
    committed = json.loads(mq.GOLD_FILE.read_text(encoding="utf-8"))
    assert gold == committed, "the loader's pages moved: rerun python -m eval.manual_questions"
    # Spot checks a reader can verify in a PDF viewer (1-based page numbers, not printed labels).
    assert gold["r-data-001"] == [9]  # R-data.pdf page 9, printed "5": col.names = NA
    assert gold["gnuplot-001"] == [109, 144]  # "Csv files" and "Set datafile separator"
    assert gold["debref-001"] == [32]  # debian-reference: 1.1.8 How to shutdown the system
    assert gold["libdbi-001"] == [9]  # libdbi programmer's guide (gzipped PDF): 1.1 Description
    assert gold["r-intro-014"] == [40]  # R-intro, held out: read.table with header=TRUE
    assert gold["amiri-ar-008"] == [3]  # the Amiri font's Arabic documentation: لفظ الجلالة
