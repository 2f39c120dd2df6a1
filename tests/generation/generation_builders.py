"""Builders for generation tests: ranked hits made from plain passages."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain import Chunk, RetrievalResult, SearchHit, chunk_id, document_id

# (source, page, page label, text)
PassageSpec = tuple[str, int, str, str]


def make_hits(passages: Sequence[PassageSpec], tenant: str = "tenant-a") -> list[SearchHit]:
    """Hits ranked in the given order, each a chunk of its own document page."""
    hits = []
    for rank, (source, page, label, text) in enumerate(passages):
        doc = document_id(tenant, source)
        chunk = Chunk(
            id=chunk_id(tenant, doc, page, text),
            tenant_id=tenant,
            document_id=doc,
            source=source,
            page=page,
            page_label=label,
            chunk_index=0,
            start=0,
            end=len(text),
            text=text,
        )
        hits.append(SearchHit(chunk=chunk, score=1.0 / (rank + 1)))
    return hits


PARIS: list[PassageSpec] = [
    (
        "eiffel.pdf",
        4,
        "iv",
        "The Eiffel Tower was completed in 1889. It is 330 metres tall and was designed by the "
        "engineering company of Gustave Eiffel.",
    ),
    ("museums.txt", 1, "1", "The Louvre is the most-visited museum in the world."),
    ("olympics.docx", 2, "2", "Paris hosted the Summer Olympics in 1900, 1924 and 2024."),
]

# Arabic passages; the first names an English poet (a question about it tempts an English answer).
POEMS: list[PassageSpec] = [
    (
        "adab.docx",
        3,
        "3",
        "في عام 1819، بعد مذبحة بيترلو في مانشستر، كتب الشاعر الإنجليزي بيرسي شيلي قصيدته "
        "السياسية «قناع الفوضى»، ولم تُنشر إلا في عام 1832.",
    ),
    ("mudun.txt", 1, "1", "افتُتح سوق غرينجر في نيوكاسل عام 1835، وكان أول سوق مسقوف في المدينة."),
    ("paris.pdf", 7, "7", "اكتمل بناء برج إيفل في باريس عام 1889."),
]


def relevant(passages: Sequence[PassageSpec]) -> RetrievalResult:
    """A retrieval result that passed the relevance gate, ranked in the given order."""
    return RetrievalResult(hits=make_hits(passages), relevant=True)
