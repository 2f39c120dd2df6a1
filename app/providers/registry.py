"""Provider builders by name: one registry per setting that selects a provider.

The embedding and LLM factories each keep one. A name added for the length of a `with` block
(tests add their fakes so) is also accepted by `app.config.Settings` inside that block only, so
settings accept exactly the names a factory can build, and a deployment never a test's fake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar

from app.errors import ConfigurationError

Builder = TypeVar("Builder", bound=Callable[..., object])


class ProviderRegistry(Generic[Builder]):
    """The builders the setting `variable` (e.g. RAG_LLM_PROVIDER) can select, by name."""

    def __init__(self, variable: str, accepted: set[str], builders: Mapping[str, Builder]) -> None:
        self._variable = variable
        self._accepted = accepted  # the set Settings checks `variable` against
        self._builders = dict(builders)

    @contextmanager
    def extended(self, name: str, builder: Builder) -> Iterator[None]:
        """Inside the block, `name` selects `builder` and is a value Settings accepts."""
        if name in self._builders:
            raise ValueError(f"{self._variable}: provider {name!r} exists already")
        self._builders[name] = builder
        self._accepted.add(name)
        try:
            yield
        finally:
            del self._builders[name]
            self._accepted.discard(name)

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
