"""Script detection: an Arabic question is one whose letters are mostly Arabic."""

from __future__ import annotations

import pytest

from app.text.language import is_mostly_arabic

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "arabic"),
    [
        ("متى اكتمل بناء برج إيفل؟", True),
        ("ما هو DNA؟", True),
        ("When was the Eiffel Tower completed?", False),
        ("What does الجواب mean in English?", False),
        ("1889", False),
    ],
)
def test_question_language_by_majority_of_letters(text: str, arabic: bool) -> None:
    assert is_mostly_arabic(text) is arabic
