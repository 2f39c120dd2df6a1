"""Provider builders by name: one registry per setting that selects a provider.

The embedding and LLM factories each keep one. A name registered later (tests add their fakes)
is also added to the set `app.config.Settings` validates that setting against, so settings
accept exactly the names a factory can build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from app.errors import ConfigurationError

Builder = TypeVar("Builder", bound=Callable[..., object])


class ProviderRegistry(Generic[Builder]):
    """The builders the setting `variable` (e.g. RAG_LLM_PROVIDER) can select, by name."""

    def __init__(self, variable: str, accepted: set[str], builders: Mapping[str, Builder]) -> None:
        self._variable = variable
        self._accepted = accepted  # the set Settings checks `variable` against
        self._builders = dict(builders)

    def register(self, name: str, builder: Builder) -> None:
        """Make `builder` the provider `name` selects, and `name` a value Settings accepts."""
        self._builders[name] = builder
        self._accepted.add(name)

    def names(self) -> list[str]:
        """The provider names that can be built, sorted."""
        return sorted(self._builders)

    def builder(self, name: str) -> Builder:
        """The builder of provider `name`; ConfigurationError naming the choices if unknown."""
        found = self._builders.get(name)
        if found is None:
            raise ConfigurationError(
                f"{self._variable}: unknown provider {name!r}; "
                f"expected one of {', '.join(self.names())}"
            )
        return found
