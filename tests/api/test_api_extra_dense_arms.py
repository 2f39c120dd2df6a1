"""What both optional dense arms do alike, on the real stack (real USE, e5 and MiniLM, real
Chroma, uploads and searches through HTTP): nothing without the option; switched on over a
tenant indexed without it, the arm stays out until `reindex` fills it; chunks written while the
option was off keep it out until filled; each tenant has its own collection; a deleted
document leaves the arm too."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from extra_arms import ENGLISH, LATE, SECOND, ExtraArm, relogin, results, texts, upload_all
from fastapi.testclient import TestClient

from app.cli import cmd_reindex
from app.main import create_app
from tests.api.harness import ApiFactory, ApiHarness, api_settings

pytestmark = pytest.mark.integration

ARMS = [pytest.param(SECOND, id="second"), pytest.param(ENGLISH, id="english")]


def ranked_first(arm: ExtraArm, found: list[dict]) -> bool:
    """Whether the arm ranked its gold paragraph first among `found`."""
    gold = arm.paragraphs[arm.gold]
    return any(r["text"] == gold and r["stages"][arm.rank] == 1 for r in found)


def arm_out(arm: ExtraArm, found: list[dict]) -> bool:
    """Whether the arm took no part in a ranking."""
    return all(r["stages"][arm.rank] is None for r in found)


@pytest.mark.parametrize("arm", ARMS)
def test_without_the_option_nothing_changes(api_factory: ApiFactory, arm: ExtraArm) -> None:
    harness = api_factory(**arm.small_arms)
    user = harness.add_user("acme")
    upload_all(harness, user, arm.paragraphs)
    assert arm.of(harness.container) is None
    body = harness.search(user, arm.question, k=5)
    assert arm_out(arm, body["results"])
    assert not arm.timings & set(body["timings"])
    assert arm.collections(harness.container) == []


@pytest.mark.parametrize("arm", ARMS)
def test_switched_on_for_a_tenant_indexed_without_it_the_arm_waits_for_reindex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arm: ExtraArm
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    off = api_settings(data_dir, **arm.small_arms)
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        upload_all(harness, user, {k: v for k, v in arm.paragraphs.items() if k != LATE})
        before = texts(results(harness, user, arm.question))

    on = api_settings(data_dir, **arm.option, **arm.small_arms)
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # An incomplete collection: ranked as before the switch, without the arm.
        found = results(harness, user, arm.question)
        assert texts(found) == before and arm_out(arm, found)
        upload_all(harness, user, {LATE: arm.paragraphs[LATE]})
        extra = arm.of(harness.container)
        assert extra is not None and extra.index.count("acme") == 1  # only the new upload
        assert arm_out(arm, results(harness, user, arm.question))

        assert cmd_reindex(harness.container, argparse.Namespace(tenant="acme")) == 0
        assert f"{arm.reindexed} {arm.embedded} chunks" in capsys.readouterr().out
        assert extra.index.count("acme") == arm.embedded
        assert ranked_first(arm, results(harness, user, arm.question))
        assert arm.fill(harness.container.corpus, "acme") == 0  # nothing left to fill


@pytest.mark.parametrize("arm", ARMS)
def test_chunks_written_while_the_option_was_off_keep_the_arm_out_until_filled(
    tmp_path: Path, arm: ExtraArm
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    on = api_settings(data_dir, **arm.option, **arm.small_arms)
    off = api_settings(data_dir, **arm.small_arms)
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = harness.add_user("acme")
        upload_all(harness, user, {k: v for k, v in arm.paragraphs.items() if k != LATE})
        assert not arm_out(arm, results(harness, user, arm.question))
    with TestClient(create_app(off)) as client:
        harness = ApiHarness(client.app, client, off)  # type: ignore[arg-type]
        user = relogin(harness, user)
        upload_all(harness, user, {LATE: arm.paragraphs[LATE]})
    with TestClient(create_app(on)) as client:
        harness = ApiHarness(client.app, client, on)  # type: ignore[arg-type]
        user = relogin(harness, user)
        # The arm's collection lacks the chunk written without the option: it stays out.
        assert arm_out(arm, results(harness, user, arm.question))
        assert arm.fill(harness.container.corpus, "acme") == arm.embedded
        assert ranked_first(arm, results(harness, user, arm.question))


@pytest.fixture(scope="module", params=ARMS)
def switched_on(
    request: pytest.FixtureRequest, api_factory: ApiFactory
) -> tuple[ExtraArm, ApiHarness]:
    arm: ExtraArm = request.param
    return arm, api_factory(**arm.option, **arm.small_arms)


def test_tenants_have_their_own_collection(switched_on: tuple[ExtraArm, ApiHarness]) -> None:
    arm, harness = switched_on
    alice = harness.add_user("initech")
    bob = harness.add_user("umbrella")
    upload_all(harness, alice, arm.paragraphs)
    upload_all(harness, bob, {"own.txt": arm.lone})  # a paragraph the question finds
    extra = arm.of(harness.container)
    assert extra.index.count("umbrella") == 1
    assert extra.index.count("initech") == arm.embedded
    assert arm.lone not in texts(results(harness, alice, arm.question, k=10))
    assert texts(results(harness, bob, arm.question, k=10)) == [arm.lone]


def test_deleting_a_document_removes_its_vectors_from_the_arm(
    switched_on: tuple[ExtraArm, ApiHarness],
) -> None:
    arm, harness = switched_on
    user = harness.add_user("globex")
    ids = upload_all(harness, user, arm.paragraphs)
    assert ranked_first(arm, results(harness, user, arm.question))
    response = harness.client.delete(f"/documents/{ids[arm.gold]}", headers=user.headers)
    assert response.status_code == 204, response.text
    assert harness.container.corpus.count("globex") == len(arm.paragraphs) - 1
    assert arm.of(harness.container).index.count("globex") == arm.embedded - 1
    assert arm.paragraphs[arm.gold] not in texts(results(harness, user, arm.question))
