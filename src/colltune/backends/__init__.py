"""Backends (where benchmarks run), registered by name."""
from __future__ import annotations

from ..registry import Registry, import_plugins
from .base import Backend, Launch, LaunchResult

BACKENDS: Registry[type] = Registry("backend")

import_plugins(__name__, __path__)  # each module registers itself

__all__ = ["Backend", "Launch", "LaunchResult", "BACKENDS"]
