"""Tiny plugin registries (backends, providers, tuners, exporters).

A plugin registers itself by name at import; looking one up by an unknown name
raises an error that lists what exists. Optional dependencies of a plugin are
imported by the plugin when it is *used*, so a missing one only matters then.
"""
from __future__ import annotations

from typing import Callable, Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj
        return deco

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; available: "
                              f"{', '.join(sorted(self._items))}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())


def import_plugins(package: str, path: list[str], skip: tuple[str, ...] = ("base",)) -> None:
    """Import every module of a plugin package so that each registers itself.

    New plugins are new files; no central list to edit."""
    import importlib
    import pkgutil
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name not in skip and not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")
