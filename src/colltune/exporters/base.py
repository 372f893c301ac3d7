"""The exporter interface: a decision table -> one file in a library's dialect.

An exporter is a registered class (EXPORTERS) with a name, the library it feeds
and `export(table, target)`. `target` is the library version the file is for
(dialects differ between releases); None means the newest the exporter knows,
and the result names the version it resolved to (Exported.target), which the
file header and `export` print: "latest" would mean another release with the
next colltune. The result carries the file text plus what the user must set for
the library to read it (environment / MCA parameters), so `export` and `verify`
print and use the same instructions."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from .. import __version__
from ..decision import DecisionTable


@dataclass(frozen=True)
class Exported:
    text: str
    suffix: str                                   # e.g. ".rules", ".json"
    # environment the application must run with, {VAR: value}; the token
    # {path} stands for wherever the file is written
    env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()                   # caveats the user should read
    # the library version the file is for (--target, or the default it resolved
    # to); None where no library version applies (colltune's own format)
    target: str | None = None

    def env_for(self, path: str) -> dict[str, str]:
        return {k: v.replace("{path}", path) for k, v in self.env.items()}


class Exporter:
    name = "?"
    library = "?"          # which library reads the file: openmpi, mpich, colltune
    deploys = False        # the library's file that `colltune deploy` writes (one per library)
    description = ""

    def export(self, table: DecisionTable, target: str | None = None) -> Exported:
        raise NotImplementedError


def header_lines(table: DecisionTable, target: str | None, fmt: str) -> list[str]:
    """Provenance every exported file carries (without comment markers). target:
    the library version the file is for, as resolved (None: none applies)."""
    prov = table.provenance or {}
    return [
        f"colltune {__version__} export, format {fmt}" + (f", target {target}" if target else ""),
        f"created {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}"
        f" from {'an' if table.tuner[:1] in 'aeiou' else 'a'} {table.tuner} decision table",
        f"source platform: {prov.get('platform', '?')} (backend {prov.get('backend', '?')}),"
        f" measured with {prov.get('mpi_library', '?')} {prov.get('mpi_version', '?')}",
    ]
