"""Algorithm providers: who implements which collective algorithms, how to force
one in a benchmark launch, and what each is called in that library's files."""
from __future__ import annotations

from ..registry import Registry, import_plugins
from .base import Algorithm, LaunchMods, Provider

PROVIDERS: Registry[type] = Registry("algorithm provider")

import_plugins(__name__, __path__)  # each module registers itself

__all__ = ["Algorithm", "LaunchMods", "Provider", "PROVIDERS"]
