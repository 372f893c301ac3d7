"""Algorithm providers: who implements which collective algorithms, how to force
one in a benchmark launch, and what each is called in that library's files."""
from __future__ import annotations

from ..registry import Registry
from .base import Algorithm, LaunchMods, Provider

PROVIDERS: Registry[type] = Registry("algorithm provider")

from . import smpi  # noqa: E402,F401  (registers itself)
from . import mpich, openmpi  # noqa: E402,F401  (register themselves)

__all__ = ["Algorithm", "LaunchMods", "Provider", "PROVIDERS"]
