"""Backends (where benchmarks run), registered by name."""
from __future__ import annotations

from ..registry import Registry, import_plugins
from .base import Backend, Launch, LaunchResult

BACKENDS: Registry[type] = Registry("backend")

import_plugins(__name__, __path__)  # each module registers itself


def trait(name: str | None, what: str) -> bool:
    """Backend `name`'s trait `what` (Backend.simulated, ...); False for a name no backend
    has (a table's provenance from another version, or none)."""
    return name in BACKENDS.names() and bool(getattr(BACKENDS.get(name), what))


__all__ = ["Backend", "Launch", "LaunchResult", "BACKENDS", "trait"]
