"""A query that is a section heading lands on the page where that heading stands, even when the
next page holds more of the section's words (unit tests, then a real PDF through the real
pipeline, real Chroma and the shipped `use` model)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fpdf import FPDF

from app.config import load_settings
from app.container import Container
from app.domain import Chunk, PageRole
from app.retrieval.headings import has_heading
from app.retrieval.hybrid import Candidate, HybridRetriever, Recall, build_retriever
from app.retrieval.hybrid import promote_headings as promote
from app.services.local_files import ingest_local_file


def _chunk(cid: str, text: str, role: PageRole | None = None) -> Chunk:
    return Chunk(cid, "t", "d", "m.pdf", 1, "1", 0, 0, len(text), text, page_role=role)


@pytest.mark.parametrize(
    ("line", "query", "expected"),
    [
        ("6.3 Families", "Families", True),
        ("Appendix C The command-line editor", "The command-line editor", True),
        ("C.3 Command-line editor summary", "command-line editor summary", True),
        ("R Graphics", "R Graphics", True),  # a one-letter word is not taken for a number
        ("2.1 What is R?", "What is R?", True),
        ("R", "What is R?", False),  # stop words count: the line must say all of it
        ("Generalized linear models and their families", "Families", False),
        ("The families of a glm are chosen with the family argument.", "Families", False),
        ("6.3 Families", "", False),
    ],
)
def test_a_heading_is_a_line_with_exactly_the_query_words(
    line: str, query: str, expected: bool
) -> None:
    text = f"Some prose before the heading, long enough to be a sentence.\n{line}\nMore prose."
    assert has_heading(_chunk("c", text), query) is expected


def test_a_contents_line_is_not_a_heading() -> None:
    assert not has_heading(_chunk("c", "6.3 Families", role="contents"), "Families")


def test_heading_chunks_move_up_behind_exact_matches_and_the_rest_keep_their_order() -> None:
    texts = {
        "next-page": "Families of models: binomial, poisson, gamma families.",
        "pinned": "Part 6672WN5504 fits every family.",
        "heading": "Other text.\n6.3 Families",
        "other": "Unrelated prose.",
        "unloaded": "",
    }
    recall = Recall(pinned=["pinned"])
    for cid, text in texts.items():
        recall.candidates[cid] = Candidate(cid, _chunk(cid, text) if text else None)
    ordered = ["pinned", "next-page", "other", "heading", "unloaded"]
    assert promote(ordered, recall, "Families") == [
        "pinned",
        "heading",
        "next-page",
        "other",
        "unloaded",
    ]
    assert promote(ordered, recall, "No such heading") == ordered


FILLER = (
    "Model formulae describe the response and the terms of a model. Operators combine the "
    "terms; interactions and nesting are written with colons and slashes. The fitted object "
    "keeps the call, the coefficients and the residuals for later inspection and plotting. "
)
NEXT_PAGE = (
    "The families available are gaussian, binomial, poisson, inverse gaussian and gamma. "
    "Each of these families has a default link; the families differ in their variance "
    "function. Choosing among the families is the first step, because the family fixes how "
    "the mean relates to the variance. Quasi families allow a free dispersion. "
)


def _write_pdf(path: Path) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 7, "6 Statistical models\n" + FILLER * 3)
    pdf.add_page()
    # The heading stands at the bottom of page 2; its section's body fills page 3.
    pdf.multi_cell(0, 7, FILLER * 4 + "\n6.3 Families\nA family is chosen per model.")
    pdf.add_page()
    pdf.multi_cell(0, 7, NEXT_PAGE * 2)
    pdf.output(str(path))
    return path


@pytest.mark.integration
def test_the_heading_page_wins_a_query_that_is_its_heading(data_dir: Path, tmp_path: Path) -> None:
    settings = load_settings(_env_file=None, data_dir=data_dir, embedding_provider="use")
    container = Container(settings)
    pdf = _write_pdf(tmp_path / "models.pdf")
    ingest_local_file(container.document_deps, tenant_id="stats", path=pdf)
    retriever: HybridRetriever = build_retriever(
        settings, container.embedder, container.corpus, None
    )
    assert retriever.config.promote_headings  # on by default

    def top_page() -> int:
        return retriever.search("stats", "Families", 5).hits[0].chunk.page

    assert top_page() == 2
    # What the promotion fixes: without it the page holding more of the section's words wins.
    retriever.config = replace(retriever.config, promote_headings=False)
    assert top_page() == 3
