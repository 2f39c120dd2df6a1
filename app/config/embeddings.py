"""The settings of which embedder turns passages and questions into vectors, and the OpenAI-
compatible and Ollama servers a provider may name.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel

from app.config.fields import setting

# The embedders a deployment can name; app/providers/embeddings.py builds exactly these.
EmbeddingProvider = Literal["use", "e5", "huggingface", "openai", "ollama"]
EMBEDDING_PROVIDERS: frozenset[str] = frozenset(get_args(EmbeddingProvider))
# A second dense arm beside the configured embedder's (app/services/blocks/second_arm.py).
SecondEmbedding = Literal["none", "e5"]
# An English-only model for the dense arm of English text (app/retrieval/extra_dense.py).
EnglishEmbedding = Literal["none", "minilm"]


class EmbeddingSettings(BaseModel):
    """Which embedder turns passages and questions into vectors, and the OpenAI-compatible and
    Ollama servers a provider may name."""

    embedding_provider: EmbeddingProvider = setting(
        "use",
        group="embeddings",
        description="use (USE-multilingual, ships in a package) | e5 (multilingual-e5-small, "
        "ships) | huggingface (sentence-transformers name or local path) | openai | ollama.",
    )
    embedding_model: str = setting(
        "",
        group="embeddings",
        description="Model name for huggingface / openai / ollama (required for openai and "
        "ollama).",
    )
    embedding_query_prefix: str = setting(
        "",
        group="embeddings",
        description='Prefix for e5-style models on the huggingface provider, e.g. "query: ".',
    )
    embedding_passage_prefix: str = setting(
        "",
        group="embeddings",
        description='Prefix for e5-style models on the huggingface provider, e.g. "passage: ".',
    )
    use_question_centring: bool = setting(
        False,
        group="embeddings",
        description="use provider only: subtract 0.75 x the mean XQuAD question from each "
        "question vector. Gains on Wikipedia-like text, loses on hadith and Qur'an "
        "(docs/evaluation.md), so opt-in; no reindex either way.",
    )
    second_embedding: SecondEmbedding = setting(
        "none",
        group="embeddings",
        description="none | e5: a second dense arm (multilingual-e5-small, ships) fused with "
        "the first by RRF. Wins on XQuAD ar->en and en->ar and on ARCD, loses on hadith and "
        "Qur'an ar->en, embeds passages ~50x and questions ~12x slower than USE "
        "(docs/evaluation.md), so opt-in. A tenant indexed without it is searched without it "
        "until `python -m app.cli reindex --tenant T`.",
    )
    english_embedding: EnglishEmbedding = setting(
        "none",
        group="embeddings",
        description="none | minilm: English documents are also embedded by all-MiniLM-L6-v2 "
        "(English only, ships), and an English question's dense arm ranks them by it (other "
        "documents still by the first embedder); Arabic and other questions are unchanged. "
        "A tenant indexed without it is searched without it until `python -m app.cli reindex "
        "--tenant T` (docs/evaluation.md).",
    )
    embedding_batch_size: int = setting(
        32, group="embeddings", unit="texts", description="Texts embedded per call.", gt=0
    )
    embedding_threads: int = setting(
        1,
        group="embeddings",
        unit="threads",
        description="BLAS threads per embedding call: 1 keeps concurrent queries fast (measured "
        "in bench/README.md).",
        gt=0,
    )
    embedding_child_process: bool = setting(
        True,
        group="embeddings",
        description="Local models (use, e5) embed passages (uploads, reindex) in a child process "
        "with its own GIL, so an upload's embedding and the requests this process serves do not "
        "slow each other down; questions are embedded in process. Costs the child's memory "
        "(measured in bench/README.md).",
    )
    openai_base_url: str | None = setting(
        None, group="servers", description="Base URL of an OpenAI-compatible server."
    )
    openai_api_key: str | None = setting(
        None,
        group="servers",
        description="API key of that server (any non-empty text if it has none).",
        repr=False,
    )
    ollama_base_url: str = setting(
        "http://127.0.0.1:11434", group="servers", description="Base URL of an Ollama server."
    )
