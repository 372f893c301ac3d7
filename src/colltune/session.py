"""Shared plumbing of the commands: settings, store, backend, provider."""
from __future__ import annotations

import datetime as _dt
import os

from . import config
from .backends import BACKENDS
from .store import Store


class Session:
    def __init__(self, cli_values: dict, config_file: str | None = None):
        self.settings = config.load(cli_values, config_file=config_file)
        self._backend = None

    @property
    def store(self) -> Store:
        return Store(self.settings.store)

    def existing_store(self) -> Store:
        """The store of a command that only reads it: it must exist."""
        return Store(self.settings.store, readonly=True)

    def backend(self, platform: str | None = None):
        if self._backend is None:
            cls = BACKENDS.get(self.settings.backend)
            self._backend = cls(self.settings, platform)
            self._backend.prepare()
        return self._backend

    def output_path(self, name: str) -> str:
        os.makedirs(self.settings.output_dir, exist_ok=True)
        return os.path.join(self.settings.output_dir, name)


def new_campaign_name(prefix: str) -> str:
    return f"{prefix}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
