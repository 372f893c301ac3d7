"""CLI subcommands that live in their own module.

A module here defines `add_parser(sub)`: it adds its subparser(s) and sets
`handler=<callable(args, cli_settings) -> int>` with `set_defaults`. cli.py
discovers the modules, so a new command is a new file."""
from __future__ import annotations

import importlib
import pkgutil


def modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{__name__}.{info.name}")
