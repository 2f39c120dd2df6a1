"""Ids are passed by name to the services: a call cannot swap a tenant for a user, or a document
for a collection, without it showing. Every public function and method in app/services (and the
retrieval protocols the corpus implements) takes its `*_id`, `*_ids` and `tenant` parameters as
keyword-only; a function whose id is its only parameter may take it positionally."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

import app.services
from app.retrieval import corpus_reader, extra_dense

pytestmark = pytest.mark.unit

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _is_id(name: str) -> bool:
    return name.endswith(("_id", "_ids")) or name == "tenant"


def _modules() -> Iterator[ModuleType]:
    yield corpus_reader
    yield extra_dense
    for found in pkgutil.walk_packages(app.services.__path__, "app.services."):
        yield importlib.import_module(found.name)


def _public_callables(module: ModuleType) -> Iterator[tuple[str, Callable[..., object]]]:
    """The module's own public functions, and the public methods of its public classes."""
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield f"{module.__name__}.{name}", value
        elif inspect.isclass(value):
            for method_name, method in vars(value).items():
                if isinstance(method, (staticmethod, classmethod)):
                    method = method.__func__
                if not method_name.startswith("_") and inspect.isfunction(method):
                    yield f"{module.__name__}.{name}.{method_name}", method


def positional_ids(function: Callable[..., object]) -> list[str]:
    """The id parameters the function takes positionally (none when its id is its only one)."""
    parameters = [
        p for p in inspect.signature(function).parameters.values() if p.name not in ("self", "cls")
    ]
    if len(parameters) <= 1:
        return []
    return [p.name for p in parameters if p.kind in POSITIONAL and _is_id(p.name)]


def test_service_functions_take_ids_by_keyword() -> None:
    offenders = {
        name: found
        for module in _modules()
        for name, function in _public_callables(module)
        if (found := positional_ids(function))
    }
    assert offenders == {}, "make these id parameters keyword-only (`*,` before them)"


def test_the_check_sees_a_positional_id_and_spares_a_lone_one() -> None:
    def share(tenant_id: str, user_id: str) -> None: ...

    def share_by_name(tenant_id: str, *, user_id: str) -> None: ...

    def validate(tenant_id: str) -> None: ...

    assert positional_ids(share) == ["tenant_id", "user_id"]
    assert positional_ids(share_by_name) == ["tenant_id"]
    assert positional_ids(validate) == []
