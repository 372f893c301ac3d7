"""Autotuners, registered by name. All produce a DecisionTable."""
from __future__ import annotations

from ..registry import Registry
from .base import Tuner, TuningSpace

TUNERS: Registry[type] = Registry("tuning strategy")

from . import exhaustive  # noqa: E402,F401  (registers itself)

__all__ = ["TUNERS", "Tuner", "TuningSpace"]
