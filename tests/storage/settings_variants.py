"""Settings that differ from the base ones in one field, set through its `RAG_*` variable."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest

from app.config import ENV_PREFIX, Settings, load_settings
from app.errors import ConfigurationError


def _candidates(value: object, annotation: object) -> list[object]:
    """Values of the field's type that differ from `value`, most ordinary first."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return [choice for choice in args if choice != value]
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return [c for option in options for c in _candidates(value, option)]
    if annotation is bool:
        return [not value]
    if annotation is int:
        return [int(value) + 1 if isinstance(value, int) else 1]
    if annotation is float:
        base = float(value) if isinstance(value, int | float) else 0.0
        return [round(base + 0.01, 6), 0.5]
    if annotation is Path:
        return [Path(str(value)) / "other" if value is not None else Path("/tmp/other.gguf")]
    if annotation is str:
        return [f"{value or ''}x", "/other", "10.0.0.0/8"]
    raise AssertionError(f"no variant for a field of type {annotation!r}")


def settings_with_one_change(monkeypatch: pytest.MonkeyPatch, name: str) -> Settings:
    """Valid Settings read from the environment, equal to the base ones except for `name`."""
    default = getattr(load_settings(_env_file=None), name)
    candidates = _candidates(default, Settings.model_fields[name].annotation)
    for candidate in candidates:
        monkeypatch.setenv(f"{ENV_PREFIX}{name.upper()}", str(candidate))
        try:
            changed = load_settings(_env_file=None)
        except ConfigurationError:
            continue  # e.g. a value another setting rules out; try the next one
        finally:
            monkeypatch.delenv(f"{ENV_PREFIX}{name.upper()}")
        assert getattr(changed, name) != default, name
        return changed
    raise AssertionError(f"no valid value of {ENV_PREFIX}{name.upper()} besides the default")
