"""Backends (where benchmarks run), registered by name."""
from __future__ import annotations

from ..registry import Registry
from .base import Backend, Launch, LaunchResult

BACKENDS: Registry[type] = Registry("backend")

from . import sim  # noqa: E402,F401  (registers itself)
from . import local  # noqa: E402,F401  (registers itself)

__all__ = ["Backend", "Launch", "LaunchResult", "BACKENDS"]
