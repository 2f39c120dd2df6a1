"""The English arm (RAG_ENGLISH_EMBEDDING=minilm) on the real stack: real USE and MiniLM, real
Chroma, uploads and searches through HTTP.

The corpus is English paragraphs, one file each, and two Arabic ones. An English question's
dense arm ranks the English documents by MiniLM and the Arabic ones by USE; an Arabic question
is ranked by USE alone, as without the option.
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
from app.storage.second_index import ENGLISH_PREFIX

pytestmark = pytest.mark.integration

ENGLISH = {
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
ARABIC = {
    # "The camel is the ship of the desert; it endures thirst for many days."
    "camel.txt": "الجمل سفينة الصحراء، وهو يتحمل العطش أياما كثيرة.",
    # "The printer prints thirty pages a minute in black and white."
    "printer.txt": "تطبع الطابعة ثلاثين صفحة في الدقيقة بالأبيض والأسود.",
}
PARAGRAPHS = {**ENGLISH, **ARABIC}
ENGLISH_QUESTION = "How long until the battery is full?"
ENGLISH_GOLD = ENGLISH["battery.txt"]
ARABIC_QUESTION = "متى تمتلئ البطارية؟"  # "When is the battery full?"
# An English question about an Arabic document (no word in common: the dense arms find it).
ACROSS_QUESTION = "Which animal can go without water in the desert?"
ACROSS_GOLD = ARABIC["camel.txt"]
SMALL_ARMS = {"dense_candidates": 3, "keyword_candidates": 3}


def upload_all(harness: ApiHarness, user: ApiUser, paragraphs: dict[str, str]) -> dict[str, str]:
    """Upload every paragraph as its own file; source -> document id."""
    ids = {}
    for name, text in paragraphs.items():
        job = harness.upload_and_wait(user, name, text.encode())
        assert job["status"] == "done", job
        ids[name] = job["document_id"]
    return ids


def results(harness: ApiHarness, user: ApiUser, question: str, **extra: object) -> list[dict]:
    return list(harness.search(user, question, k=5, **extra)["results"])


def texts(found: list[dict]) -> list[str]:
    return [r["text"] for r in found]


def english_collections(container: Container) -> list[str]:
    client = container.corpus.index.client  # type: ignore[attr-defined]
    return [c.name for c in client.list_collections() if c.name.startswith(ENGLISH_PREFIX + "_")]


@pytest.fixture(scope="module")
def routed(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(english_embedding="minilm", **SMALL_ARMS)


def test_english_documents_only_are_embedded_by_the_english_arm(routed: ApiHarness) -> None:
    user = routed.add_user("acme")
    upload_all(routed, user, PARAGRAPHS)
    english = routed.container.english_arm
    assert english is not None
    assert routed.container.corpus.count("acme") == len(PARAGRAPHS)
    assert english.index.count("acme") == len(ENGLISH)  # the Arabic documents are not in it


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


def test_deleting_a_document_removes_its_english_vectors(routed: ApiHarness) -> None:
    user = routed.add_user("umbrella")
    ids = upload_all(routed, user, PARAGRAPHS)
    response = routed.client.delete(f"/documents/{ids['battery.txt']}", headers=user.headers)
    assert response.status_code == 204, response.text
    english = routed.container.english_arm
    assert english is not None
    assert english.index.count("umbrella") == len(ENGLISH) - 1
    assert ENGLISH_GOLD not in texts(results(routed, user, ENGLISH_QUESTION))


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


def test_tenants_have_their_own_english_collection(routed: ApiHarness) -> None:
    alice = routed.add_user("wayne")
    bob = routed.add_user("tyrell")
    upload_all(routed, alice, ENGLISH)
    job = routed.upload_and_wait(bob, "charge.txt", b"Charging the battery takes one hour.")
    assert job["status"] == "done", job
    english = routed.container.english_arm
    assert english is not None
    assert english.index.count("tyrell") == 1
    assert texts(results(routed, bob, ENGLISH_QUESTION)) == ["Charging the battery takes one hour."]
    assert "Charging the battery" not in " ".join(texts(results(routed, alice, ENGLISH_QUESTION)))


def test_without_the_option_nothing_changes(api_factory: ApiFactory) -> None:
    harness = api_factory(**SMALL_ARMS)
    user = harness.add_user("acme")
    upload_all(harness, user, PARAGRAPHS)
    assert harness.container.english_arm is None
    body = harness.search(user, ENGLISH_QUESTION, k=5)
    assert all(r["stages"]["english_dense_rank"] is None for r in body["results"])
    assert not {"embed_query_english", "dense_english"} & set(body["timings"])
    assert english_collections(harness.container) == []


def test_switched_on_for_a_tenant_indexed_without_it_the_arm_waits_for_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    off = api_settings(data_dir, **SMALL_ARMS)
    *first, (last, text) = ENGLISH.items()
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        upload_all(harness, user, {**dict(first), **ARABIC})

    on = api_settings(data_dir, english_embedding="minilm", **SMALL_ARMS)
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # Incomplete English collection: ranked by USE alone, as before the switch.
        assert all(
            r["stages"]["english_dense_rank"] is None
            for r in results(harness, user, ENGLISH_QUESTION)
        )
        assert harness.upload_and_wait(user, last, text.encode())["status"] == "done"
        english = harness.container.english_arm
        assert english is not None and english.index.count("acme") == 1  # only the new upload
        assert all(
            r["stages"]["english_dense_rank"] is None
            for r in results(harness, user, ENGLISH_QUESTION)
        )

        assert cmd_reindex(harness.container, argparse.Namespace(tenant="acme")) == 0
        assert f"English arm: embedded {len(ENGLISH)} chunks" in capsys.readouterr().out
        assert english.index.count("acme") == len(ENGLISH)
        found = results(harness, user, ENGLISH_QUESTION)
        assert found[0]["text"] == ENGLISH_GOLD
        assert found[0]["stages"]["english_dense_rank"] == 1
        assert harness.container.corpus.fill_english("acme") == 0  # nothing left to fill


def test_english_chunks_written_while_the_option_was_off_keep_the_arm_out_until_reindex(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    on = api_settings(data_dir, english_embedding="minilm", **SMALL_ARMS)
    off = api_settings(data_dir, **SMALL_ARMS)
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        upload_all(harness, user, {k: v for k, v in ENGLISH.items() if k != "battery.txt"})
        assert any(
            r["stages"]["english_dense_rank"] for r in results(harness, user, ENGLISH_QUESTION)
        )
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = relogin(harness, user)
        upload_all(harness, user, {"battery.txt": ENGLISH_GOLD})
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # The English collection lacks the English chunk written without the option.
        found = results(harness, user, ENGLISH_QUESTION)
        assert all(r["stages"]["english_dense_rank"] is None for r in found)
        assert harness.container.corpus.fill_english("acme") == len(ENGLISH)
        assert results(harness, user, ENGLISH_QUESTION)[0]["stages"]["english_dense_rank"] == 1


def relogin(harness: ApiHarness, user: ApiUser) -> ApiUser:
    """The same user with a token from this app."""
    token = harness.login(user.username, user.password)
    return ApiUser(user.tenant, user.username, user.password, token, user.user_id)
