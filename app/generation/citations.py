"""Citation markers in model output: validated while streaming, then mapped to their chunks.

A model may invent a marker (`[7]` when 4 passages were given) or split one across stream
deltas (`[` then `2]`). `MarkerFilter` sees the text as it streams, holds back anything that may
still become a marker, keeps markers inside 1..n (written as `[1][3]`), and removes invalid ones
together with the space before them, so a reader never sees a source that does not exist.

The model cites passages by their number in the prompt; the reader sees sources numbered in the
order the answer first cites them (the first source is always `[1]`, whichever passage it was),
and each `Citation.marker` is that shown number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.domain import SearchHit
from app.text.sentences import best_sentences, split_sentences

_SEPARATORS = r"[,،;]"
MARKER_GROUP = re.compile(rf"\[\s*(\d{{1,4}}(?:\s*{_SEPARATORS}\s*\d{{1,4}})*)\s*\]")
_PARTIAL_GROUP = re.compile(rf"\[\s*(?:\d{{1,4}}(?:\s*{_SEPARATORS}\s*\d{{0,4}})*)?\s*")
_MAX_HELD = 32
_SNIPPET_CHARS = 200


@dataclass(frozen=True)
class Citation:
    """Where a marker points: the chunk's document, file name, page and a short snippet."""

    marker: int
    document_id: str
    source: str
    page: int
    page_label: str
    snippet: str
    chunk_id: str = ""  # the cited chunk: highlights the passage on its page


def marker_numbers(group: str) -> list[int]:
    """The numbers inside one marker group's brackets (`1, 3` -> [1, 3]), any digit script."""
    return [int(number) for number in re.findall(r"\d+", group)]


class MarkerFilter:
    """Incremental cleaner for streamed answer text with `n` valid passages."""

    def __init__(
        self, passage_count: int, repoint: Callable[[str, list[int]], list[int]] | None = None
    ) -> None:
        self._count = passage_count
        self._repoint = repoint  # (claim written since the last marker, numbers) -> numbers
        self._claim = ""
        self._held = ""  # text that may still turn out to be a marker
        self._space = ""  # trailing whitespace, dropped if an invalid marker follows
        self._started = False
        self.cited: list[int] = []  # cited passage numbers in order of first use
        self.dropped = 0  # invalid marker numbers removed

    def cite(self, passage: int) -> str:
        """The marker shown for a passage: its place among the sources cited so far (a passage
        cited for the first time becomes the next source)."""
        if passage not in self.cited:
            self.cited.append(passage)
        return f"[{self.cited.index(passage) + 1}]"

    def feed(self, text: str) -> str:
        """Clean the next delta; returns what can be shown now (possibly empty)."""
        self._held += text
        out: list[str] = []
        while self._held:
            bracket = self._held.find("[")
            if bracket == -1:
                out.append(self._plain(self._held))
                self._held = ""
                break
            if bracket > 0:
                out.append(self._plain(self._held[:bracket]))
                self._held = self._held[bracket:]
            match = MARKER_GROUP.match(self._held)
            if match:
                out.append(self._marker(match.group(1)))
                self._held = self._held[match.end() :]
                continue
            if len(self._held) < _MAX_HELD and _PARTIAL_GROUP.fullmatch(self._held):
                break  # wait for the rest of a possible marker
            out.append(self._plain("["))
            self._held = self._held[1:]
        return "".join(out)

    def finish(self) -> str:
        """Flush what is left at the end of the stream (trailing whitespace is dropped)."""
        tail = self._plain(self._held) if self._held else ""
        self._held = ""
        self._space = ""
        return tail

    def _plain(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        body = text.rstrip()
        if not body:
            self._space += text
            return ""
        self._claim += self._space + body
        shown = self._space + body
        self._space = text[len(body) :]
        return shown

    def _marker(self, group: str) -> str:
        valid: list[int] = []
        for number in marker_numbers(group):
            if 1 <= number <= self._count:
                if number not in valid:
                    valid.append(number)
            else:
                self.dropped += 1
        if not valid:
            self._space = ""  # "word [7]." shows as "word."
            return ""
        if self._repoint is not None:
            valid = self._repoint(self._claim, valid)
        self._claim = ""
        self._started = True
        shown = self._space + "".join(self.cite(n) for n in valid)
        self._space = ""
        return shown


def _normalised(text: str) -> str:
    without_markers = MARKER_GROUP.sub(" ", text)
    return " ".join(re.sub(r"[^\w\s]", " ", without_markers.casefold()).split())


def is_refusal(text: str, refusal_text: str) -> bool:
    """Whether an answer is the refusal sentence (ignoring case, punctuation and markers)."""
    answer, refusal = _normalised(text), _normalised(refusal_text)
    return bool(refusal) and answer == refusal


def snippet_for(hit: SearchHit, answer_text: str) -> str:
    """The sentence of the cited chunk closest to the answer, shortened for display."""
    chunk_text = hit.chunk.text
    chosen = best_sentences(answer_text, (chunk_text,), max_passages=1, max_sentences=1)
    sentences = split_sentences(chunk_text)
    sentence = chosen[0][1] if chosen else (sentences[0] if sentences else "")
    if len(sentence) > _SNIPPET_CHARS:
        sentence = sentence[:_SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
    return sentence


def citations_for(
    markers: Sequence[int], hits: Sequence[SearchHit], answer_text: str
) -> list[Citation]:
    """One Citation per cited passage number (`markers`, in order of first use), each with the
    marker the answer shows for it: its place in that order."""
    plain_answer = MARKER_GROUP.sub(" ", answer_text)
    citations = []
    for shown, passage in enumerate(markers, start=1):
        chunk = hits[passage - 1].chunk
        citations.append(
            Citation(
                marker=shown,
                document_id=chunk.document_id,
                source=chunk.source,
                page=chunk.page,
                page_label=chunk.page_label,
                snippet=snippet_for(hits[passage - 1], plain_answer),
                chunk_id=chunk.id,
            )
        )
    return citations
