"""A tiny name -> class registry, one per extensible family (benchmarks, scorers, protocols, ...).

Modules in a family's package (and its subpackages) register themselves with a decorator; the package
discovers its own modules on first use, so adding a benchmark, scorer or engine is adding one file. A third-party
package extends a family without forking through an entry point in the family's group
(``spotdiff.scorers``, ``spotdiff.benchmarks``, ...): the entry point names a module that registers
itself with the decorator on import, or an object registered under the entry point's name. A family
may name what it registers (``on_register``): a benchmark's, protocol's or engine's name is written only in
its decorator.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Generic, TypeVar

from spotdiff.errors import ConfigError

T = TypeVar("T")


def name_class(name: str, cls: type) -> None:
    """The ``on_register`` of a family of classes: the registry name becomes the class's ``name``."""
    cls.name = name  # type: ignore[attr-defined]


class Registry(Generic[T]):
    """Maps names to registered objects of one family, importing the family's modules lazily.

    Args:
        family: what the objects are, in messages ("benchmark").
        package: the package whose modules register themselves.
        entry_points: the entry point group of third-party plugins.
        on_register: called with ``(name, object)`` when an object is registered (e.g. to set its name).
    """

    def __init__(
        self,
        family: str,
        package: str,
        entry_points: str | None = None,
        on_register: Callable[[str, T], None] | None = None,
    ) -> None:
        self.family = family
        self.package = package
        self.entry_points = entry_points
        self.on_register = on_register
        self._items: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """A decorator registering its object under ``name``; a name registered to another object is refused
        unless ``replace`` (a benchmark declared in a file that changed since it was read)."""

        def decorator(obj: T) -> T:
            if name in self._items and self._items[name] is not obj and not replace:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._add(name, obj)
            return obj

        return decorator

    def _add(self, name: str, obj: T) -> None:
        if self.on_register is not None:
            self.on_register(name, obj)
        self._items[name] = obj

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        pkg = importlib.import_module(self.package)
        # subpackages too (a family may group its modules, as synth's engines are); walk_packages imports
        # each package to look inside it, and the modules are imported here
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{self.package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                importlib.import_module(info.name)
        if self.entry_points:
            for ep in importlib.metadata.entry_points(group=self.entry_points):
                try:
                    obj = ep.load()
                except Exception as exc:
                    raise ConfigError(
                        f"cannot load {self.family} plugin {ep.name!r} ({ep.value}, entry point group "
                        f"{self.entry_points}): {type(exc).__name__}: {exc}"
                    ) from exc
                if not isinstance(obj, ModuleType) and ep.name not in self._items:
                    self._add(ep.name, obj)

    def get(self, name: str) -> T:
        self._discover()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items))
            raise ConfigError(f"unknown {self.family} {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        self._discover()
        return sorted(self._items.items())

    def __contains__(self, name: str) -> bool:
        self._discover()
        return name in self._items
