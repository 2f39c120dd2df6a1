"""The English arm (RAG_ENGLISH_EMBEDDING=minilm) on the real stack: real USE and MiniLM, real
Chroma, uploads and searches through HTTP.

The corpus is English paragraphs, one file each, and two Arabic ones. An English question's
dense arm ranks the English documents by MiniLM and the Arabic ones by USE; an Arabic question
is ranked by USE alone, as without the option.
"""

from __future__ import annotations

import pytest
from extra_arms import ARABIC, ENGLISH, SERVICE_MANUAL, results, texts, upload_all

from tests.api.harness import ApiFactory, ApiHarness

pytestmark = pytest.mark.integration

PARAGRAPHS = ENGLISH.paragraphs
ENGLISH_QUESTION = ENGLISH.question
ENGLISH_GOLD = PARAGRAPHS[ENGLISH.gold]
ARABIC_QUESTION = "متى تمتلئ البطارية؟"  # "When is the battery full?"
# An English question about an Arabic document (no word in common: the dense arms find it).
ACROSS_QUESTION = "Which animal can go without water in the desert?"
ACROSS_GOLD = ARABIC["camel.txt"]


@pytest.fixture(scope="module")
def routed(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(**ENGLISH.option, **ENGLISH.small_arms)


def test_english_documents_only_are_embedded_by_the_english_arm(routed: ApiHarness) -> None:
    user = routed.add_user("acme")
    upload_all(routed, user, PARAGRAPHS)
    english = routed.container.english_arm
    assert english is not None
    assert routed.container.corpus.count("acme") == len(PARAGRAPHS)
    assert english.index.count("acme") == len(SERVICE_MANUAL)  # the Arabic documents are not in it


def test_an_english_question_is_ranked_by_the_english_arm(routed: ApiHarness) -> None:
    user = routed.add_user("hooli")
    upload_all(routed, user, PARAGRAPHS)
    body = routed.search(user, ENGLISH_QUESTION, k=5)
    first = body["results"][0]
    assert first["text"] == ENGLISH_GOLD
    assert first["stages"]["english_dense_rank"] == 1
    assert first["stages"]["dense_rank"] == 1
    assert {"embed_query", "dense", "embed_query_english", "dense_english"} <= set(body["timings"])


def test_an_arabic_question_is_ranked_by_the_first_embedder_alone(routed: ApiHarness) -> None:
    user = routed.add_user("initech")
    upload_all(routed, user, PARAGRAPHS)
    body = routed.search(user, ARABIC_QUESTION, k=5)
    assert ENGLISH_GOLD in texts(body["results"])
    assert all(r["stages"]["english_dense_rank"] is None for r in body["results"])
    assert not {"embed_query_english", "dense_english"} & set(body["timings"])


def test_an_english_question_still_reaches_an_arabic_document(routed: ApiHarness) -> None:
    user = routed.add_user("globex")
    upload_all(routed, user, PARAGRAPHS)
    found = results(routed, user, ACROSS_QUESTION)
    assert ACROSS_GOLD in texts(found)[:2]
    camel = found[texts(found).index(ACROSS_GOLD)]
    assert camel["stages"]["english_dense_rank"] is None  # ranked by USE
    assert camel["stages"]["dense_rank"] is not None
    # The English documents the question matched came from the English arm.
    assert any(r["stages"]["english_dense_rank"] for r in found)


def test_a_scoped_search_ranks_inside_the_scope(routed: ApiHarness) -> None:
    user = routed.add_user("stark")
    upload_all(routed, user, PARAGRAPHS)
    inside = results(routed, user, ENGLISH_QUESTION, filters={"source": {"$ne": "reset.txt"}})
    assert inside[0]["text"] == ENGLISH_GOLD
    assert inside[0]["stages"]["english_dense_rank"] == 1
    # Without the gold document in the scope, neither arm brings it back.
    outside = results(routed, user, ENGLISH_QUESTION, filters={"source": {"$ne": "battery.txt"}})
    assert ENGLISH_GOLD not in texts(outside)
    assert any(r["stages"]["english_dense_rank"] == 1 for r in outside)
    # A scope of Arabic documents only: the English arm finds nothing, USE ranks them.
    arabic = results(routed, user, ACROSS_QUESTION, filters={"source": {"$in": list(ARABIC)}})
    assert set(texts(arabic)) <= set(ARABIC.values())
    assert texts(arabic)[0] == ACROSS_GOLD
