"""Each dependency alias of the API names the type its provider returns: the type checker holds
each provider to its own return type, and this holds each alias to that type, so a route that
takes `Users` gets a UserService and not whatever a provider happens to hand over."""

from __future__ import annotations

from typing import Annotated, get_args, get_origin, get_type_hints

import pytest
from fastapi import params

from app.api import deps

pytestmark = pytest.mark.unit


def test_every_dependency_alias_names_what_its_provider_returns() -> None:
    checked = []
    for name, alias in vars(deps).items():
        if get_origin(alias) is not Annotated:
            continue
        named, *metadata = get_args(alias)
        for provider in (m.dependency for m in metadata if isinstance(m, params.Depends)):
            assert provider is not None, name
            assert get_type_hints(provider)["return"] == named, name
            checked.append(name)
    assert len(checked) >= 40  # every alias of a collaborator, the caller and its access
