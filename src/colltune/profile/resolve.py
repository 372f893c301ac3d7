"""One entry point for every topology a profile can be mapped on, and host-name mapping.

``resolve_topology(spec)`` accepts (tried in this order):

1. a :class:`Topology` (returned as is) or a ``colltune.platforms.Platform``;
2. ``emulated`` (the only emulated cluster that is up) or ``emulated:NAME``;
3. an existing path:
   - a directory holding ``ibnetdiscover.txt`` -> InfiniBand, with the forwarding tables
     of ``lft=`` or every ``lfts*.txt``, ``dump_lfts*.txt``, ``ibroute*.txt`` in it;
   - a directory holding ``topology.yaml`` (read first, as Slurm does) or ``topology.conf``;
   - a file, by content: SimGrid XML; ``ibnetdiscover`` output (forwarding tables from
     ``lft=`` or the files above next to it); ``*.yaml``/``*.yml`` or ``SwitchName=`` lines
     -> Slurm tree (``topology=`` picks a topology of a YAML file);
4. a bundled platform name (``small``, ``fattree64x12``, ``dragonfly``, ...);
5. the name of an emulated cluster with a saved state (``ct``).

Anything else raises :class:`TopologyError` listing these forms.

``map_hosts(names, topo)`` maps the host names a run recorded (MPI_Get_processor_name
of each rank) to the topology's hosts: exact, then case-insensitive, then by short name
(up to the first dot: ``node01.cluster.local`` -> ``node01``, either side) when that is
unambiguous. Names it cannot map are listed in ``unknown`` (and said in ``notes``),
never an exception: a report draws what is known.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .topology import Topology, TopologyError, load_topology

__all__ = ["resolve_topology", "map_hosts", "HostMap", "ACCEPTED"]

ACCEPTED = ("a bundled platform name (" + "{platforms}" + "); a SimGrid XML file; a directory with "
            "ibnetdiscover.txt and lfts.txt (dump_lfts/ibroute output), or an ibnetdiscover file "
            "with lft=FILE; a Slurm topology.conf or topology.yaml (or a directory holding one); "
            "'emulated', 'emulated:NAME' or the name of an emulated cluster that is up")
_LFT_GLOBS = ("lfts*.txt", "dump_lfts*.txt", "ibroute*.txt")


def _lft_files(folder: Path) -> list[Path]:
    return sorted({p for g in _LFT_GLOBS for p in folder.glob(g)})


def _sniff(path: Path) -> str:
    """'xml', 'ibnetdiscover', 'lft', 'slurm' or '' from the first lines of a file."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return "slurm"
    try:
        with open(path, errors="replace") as fh:
            head = [fh.readline() for _ in range(200)]
    except OSError as exc:
        raise TopologyError(f"{path}: {exc}") from None
    for line in head:
        s = line.strip()
        if s.startswith(("<?xml", "<platform", "<!DOCTYPE platform")):
            return "xml"
        if s.startswith(("Switch\t", "Switch ", "Ca\t", "Ca ")) and '"' in s or s.startswith("# Topology file"):
            return "ibnetdiscover"
        if s.startswith("Unicast lids"):
            return "lft"
        if s.lower().startswith("switchname="):
            return "slurm"
    return ""


def _ib(nd: Path, lft: Any, name: str | None) -> Topology:
    from .ib import ib_topology
    lfts = ([lft] if isinstance(lft, (str, os.PathLike)) else list(lft)) if lft else _lft_files(nd.parent)
    if not lfts:
        raise TopologyError(f"{nd}: InfiniBand routes need the switches' forwarding tables: put "
                            f"dump_lfts/ibroute output in {nd.parent}/lfts.txt or give lft=FILE (--lft)")
    return ib_topology(nd, lfts, name=name)


def resolve_topology(spec: Any, *, lft: Any = None, topology: str | None = None,
                     name: str | None = None) -> Topology:
    """The :class:`Topology` named by ``spec`` (see module docstring). ``lft``: forwarding
    table file(s) of an InfiniBand dump; ``topology``: the topology of a Slurm YAML file;
    ``name``: the topology's name where the reader takes one."""
    from colltune import platforms
    from .emulated import emulated_topology
    from .slurm_topo import slurm_topology

    if isinstance(spec, Topology):
        return spec
    if isinstance(spec, platforms.Platform):
        return load_topology(spec)
    s = os.fspath(spec)
    if s == "emulated" or s.startswith("emulated:"):
        return emulated_topology(s.partition(":")[2] or None)
    p = Path(s)
    if p.is_dir():
        if (p / "ibnetdiscover.txt").is_file():
            return _ib(p / "ibnetdiscover.txt", lft, name or p.name)
        for f in ("topology.yaml", "topology.conf"):
            if (p / f).is_file():
                return slurm_topology(p / f, topology=topology, name=name)
        raise TopologyError(f"{p}: a directory without ibnetdiscover.txt, topology.yaml or topology.conf; "
                            f"accepted: {_accepted()}")
    if p.is_file():
        kind = _sniff(p)
        if kind == "xml":
            return load_topology(p)
        if kind == "ibnetdiscover":
            return _ib(p, lft, name)
        if kind == "slurm":
            return slurm_topology(p, topology=topology, name=name)
        if kind == "lft":
            raise TopologyError(f"{p}: a forwarding-table dump alone; give the ibnetdiscover output "
                                f"as the topology and this file as lft= (--lft)")
        raise TopologyError(f"{p}: not a topology file I know; accepted: {_accepted()}")
    if s in platforms.available():
        return load_topology(s)
    from ..cluster import state as cstate
    try:
        known = cstate.NAME_RE.match(s) and s in cstate.names()
    except OSError:
        known = False
    if known:
        return emulated_topology(s)
    raise TopologyError(f"topology '{s}': no such file, bundled platform or emulated cluster; "
                        f"accepted: {_accepted()}")


def _accepted() -> str:
    from colltune import platforms
    return ACCEPTED.replace("{platforms}", ", ".join(platforms.available()))


@dataclass
class HostMap:
    """``mapping``: recorded host name -> topology host; ``unknown``: names with no host in
    the topology (sorted); ``notes``: one line per fuzzy match or failure."""
    mapping: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        return self.mapping.get(name)


def _short(name: str) -> str:
    return name.split(".", 1)[0].lower()


def map_hosts(names: Iterable[str], topo: Topology) -> HostMap:
    """Map recorded host names onto ``topo.hosts`` (see module docstring); '' is skipped
    (a rank whose file is missing)."""
    out = HostMap()
    exact = set(topo.hosts)
    lower: dict[str, list[str]] = {}
    short: dict[str, list[str]] = {}
    for h in topo.hosts:
        lower.setdefault(h.lower(), []).append(h)
        short.setdefault(_short(h), []).append(h)
    for n in dict.fromkeys(names):
        if not n:
            continue
        if n in exact:
            out.mapping[n] = n
            continue
        for how, cands in (("case", lower.get(n.lower(), [])), ("short name", short.get(_short(n), []))):
            if len(cands) == 1:
                out.mapping[n] = cands[0]
                out.notes.append(f"host '{n}' taken as '{cands[0]}' of topology '{topo.name}' ({how})")
                break
            if len(cands) > 1:
                out.notes.append(f"host '{n}' is ambiguous in topology '{topo.name}': {', '.join(cands)}")
                out.unknown.append(n)
                break
        else:
            out.unknown.append(n)
            out.notes.append(f"host '{n}' is not in topology '{topo.name}': its traffic is left out")
    out.unknown.sort()
    return out
