"""The leak suite of collections and grants, against one live server: over every route that can
reveal a document, a caller who may not read it (a member without a grant, a reader, an API key
limited to another collection, an admin of another tenant) never sees its marker word, its id or
its file name in any body, its counts stay out of every total, and every refusal is the exact
body a missing document gets. Those who read it do see it through the same probes, so a probe
that reaches nothing cannot pass unnoticed. A revoked grant counts on the next request, cached
answers included."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from testkit.builders import text_document
from testkit.live_server import LiveServer

pytestmark = pytest.mark.integration

PASSWORD = "leak suite password"
T = "leak-suite"
OTHER_T = "leak-suite-other"
MARKER = "Zorblattic"
SECRET_FILE = "vault-ledger.txt"
SECRET = (
    f"The {MARKER} ledger records that the vault code of the harbour office is 4417 "
    "and that the night guard of the vault is called Ilse Brandvik."
)
PUBLIC = "The harbour office opens at dawn and the ferry to the islands leaves at noon."
QUESTION = "What is the vault code of the harbour office and who guards the vault?"
MISSING_DOC = "doc_" + "0" * 32
MISSING_JOB = "job_" + "0" * 32
MISSING_EVALUATION = "0" * 32
JOB_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class World:
    live: LiveServer
    callers: dict[str, dict[str, str]]  # caller name -> request headers
    secret_id: str
    secret_job: str
    public_id: str
    granted_group: str
    # Evaluation sets: "secret" expects the vault ledger, "public" the harbour note.
    sets: dict[str, str]
    # Evaluation runs: "secret" and "public" by the admin (the public set's run retrieves the
    # ledger too), "key" the public set's run by the admin's key limited to general.
    runs: dict[str, str]


def _login(live: LiveServer, username: str) -> dict[str, str]:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": username, "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def _uploaded(
    live: LiveServer, headers: dict[str, str], name: str, text: str, collection: str
) -> dict[str, Any]:
    response = httpx.post(
        f"{live.url}/documents",
        files={"file": (name, text_document(text))},
        data={"collection": collection},
        headers=headers,
        timeout=60.0,
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = httpx.get(f"{live.url}/jobs/{job_id}", headers=headers).json()
        if job["status"] in ("done", "failed"):
            assert job["status"] == "done", job
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} not done after {JOB_TIMEOUT_S} s")


def _evaluation_set(live: LiveServer, headers: dict[str, str], source: str) -> str:
    item = {"question": QUESTION, "expected": [{"source": source}]}
    made = httpx.post(
        f"{live.url}/evaluations/sets", json={"name": source, "items": [item]}, headers=headers
    )
    assert made.status_code == 201, made.text
    return str(made.json()["set_id"])


def _evaluation_run(live: LiveServer, headers: dict[str, str], set_id: str) -> str:
    started = httpx.post(f"{live.url}/evaluations/runs", json={"set_id": set_id}, headers=headers)
    assert started.status_code == 202, started.text
    run_id = str(started.json()["run_id"])
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        run = httpx.get(f"{live.url}/evaluations/runs/{run_id}", headers=headers).json()
        if run["status"] in ("done", "failed"):
            assert run["status"] == "done", run
            return run_id
        time.sleep(0.2)
    raise AssertionError(f"evaluation run {run_id} not done after {JOB_TIMEOUT_S} s")


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    live = LiveServer(
        tmp_path_factory.mktemp("access-leaks") / "data",
        {
            "RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000",
            "RAG_RATE_LIMIT_QUERY_PER_MINUTE": "1000",
            "RAG_RATE_LIMIT_PAGES_PER_MINUTE": "1000",
            "RAG_RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "1000",
        },
    )
    live.create_user(T, "ada", PASSWORD)  # the tenant's first user: its admin
    live.create_user(T, "mia", PASSWORD, role="member")  # reads the board through a group
    live.create_user(T, "nat", PASSWORD, role="member")
    live.create_user(T, "rex", PASSWORD, role="reader")
    live.create_user(OTHER_T, "tom", PASSWORD)  # admin of another tenant
    live.start()
    try:
        url = live.url
        admin = _login(live, "ada")
        _ok(
            httpx.post(
                f"{url}/collections",
                json={"name": "board", "visibility": "restricted"},
                headers=admin,
            ),
            201,
        )
        secret = _uploaded(live, admin, SECRET_FILE, SECRET, "board")
        public = _uploaded(live, admin, "harbour.txt", PUBLIC, "general")
        mia = _login(live, "mia")
        mia_id = _ok(httpx.get(f"{url}/auth/me", headers=mia))["user_id"]
        group = _ok(httpx.post(f"{url}/groups", json={"name": "vault"}, headers=admin), 201)
        _ok(
            httpx.put(f"{url}/groups/{group['group_id']}/members/{mia_id}", headers=admin),
            204,
        )
        _ok(
            httpx.put(
                f"{url}/collections/board/access",
                json={"grants": [{"group_id": group["group_id"], "permission": "read"}]},
                headers=admin,
            )
        )
        key = _ok(
            httpx.post(
                f"{url}/auth/keys",
                json={"name": "general only", "collections": ["general"]},
                headers=admin,
            ),
            201,
        )
        key_headers = {"Authorization": f"Bearer {key['key']}"}
        sets = {
            "secret": _evaluation_set(live, admin, SECRET_FILE),
            "public": _evaluation_set(live, admin, "harbour.txt"),
        }
        runs = {
            "secret": _evaluation_run(live, admin, sets["secret"]),
            "public": _evaluation_run(live, admin, sets["public"]),
            "key": _evaluation_run(live, key_headers, sets["public"]),
        }
        callers = {
            "admin": admin,
            "granted member": mia,
            "member without grant": _login(live, "nat"),
            "reader without grant": _login(live, "rex"),
            "key of the admin limited to general": key_headers,
            "admin of another tenant": _login(live, "tom"),
        }
        yield World(
            live,
            callers,
            secret["document_id"],
            secret["job_id"],
            public["document_id"],
            group["group_id"],
            sets,
            runs,
        )
    finally:
        live.stop()


SEEING = ("admin", "granted member")
BLIND = (
    "member without grant",
    "reader without grant",
    "key of the admin limited to general",
    "admin of another tenant",
)

Probe = Callable[[World, dict[str, str]], httpx.Response]


def _get(path: str) -> Probe:
    return lambda w, h: httpx.get(w.live.url + path.format(doc=w.secret_id), headers=h)


def _post(path: str, body: dict[str, Any]) -> Probe:
    return lambda w, h: httpx.post(w.live.url + path, json=body, headers=h, timeout=120.0)


def _conversation(stream: bool) -> Probe:
    """A conversation turn about the secret, then the conversation as shown with its history."""

    def probe(w: World, h: dict[str, str]) -> httpx.Response:
        made = _ok(httpx.post(f"{w.live.url}/conversations", json={}, headers=h), 201)
        path = f"{w.live.url}/conversations/{made['conversation_id']}"
        turn = httpx.post(
            f"{path}/messages",
            params={"stream": "true"} if stream else {},
            json={"content": QUESTION},
            headers=h,
            timeout=120.0,
        )
        assert turn.status_code == 200, turn.text
        shown = httpx.get(path, headers=h)
        assert shown.status_code == 200, shown.text
        listed = httpx.get(f"{w.live.url}/conversations", headers=h)
        # One body holding all three, so every one of them is checked for the secret.
        return httpx.Response(200, text=turn.text + shown.text + listed.text)

    return probe


def _chat(model: str, stream: bool = False) -> Probe:
    return _post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": QUESTION}], "stream": stream},
    )


# Routes that list, search or answer: the caller gets a 200 that must hold nothing of the
# secret. Each also runs for those who read it, who must find the secret through it.
REVEALING: dict[str, tuple[Probe, bool]] = {  # name -> (probe, shows the secret to a reader)
    "GET /documents": (_get("/documents"), True),
    "GET /documents by name prefix": (_get("/documents?source_prefix=vault"), True),
    "GET /jobs": (_get("/jobs"), True),
    "POST /search": (_post("/search", {"query": QUESTION}), True),
    "POST /search by document": (_post("/search", {"query": QUESTION, "group": "document"}), True),
    "POST /search in general": (
        _post("/search", {"query": QUESTION, "collections": ["general"]}),
        False,
    ),
    "POST /search filtered on the vault": (
        _post("/search", {"query": QUESTION, "filters": {"source": {"$eq": SECRET_FILE}}}),
        True,
    ),
    "POST /query": (_post("/query", {"question": QUESTION}), True),
    "POST /query/stream": (_post("/query/stream", {"question": QUESTION}), True),
    "conversation turn and history": (_conversation(stream=False), True),
    "conversation turn streamed, and history": (_conversation(stream=True), True),
    "chat model rag": (_chat("rag"), True),
    "chat model rag, streamed": (_chat("rag", stream=True), True),
    "chat model rag:general": (_chat("rag:general"), False),
    "GET /v1/models": (_get("/v1/models"), False),
    "GET /stats": (_get("/stats"), False),
    "GET /collections": (_get("/collections"), False),
    "GET /evaluations/sets": (_get("/evaluations/sets"), True),
    "GET /evaluations/runs": (_get("/evaluations/runs"), False),
}


def _leaks(w: World, text: str) -> list[str]:
    return [s for s in (MARKER, "Brandvik", w.secret_id, SECRET_FILE) if s in text]


@pytest.mark.parametrize("route", list(REVEALING))
def test_a_caller_without_read_never_sees_the_document_where_readers_do(
    world: World, route: str
) -> None:
    probe, shows_it = REVEALING[route]
    for name in SEEING:
        response = probe(world, world.callers[name])
        assert response.status_code == 200, (name, response.text)
        if shows_it:
            assert MARKER in response.text or SECRET_FILE in response.text, (name, response.text)
    for name in BLIND:
        response = probe(world, world.callers[name])
        # A reader may be refused a route by role (jobs are for uploaders): that is no leak.
        assert response.status_code == 200 or (
            name == "reader without grant" and response.status_code == 403
        ), (name, response.text)
        assert _leaks(world, response.text) == [], (name, route, response.text)
        assert '"board"' not in response.text and "rag:board" not in response.text, (
            name,
            response.text,
        )


def _counts(world: World, headers: dict[str, str]) -> tuple[int, int, int]:
    stats = _ok(httpx.get(f"{world.live.url}/stats", headers=headers))
    listed = _ok(httpx.get(f"{world.live.url}/documents", headers=headers))
    return stats["documents"], stats["quotas"]["documents"]["used"], listed["count"]


def test_counts_and_stats_leave_the_document_out(world: World) -> None:
    for name in SEEING:
        assert _counts(world, world.callers[name]) == (2, 2, 2), name
    for name in ("member without grant", "reader without grant"):
        assert _counts(world, world.callers[name]) == (1, 1, 1), name
    assert _counts(world, world.callers["admin of another tenant"]) == (0, 0, 0)
    # Nor does a listing by name count it: its total would spell out file names by prefix.
    for name in BLIND:
        by_name = httpx.get(
            f"{world.live.url}/documents",
            params={"source_prefix": "vault"},
            headers=world.callers[name],
        )
        assert _ok(by_name) == {"data": [], "count": 0}, name
    jobs = _ok(httpx.get(f"{world.live.url}/jobs", headers=world.callers["member without grant"]))
    assert jobs["count"] == 1 and len(jobs["data"]) == 1


# Routes that name the document: a caller who may not read it gets byte for byte what a
# missing document gets, so not even its existence shows.
NAMING: dict[str, Callable[[str], tuple[str, str, dict[str, Any] | None]]] = {
    "GET /documents/{id}": lambda d: ("GET", f"/documents/{d}", None),
    "GET page picture": lambda d: ("GET", f"/documents/{d}/pages/1.png", None),
    "GET page text": lambda d: ("GET", f"/documents/{d}/pages/1/text", None),
    "PATCH /documents/{id}": lambda d: ("PATCH", f"/documents/{d}", {"metadata": {"x": 1}}),
    "DELETE /documents/{id}": lambda d: ("DELETE", f"/documents/{d}", None),
    "search by document_id": lambda d: (
        "POST",
        "/search",
        {"query": QUESTION, "filters": {"document_id": {"$eq": d}}},
    ),
}


def _send(world: World, headers: dict[str, str], call: tuple[str, str, Any]) -> httpx.Response:
    method, path, body = call
    return httpx.request(method, world.live.url + path, json=body, headers=headers, timeout=60.0)


def _comparable(response: httpx.Response, document_id: str) -> bytes:
    """The body with the id asked for masked, and a search's timings (which differ on every
    call) dropped; everything else must match byte for byte."""
    body = response.content.replace(document_id.encode(), b"ID")
    if b'"total_ms"' not in body:
        return body
    data = json.loads(body)
    data.pop("total_ms"), data.pop("timings")
    return json.dumps(data).encode()


@pytest.mark.parametrize("route", list(NAMING))
def test_a_forbidden_document_answers_exactly_like_a_missing_one(world: World, route: str) -> None:
    for name in BLIND:
        headers = world.callers[name]
        theirs = _send(world, headers, NAMING[route](world.secret_id))
        missing = _send(world, headers, NAMING[route](MISSING_DOC))
        assert theirs.status_code == missing.status_code, (name, theirs.text, missing.text)
        assert _comparable(theirs, world.secret_id) == _comparable(missing, MISSING_DOC), (
            name,
            theirs.text,
            missing.text,
        )
        assert MARKER not in theirs.text and SECRET_FILE not in theirs.text
    # Still there, untouched, for those who read it.
    page = httpx.get(
        f"{world.live.url}/documents/{world.secret_id}/pages/1/text",
        headers=world.callers["granted member"],
    )
    assert page.status_code == 200 and MARKER in page.json()["text"]


# Requests that name a collection: a hidden one answers like one that does not exist.
COLLECTION_NAMING: list[Callable[[str], tuple[str, str, dict[str, Any] | None]]] = [
    lambda c: ("POST", "/search", {"query": QUESTION, "collections": [c]}),
    lambda c: ("POST", "/query", {"question": QUESTION, "collections": [c]}),
    lambda c: (
        "POST",
        "/v1/chat/completions",
        {"model": f"rag:{c}", "messages": [{"role": "user", "content": QUESTION}]},
    ),
    lambda c: ("GET", f"/collections/{c}", None),
    lambda c: ("GET", f"/collections/{c}/access", None),
]


def test_a_hidden_job_collection_or_model_answers_like_a_missing_one(world: World) -> None:
    url = world.live.url
    for name in BLIND:
        headers = world.callers[name]
        job = httpx.get(f"{url}/jobs/{world.secret_job}", headers=headers)
        absent_job = httpx.get(f"{url}/jobs/{MISSING_JOB}", headers=headers)
        # 404 each, or the same 403 by role for a reader (jobs and grants are not for readers).
        assert job.status_code == absent_job.status_code
        assert job.content == absent_job.content
        for call in COLLECTION_NAMING:
            hidden = _send(world, headers, call("board"))
            absent = _send(world, headers, call("nothing"))
            assert hidden.status_code == absent.status_code, (name, hidden.text, absent.text)
            assert hidden.status_code in (403, 404), (name, hidden.text)
            assert hidden.text.replace("board", "X") == absent.text.replace("nothing", "X")


# Evaluation sets and runs: a set is seen only by those who read every document it expects,
# a run only by those who read every collection its starter's credential read.
EVALUATION_NAMING: dict[str, Callable[[World, str], tuple[str, str, dict[str, Any] | None]]] = {
    "GET a set": lambda w, s: ("GET", f"/evaluations/sets/{s}", None),
    "DELETE a set": lambda w, s: ("DELETE", f"/evaluations/sets/{s}", None),
    "run a set": lambda w, s: ("POST", "/evaluations/runs", {"set_id": s}),
    "GET a run": lambda w, r: ("GET", f"/evaluations/runs/{r}", None),
    "compare a run": lambda w, r: (
        "GET",
        f"/evaluations/runs/{w.runs['key']}/compare?before={r}",
        None,
    ),
    "compare with a run": lambda w, r: (
        "GET",
        f"/evaluations/runs/{r}/compare?before={w.runs['key']}",
        None,
    ),
}


def _hidden_evaluations(world: World, route: str) -> list[str]:
    if route.endswith("set"):
        return [world.sets["secret"]]
    return [world.runs["secret"], world.runs["public"]]


@pytest.mark.parametrize("route", list(EVALUATION_NAMING))
def test_a_hidden_evaluation_set_or_run_answers_like_a_missing_one(
    world: World, route: str
) -> None:
    call = EVALUATION_NAMING[route]
    for name in BLIND:
        headers = world.callers[name]
        missing = _send(world, headers, call(world, MISSING_EVALUATION))
        for hidden_id in _hidden_evaluations(world, route):
            theirs = _send(world, headers, call(world, hidden_id))
            assert theirs.status_code == missing.status_code, (name, theirs.text, missing.text)
            assert theirs.status_code in (403, 404), (name, theirs.text)
            assert theirs.text.replace(hidden_id, "X") == missing.text.replace(
                MISSING_EVALUATION, "X"
            )
    assert (
        httpx.get(  # the set was not deleted by any of them
            f"{world.live.url}/evaluations/sets/{world.sets['secret']}",
            headers=world.callers["admin"],
        ).status_code
        == 200
    )


def test_evaluation_runs_show_the_document_to_its_readers_only(world: World) -> None:
    url = world.live.url
    for name in SEEING:
        headers = world.callers[name]
        for which in ("secret", "public"):
            run = _ok(httpx.get(f"{url}/evaluations/runs/{world.runs[which]}", headers=headers))
            assert SECRET_FILE in json.dumps(run["results"]), (name, which, run)
        listed = _ok(httpx.get(f"{url}/evaluations/runs", headers=headers))
        assert listed["count"] == 3 and len(listed["data"]) == 3, (name, listed)
        sets = _ok(httpx.get(f"{url}/evaluations/sets", headers=headers))
        assert sets["count"] == 2, (name, sets)
    # The key limited to general started its run within general: the ledger was never searched,
    # so everyone of the tenant who reads general sees that run, and nothing of the ledger in it.
    for name in (
        "admin",
        "granted member",
        "member without grant",
        "key of the admin limited to general",
    ):
        headers = world.callers[name]
        run = _ok(httpx.get(f"{url}/evaluations/runs/{world.runs['key']}", headers=headers))
        assert run["status"] == "done" and run["results"][0]["retrieved"], (name, run)
        if name in SEEING:
            continue
        assert _leaks(world, json.dumps(run)) == [], (name, run)
        listed = _ok(httpx.get(f"{url}/evaluations/runs", headers=headers))
        assert [r["run_id"] for r in listed["data"]] == [world.runs["key"]], (name, listed)
        assert listed["count"] == 1
        sets = _ok(httpx.get(f"{url}/evaluations/sets", headers=headers))
        assert [s["set_id"] for s in sets["data"]] == [world.sets["public"]], (name, sets)
        assert sets["count"] == 1
    key_run = _ok(
        httpx.get(f"{url}/evaluations/runs/{world.runs['key']}", headers=world.callers["admin"])
    )
    assert SECRET_FILE not in json.dumps(key_run["results"]), key_run
    assert key_run["documents"] == 1  # its corpus snapshot holds only what it could read


def test_the_feedback_list_shows_an_admins_key_only_the_documents_it_reads(world: World) -> None:
    url = world.live.url
    admin = world.callers["admin"]
    asked = _ok(httpx.post(f"{url}/query", json={"question": QUESTION}, headers=admin, timeout=120))
    assert SECRET_FILE in json.dumps(asked["citations"]), asked
    rated = httpx.post(
        f"{url}/answers/{asked['answer_id']}/feedback",
        json={"rating": "down", "expected": [{"source": SECRET_FILE, "page": 1}]},
        headers=admin,
    )
    assert rated.status_code == 200, rated.text
    for export in (False, True):
        params = {"format": "jsonl"} if export else {}
        shown = httpx.get(f"{url}/feedback", params=params, headers=admin)
        assert shown.status_code == 200 and SECRET_FILE in shown.text, shown.text
        limited = httpx.get(
            f"{url}/feedback",
            params=params,
            headers=world.callers["key of the admin limited to general"],
        )
        assert limited.status_code == 200, limited.text
        assert asked["answer_id"] in limited.text  # the rating itself is the tenant's
        assert _leaks(world, limited.text) == [], limited.text


def test_ones_own_rating_shows_only_the_documents_one_reads_now(world: World) -> None:
    """A rating is shown with its answer's citations and its expected pages; before, the
    person's own view of it (rating, rating again, reading it back) showed them whole, so the
    admin's key limited to general read the vault ledger's name and id there."""
    url = world.live.url
    admin = world.callers["admin"]
    key = world.callers["key of the admin limited to general"]
    asked = _ok(httpx.post(f"{url}/query", json={"question": QUESTION}, headers=admin, timeout=120))
    path = f"{url}/answers/{asked['answer_id']}/feedback"
    expected = [{"source": SECRET_FILE, "page": 1}]
    rated = httpx.post(path, json={"rating": "down", "expected": expected}, headers=admin)
    assert rated.status_code == 200 and SECRET_FILE in rated.text, rated.text
    shown = httpx.get(path, headers=admin)
    assert shown.status_code == 200 and world.secret_id in shown.text, shown.text

    read_back = httpx.get(path, headers=key)
    assert read_back.status_code == 200, read_back.text
    again = httpx.post(path, json={"rating": "up", "comment": "fine after all"}, headers=key)
    assert again.status_code == 200, again.text
    for response in (read_back, again):
        assert _leaks(world, response.text) == [], response.text
        assert response.json()["answer_id"] == asked["answer_id"]  # the rating itself is shown


def test_the_audit_log_is_not_read_with_a_key_limited_to_some_collections(world: World) -> None:
    """The audit log names the documents uploaded to every collection and the collections made
    (the board's own upload and creation here); before, the admin's key limited to general read
    it whole, file name of the vault ledger included."""
    url = world.live.url
    for action in ("document.uploaded", "collection.created"):
        params = {"action": action, "limit": 100}
        whole = httpx.get(f"{url}/audit", params=params, headers=world.callers["admin"])
        assert whole.status_code == 200 and (SECRET_FILE in whole.text or "board" in whole.text)
        limited = httpx.get(
            f"{url}/audit",
            params=params,
            headers=world.callers["key of the admin limited to general"],
        )
        assert limited.status_code == 403, limited.text
        assert limited.json()["error"]["code"] == "api_key_not_allowed"
        assert _leaks(world, limited.text) == [] and "board" not in limited.text


def test_a_revoked_grant_counts_at_once_and_its_cached_answer_stays_behind(
    world: World,
) -> None:
    url = world.live.url
    admin, mia = world.callers["admin"], world.callers["granted member"]
    nat = world.callers["member without grant"]
    question = "Who is the night guard of the vault at the harbour office?"
    asked = _ok(httpx.post(f"{url}/query", json={"question": question}, headers=mia, timeout=120))
    assert MARKER in json.dumps(asked) or SECRET_FILE in json.dumps(asked)
    again = _ok(httpx.post(f"{url}/query", json={"question": question}, headers=mia, timeout=120))
    assert again["cache"] == "hit"
    conversation = _ok(httpx.post(f"{url}/conversations", json={}, headers=mia), 201)
    path = f"{url}/conversations/{conversation['conversation_id']}"
    _ok(httpx.post(f"{path}/messages", json={"content": question}, headers=mia, timeout=120))

    revoked = httpx.put(f"{url}/collections/board/access", json={"grants": []}, headers=admin)
    assert revoked.status_code == 200, revoked.text
    try:
        after = _ok(
            httpx.post(f"{url}/query", json={"question": question}, headers=mia, timeout=120)
        )
        # Nothing was cached for what mia reads now, so the answer of her wider scope stays
        # behind; the new answer is the one of her narrower scope, and nat (who has always
        # read just that) gets it from the cache.
        assert after["cache"] == "miss" and _leaks(world, json.dumps(after)) == []
        theirs = _ok(
            httpx.post(f"{url}/query", json={"question": question}, headers=nat, timeout=120)
        )
        assert theirs["cache"] == "hit" and _leaks(world, json.dumps(theirs)) == []
        hits = _ok(httpx.post(f"{url}/search", json={"query": question}, headers=mia))
        assert _leaks(world, json.dumps(hits)) == []
        page = httpx.get(f"{url}/documents/{world.secret_id}/pages/1/text", headers=mia)
        missing = httpx.get(f"{url}/documents/{MISSING_DOC}/pages/1/text", headers=mia)
        assert page.status_code == 404
        assert page.text.replace(world.secret_id, "ID") == missing.text.replace(MISSING_DOC, "ID")
        assert _counts(world, mia) == (1, 1, 1)
        # The admin's runs read the board: they are no longer mia's to see, nor the set that
        # expects the ledger.
        for which in ("secret", "public"):
            gone = httpx.get(f"{url}/evaluations/runs/{world.runs[which]}", headers=mia)
            assert gone.status_code == 404, gone.text
        gone = httpx.get(f"{url}/evaluations/sets/{world.sets['secret']}", headers=mia)
        assert gone.status_code == 404, gone.text
        # History is re-checked when shown: the old turn no longer cites the document.
        shown = _ok(httpx.get(path, headers=mia))
        cited = [c for m in shown["history"] for c in (m.get("citations") or [])]
        assert all(c.get("document_id") != world.secret_id for c in cited), cited
        assert all(c.get("source") != SECRET_FILE for c in cited), cited
        assert _leaks(world, json.dumps(shown)) == [], shown
        answers = [m for m in shown["history"] if m["role"] == "assistant"]
        assert answers and "withheld" in answers[0]["content"]
        # A follow-up in that conversation answers from what mia reads now.
        follow = _ok(
            httpx.post(f"{path}/messages", json={"content": question}, headers=mia, timeout=120)
        )
        assert _leaks(world, json.dumps(follow)) == []
    finally:
        restored = httpx.put(
            f"{url}/collections/board/access",
            json={"grants": [{"group_id": world.granted_group, "permission": "read"}]},
            headers=admin,
        )
        assert restored.status_code == 200, restored.text


def _wait_done(world: World, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = _ok(httpx.get(f"{world.live.url}/jobs/{job_id}?wait=5", headers=headers, timeout=30))
        if job["status"] in ("done", "failed"):
            return dict(job)
    raise AssertionError(f"job {job_id} not done after {JOB_TIMEOUT_S} s")


def test_the_name_of_a_hidden_document_is_no_oracle_and_is_never_replaced(world: World) -> None:
    """Uploading a file of the hidden document's name answers exactly as a fresh name does and
    makes another document: the hidden one is neither revealed, replaced, nor moved."""
    url = world.live.url
    for name in ("member without grant", "key of the admin limited to general"):
        headers = world.callers[name]
        made = []
        for filename in (SECRET_FILE, "fresh-name.txt"):
            response = httpx.post(
                f"{url}/documents",
                files={"file": (filename, text_document("A harmless note on the weather."))},
                data={"collection": "general"},
                headers=headers,
                timeout=60.0,
            )
            assert response.status_code == 202, (name, response.text)
            made.append(response.json())
        ours, fresh = made
        assert ours["document_id"] != world.secret_id
        assert set(ours) == set(fresh) and ours["status"] == fresh["status"]
        try:
            for accepted in made:
                assert _wait_done(world, headers, accepted["job_id"])["status"] == "done"
            shown = _ok(httpx.get(f"{url}/documents/{ours['document_id']}", headers=headers))
            assert shown["collection"] == "general" and shown["source"] == SECRET_FILE
            assert world.secret_id not in json.dumps(shown) and MARKER not in json.dumps(shown)
        finally:
            for accepted in made:
                gone = httpx.delete(f"{url}/documents/{accepted['document_id']}", headers=headers)
                assert gone.status_code == 204, gone.text
    # The hidden document is as it was, where it was.
    mia = world.callers["granted member"]
    page = _ok(httpx.get(f"{url}/documents/{world.secret_id}/pages/1/text", headers=mia))
    assert MARKER in page["text"]
    assert (
        _ok(httpx.get(f"{url}/documents/{world.secret_id}", headers=mia))["collection"] == "board"
    )


def test_a_hidden_collection_s_deletion_job_shows_only_to_who_reads_it(world: World) -> None:
    url = world.live.url
    admin = world.callers["admin"]
    _ok(
        httpx.post(
            f"{url}/collections", json={"name": "sealed", "visibility": "restricted"}, headers=admin
        ),
        201,
    )
    _uploaded(world.live, admin, "sealed-note.txt", f"The {MARKER} seal is kept here.", "sealed")
    going = _ok(httpx.delete(f"{url}/collections/sealed?documents=delete", headers=admin), 202)
    job_id = going["job_id"]
    for name in BLIND:
        headers = world.callers[name]
        theirs = httpx.get(f"{url}/jobs/{job_id}", headers=headers)
        missing = httpx.get(f"{url}/jobs/{MISSING_JOB}", headers=headers)
        assert theirs.status_code == missing.status_code, (name, theirs.text)
        assert theirs.content == missing.content, name
        listed = httpx.get(f"{url}/jobs", headers=headers)
        assert job_id not in listed.text and "sealed" not in listed.text, (name, listed.text)
    job = _wait_done(world, admin, job_id)
    assert job["status"] == "done" and job["kind"] == "collection_delete", job
    assert httpx.get(f"{url}/collections/sealed", headers=admin).status_code == 404
    for name in BLIND:  # nor once it is over
        theirs = httpx.get(f"{url}/jobs/{job_id}", headers=world.callers[name])
        missing = httpx.get(f"{url}/jobs/{MISSING_JOB}", headers=world.callers[name])
        assert theirs.content == missing.content, name
