"""The `extractive` provider end to end on real, externally written passages (XQuAD, ARCD)."""

from __future__ import annotations

import json
import random

import pytest
from generation_builders import PARIS, PassageSpec, relevant

from app.config import Settings
from app.generation.grounded_answer import final_answer, stream_answer
from app.providers.extractive import ExtractiveLLM
from app.providers.llms import build_llm
from app.providers.types import ChatMessage, ChatRequest, Grounding
from eval.datasets import data_dir
from tests.availability import unavailable

pytestmark = pytest.mark.unit

DATA = data_dir()

Case = tuple[str, list[str], list[PassageSpec]]


def _cases(relative: str, count: int) -> list[Case]:
    """Questions with the gold paragraph ranked first and two same-article paragraphs after it."""
    path = DATA / relative
    if not path.exists():
        unavailable(f"evaluation data {path} is not present")
    cases: list[Case] = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        contexts = [p["context"] for p in article["paragraphs"]]
        for index, paragraph in enumerate(article["paragraphs"]):
            others = [c for k, c in enumerate(contexts) if k != index][:2]
            passages = [("gold.txt", 1, "1", contexts[index])]
            passages += [(f"other{k}.txt", 1, "1", text) for k, text in enumerate(others)]
            for qa in paragraph["qas"]:
                golds = [answer["text"] for answer in qa["answers"]]
                cases.append((qa["question"], golds, passages))
    return random.Random(7).sample(cases, count)


@pytest.mark.parametrize(
    ("dataset", "minimum"), [("xquad/xquad.en.json", 0.8), ("arcd/arcd-test.json", 0.7)]
)
def test_extracted_sentences_contain_the_gold_answer_and_cite_it(
    settings: Settings, dataset: str, minimum: float
) -> None:
    llm = build_llm(settings)  # the test settings choose `extractive`
    assert llm.model_id == "extractive"
    cases = _cases(dataset, 40)
    found = cited_gold = 0
    for question, golds, passages in cases:
        answer = final_answer(stream_answer(question, relevant(passages), llm, refusal_text="R"))
        assert not answer.refused and answer.citations
        assert all(1 <= c.marker <= len(passages) for c in answer.citations)
        found += any(gold in answer.text for gold in golds)
        cited_gold += answer.citations[0].source == "gold.txt"
    print(f"{dataset}: gold span in {found}/40 answers, first citation gold {cited_gold}/40")
    assert found / len(cases) >= minimum
    assert cited_gold / len(cases) >= minimum


def test_answer_is_verbatim_sentences_with_markers_and_deterministic() -> None:
    question = "How tall is the Eiffel Tower?"
    first = final_answer(
        stream_answer(question, relevant(PARIS), ExtractiveLLM(), refusal_text="R")
    )
    again = final_answer(
        stream_answer(question, relevant(PARIS), ExtractiveLLM(), refusal_text="R")
    )
    assert first == again
    assert "It is 330 metres tall" in first.text
    sentences = [part.strip() for part in first.text.split("[1]") if part.strip()]
    assert sentences and all(sentence in PARIS[0][3] for sentence in sentences)
    assert first.citations[0].page_label == "iv"


def test_arabic_question_over_arabic_passage() -> None:
    passages = [
        ("tower.txt", 1, "1", "بني البرج عام 1889. يبلغ ارتفاع البرج 330 مترا."),
        ("museum.txt", 1, "1", "متحف اللوفر هو أكثر المتاحف زيارة في العالم."),
    ]
    answer = final_answer(
        stream_answer("ما ارتفاع البرج؟", relevant(passages), ExtractiveLLM(), refusal_text="R")
    )
    assert answer.text.startswith("يبلغ ارتفاع البرج 330 مترا. [1]")


def test_no_passages_gives_the_refusal() -> None:
    request = ChatRequest(messages=(), grounding=Grounding("q", (), "No answer."))
    assert "".join(d.text for d in ExtractiveLLM().stream(request)) == "No answer."


def test_plain_chat_gets_its_last_user_message_back() -> None:
    messages = (
        ChatMessage("system", "Rewrite the follow-up as a standalone question."),
        ChatMessage("user", "How tall is it?"),
    )
    reply = "".join(d.text for d in ExtractiveLLM().stream(ChatRequest(messages=messages)))
    assert reply == "How tall is it?"
