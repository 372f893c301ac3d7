"""Exporters: write a decision table in a library's own dialect, registered by
name (`colltune export --format NAME`). Each module registers itself."""
from __future__ import annotations

from ..registry import Registry, import_plugins

EXPORTERS: Registry[type] = Registry("export format")

import_plugins(__name__, __path__)  # noqa: E402

__all__ = ["EXPORTERS"]
