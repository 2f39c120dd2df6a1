"""One conversation with a follow-up, answered by the real local model (rewrite and answer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_api_conversations import FILES

from tests.api.harness import ApiFactory

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_follow_up_with_the_local_model(api_factory: ApiFactory) -> None:
    api = api_factory(
        llm_provider="llamacpp",
        models_dir=REPO / "models",
        llm_timeout_s=600.0,
        conversation_rewrite_timeout_s=300.0,  # a loaded shared machine; the budget is not tested
    )
    user = api.add_user("convo-local", login=False)
    for name, content in FILES.items():
        assert api.upload_and_wait(user, name, content)["status"] == "done"
    created = api.client.post("/conversations", headers=user.headers).json()
    path = f"/conversations/{created['conversation_id']}/messages"

    first = api.client.post(
        path,
        json={"content": "How many towers does the Harrowgate castle have?"},
        headers=user.headers,
    ).json()
    assert "eleven" in first["answer"].lower() or "11" in first["answer"], first
    follow_up = api.client.post(
        path, json={"content": "When was it built?"}, headers=user.headers
    ).json()
    assert follow_up["rewrite_ms"] > 0  # the model was asked to rewrite
    assert "harrowgate" in follow_up["standalone_question"].lower(), follow_up
    assert "1342" in follow_up["answer"], (follow_up["standalone_question"], follow_up["answer"])
    assert {c["source"] for c in follow_up["citations"]} == {"castle.txt"}, follow_up
