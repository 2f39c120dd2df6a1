"""The input limits of the API, in one place.

Two layers, both defined here so they cannot disagree:

- Ceilings: fixed outer bounds. The request models declare them (so a body is rejected before
  any work when it exceeds every possible configuration), and Settings refuses a configured cap
  above them (so a cap the models would never let through cannot be configured). The chat
  endpoint's per-message caps are ceilings only.
- `RequestLimits`: the configured caps (`RAG_MAX_QUESTION_CHARS`, `RAG_MAX_K`,
  `RAG_MAX_PAGE_SIZE`, for document, job and conversation listings). The services enforce them
  with these checks, and /openapi.json documents these same values (`app.api.openapi`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import InvalidInput

QUESTION_CHARS_CEILING = 20_000
K_CEILING = 1000
PAGE_SIZE_CEILING = 1000
# A document, job or conversation listing's page size when the client names none (a smaller
# configured cap wins).
DEFAULT_PAGE_SIZE = 50
# /v1/chat/completions: fixed caps on a request's messages (the body as a whole is capped by
# RAG_MAX_BODY_BYTES: 413). One message at the cap, every character JSON-escaped, fits in that
# cap's default; the last user message, the question, also has the configured question cap.
CHAT_MESSAGE_CHARS_CEILING = 8_000
CHAT_MESSAGES_CEILING = 100


@dataclass(frozen=True)
class RequestLimits:
    """The configured caps of search, question and listing requests, and their checks."""

    max_question_chars: int
    max_k: int
    default_k: int
    max_page_size: int

    def question(self, text: str) -> str:
        """The question stripped; InvalidInput when blank or over the length cap.

        The cap applies to the text as sent (as /openapi.json documents it), whitespace included.
        """
        if len(text) > self.max_question_chars:
            raise InvalidInput(f"the question is longer than {self.max_question_chars} characters")
        stripped = text.strip()
        if not stripped:
            raise InvalidInput("the question is empty")
        return stripped

    def k(self, k: int | None) -> int:
        """The requested k, or the default; InvalidInput outside 1..max_k."""
        if k is None:
            return self.default_k
        if not 1 <= k <= self.max_k:
            raise InvalidInput(f"k must be between 1 and {self.max_k}")
        return k

    def page_size(self, limit: int | None) -> int:
        """The requested page size, or the default (never above the cap); InvalidInput above it."""
        if limit is None:
            return min(DEFAULT_PAGE_SIZE, self.max_page_size)
        if limit > self.max_page_size:
            raise InvalidInput(f"limit must not exceed {self.max_page_size}")
        return limit
