"""Where `colltune run` launches an application: one small runner per backend
(sim, local, netns, slurm), registered by the backend's name. A new backend is a
new module here; `colltune run` itself never compares backend names."""
from __future__ import annotations

from ..registry import Registry, import_plugins
from .base import Runner

RUNNERS: Registry[type] = Registry("colltune run backend")

import_plugins(__name__, __path__)  # each module registers itself

__all__ = ["RUNNERS", "Runner"]
