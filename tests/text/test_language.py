"""Script detection: an Arabic question is one whose letters are mostly Arabic. A document's
language, as the `language` filter reads it: Arabic by its letters, the Latin languages told
apart by their common words, and no guess for text that gives none."""

from __future__ import annotations

import pytest

from app.text.language import (
    LANGUAGE_CHUNKS,
    detect_language,
    document_language,
    is_english_question,
    is_mostly_arabic,
)

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


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The valve is checked every month and the seal is replaced by the fitter.", "en"),
        ("Das Ventil wird jeden Monat geprüft und die Dichtung ist nicht mit dem Öl.", "de"),
        ("La vanne est contrôlée chaque mois et le joint est remplacé pour la pompe.", "fr"),
        ("La válvula se revisa cada mes y el sello se cambia con una llave para el tubo.", "es"),
        ("La valvola è controllata ogni mese e il sigillo non è della pompa.", "it"),
        ("De klep wordt elke maand gecontroleerd en het is niet met een sleutel.", "nl"),
        ("A válvula é verificada todo mês e o selo não é trocado com uma chave.", "pt"),
        ("يتم فحص الصمام كل شهر ويستبدل الختم عند الحاجة مع ذكر DN50 في التقرير.", "ar"),
    ],
)
def test_a_text_is_told_by_its_script_and_its_common_words(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_no_letters_or_no_common_words_is_no_language() -> None:
    assert detect_language("") is None
    assert detect_language("4417 — 12:30 / 99 %") is None
    assert detect_language("Hyvää huomenta kaikille") is None  # Finnish: not told apart here


@pytest.mark.parametrize(
    ("question", "english"),
    [
        ("How long until the battery is full?", True),
        ("send everything R prints to a file", True),  # no common word: still English
        ("What does الجواب mean in English?", True),
        ("متى تمتلئ البطارية؟", False),
        ("ما هو DNA؟", False),
        ("Wie lange dauert es, bis die Batterie voll ist?", False),
        ("Comment installer le paquet sur le serveur ?", False),
        ("1889", False),
    ],
)
def test_a_question_goes_to_the_english_arm_only_when_it_reads_as_english(
    question: str, english: bool
) -> None:
    assert is_english_question(question) is english


def test_a_documents_language_is_told_from_its_first_chunks_only() -> None:
    arabic = "هذا نص عربي عن الطابعة وكيف تعمل في المكتب."
    english = "This is the text of the manual and it is in English."
    assert document_language([english] * LANGUAGE_CHUNKS + [arabic] * 100) == "en"
    assert document_language([arabic] * LANGUAGE_CHUNKS + [english] * 100) == "ar"
