"""Provider builders by name: one registry per setting that selects a provider.

The embedding and LLM factories each build one, once, when their module is imported. It cannot
change afterwards, and it must hold a builder for exactly the names the setting's `Literal`
accepts, so Settings and the factory agree on what a deployment can name. Tests and benchmarks
hand their own provider objects to the container (`ProviderOverrides`) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from app.errors import ConfigurationError

Builder = TypeVar("Builder", bound=Callable[..., object])


class ProviderRegistry(Generic[Builder]):
    """The builders the setting `variable` (e.g. RAG_LLM_PROVIDER) can select, by name."""

    def __init__(
        self, variable: str, accepted: frozenset[str], builders: Mapping[str, Builder]
    ) -> None:
        if set(builders) != accepted:
            raise ValueError(
                f"{variable}: builders for {sorted(builders)}, settings accept {sorted(accepted)}"
            )
        self._variable = variable
        self._builders: Mapping[str, Builder] = MappingProxyType(dict(builders))

    def names(self) -> list[str]:
        """The provider names that can be built, sorted."""
        return sorted(self._builders)

    def builder(self, name: str) -> Builder:
        """The builder of provider `name`; ConfigurationError naming the choices if unknown
        (Settings refuses such a name first; a copy made without validation does not)."""
        found = self._builders.get(name)
        if found is None:
            raise ConfigurationError(
                f"{self._variable}: unknown provider {name!r}; "
                f"expected one of {', '.join(self.names())}"
            )
        return found
