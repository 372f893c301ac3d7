"""Autotuners, registered by name. All produce a DecisionTable."""
from __future__ import annotations

from ..registry import Registry, import_plugins
from .base import Tuner, TuningSpace

TUNERS: Registry[type] = Registry("tuning strategy")

import_plugins(__name__, __path__)  # each module registers itself

__all__ = ["TUNERS", "Tuner", "TuningSpace"]
