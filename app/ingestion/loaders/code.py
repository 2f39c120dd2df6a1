"""Source code and JSON files: one page tagged with its language for boundary-aware splitting."""

from __future__ import annotations

import json
from pathlib import Path

from app.domain import Page
from app.ingestion.loaders.languages import CODE_LANGUAGES
from app.ingestion.loaders.text import read_text_file
from app.ingestion.parse_limits import CharBudget, LoadLimits


def _pretty_json(text: str) -> str:
    """Re-indent parseable JSON so chunks split between members; other text stays as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text  # JSON with comments or trailing commas: index it as written
    return json.dumps(value, indent=2, ensure_ascii=False)


def load_code(path: Path, limits: LoadLimits) -> list[Page]:
    """A source or JSON file as one code page whose `language` drives the splitter."""
    language = CODE_LANGUAGES[path.suffix.lower()]
    text = read_text_file(path, limits)
    if language == "json":
        text = CharBudget(limits).spend(_pretty_json(text))  # indentation adds characters
    return [Page(number=1, label="1", text=text, kind="code", language=language)]
