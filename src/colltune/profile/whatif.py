"""What-if placement: the same host-to-host traffic matrix on another node set of the
topology (Brown et al.'s samplesort experiment, where a compact node set cut the peak
link traffic by over 20 %).

The job's hosts, in the order of their first rank (the order of the profile's host
matrix), are mapped one to one onto new hosts; every byte a job host sent to another
is then routed between their images. Placements:

* ``compact``: the first k hosts of the topology, in the topology's order (for a
  fat-tree: as few leaf switches as possible; dragonfly: as few routers, chassis,
  groups as possible).
* ``spread``: k hosts evenly spaced over the topology's order (host ``floor(i * n / k)``).
* ``random:SEED``: k distinct hosts drawn with Python's ``random.Random(SEED)``.
* a file: one host name per line, the i-th line for the job's i-th host, or lines
  ``OLD NEW`` naming a job host and its image; ``#`` starts a comment.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np

from .loads import LinkLoads, link_loads
from .topology import TopologyError

__all__ = ["WhatIf", "placement", "whatif", "format_whatif"]


@dataclass
class WhatIf:
    hosts: list[str]          # the job's hosts (matrix order)
    mapping: dict             # job host -> host of the other placement
    spec: str
    current: LinkLoads
    other: LinkLoads

    def ratio(self) -> tuple[float | None, float | None]:
        """(peak link bytes, hop-bytes) of the other placement over the current one."""
        a, b = self.current.most_loaded(), self.other.most_loaded()
        peak = b[1] / a[1] if a and b and a[1] else None
        hb = self.other.hop_bytes / self.current.hop_bytes if self.current.hop_bytes else None
        return peak, hb


def _read_file(path: str, hosts: list[str], known: set) -> dict:
    pairs, plain, used = {}, [], {}           # used: new host -> the line that took it
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2:
                raise TopologyError(f"{path}:{n}: expected 'HOST' or 'OLD NEW', got '{line.strip()}'")
            for w in words[-1:]:
                if w not in known:
                    raise TopologyError(f"{path}:{n}: host '{w}' is not in the topology")
                if w in used:
                    raise TopologyError(f"{path}:{n}: host '{w}' is already taken on line "
                                        f"{used[w]}: two job hosts on one")
                used[w] = n
            if len(words) == 2:
                if words[0] not in hosts:
                    raise TopologyError(f"{path}:{n}: host '{words[0]}' is not one of the job's hosts")
                pairs[words[0]] = words[1]
            else:
                plain.append(words[0])
    if pairs and plain:
        raise TopologyError(f"{path}: mixes 'HOST' lines and 'OLD NEW' lines")
    if plain:
        if len(plain) != len(hosts):
            raise TopologyError(f"{path}: {len(plain)} host line(s) for the job's {len(hosts)} hosts")
        return dict(zip(hosts, plain))
    missing = [h for h in hosts if h not in pairs]
    if missing:
        raise TopologyError(f"{path}: no new host for job host '{missing[0]}'")
    return pairs


def placement(topo, hosts: list[str], spec: str) -> dict:
    """Job host -> new host for a placement spec (module docstring)."""
    k, n = len(hosts), len(topo.hosts)
    if k > n:
        raise TopologyError(f"the job uses {k} hosts, topology '{topo.name}' has {n}")
    if spec == "compact":
        new = topo.hosts[:k]
    elif spec == "spread":
        new = [topo.hosts[i * n // k] for i in range(k)]
    elif spec.startswith("random:"):
        try:
            seed = int(spec.split(":", 1)[1])
        except ValueError:
            raise TopologyError(f"placement '{spec}': the seed must be an integer") from None
        new = random.Random(seed).sample(topo.hosts, k)
    elif os.path.isfile(spec):
        mapping = _read_file(spec, hosts, set(topo.hosts))
        new = [mapping[h] for h in hosts]
    else:
        raise TopologyError(f"placement '{spec}': not compact, spread, random:SEED or an existing file")
    if len(set(new)) != k:
        dup = next(h for h in new if new.count(h) > 1)
        raise TopologyError(f"placement '{spec}' puts two job hosts on '{dup}'")
    return dict(zip(hosts, new))


def whatif(topo, host_bytes, host_messages, hosts: list[str], spec: str) -> WhatIf:
    """Loads of the matrix on its current hosts and on the placement ``spec``. Hosts the
    topology lacks raise :class:`TopologyError` here (a placement needs them all)."""
    missing = [h for h in hosts if h not in set(topo.hosts)]
    if missing:
        raise TopologyError(f"host '{missing[0]}' of the profile is not in topology '{topo.name}'")
    B = np.asarray(host_bytes, float)
    M = np.asarray(host_messages, float)
    mapping = placement(topo, list(hosts), spec)
    cur = link_loads(topo, B, M, hosts=list(hosts))
    other = link_loads(topo, B, M, hosts=[mapping[h] for h in hosts])
    return WhatIf(list(hosts), mapping, spec, cur, other)


def _range(hosts: list[str]) -> str:
    return ", ".join(hosts) if len(hosts) <= 6 else f"{', '.join(hosts[:3])}, ..., {hosts[-1]} ({len(hosts)} hosts)"


def format_whatif(w: WhatIf) -> str:
    """The text `colltune profile whatif` prints."""
    lines = []
    for name, ld, hs in (("current", w.current, w.hosts), (w.spec, w.other, [w.mapping[h] for h in w.hosts])):
        best = ld.most_loaded()
        peak = f"{best[0].id}: {best[1]:.0f} B, {best[2]:.0f} messages" if best else "(nothing sent)"
        lines += [f"{name}: hosts {_range(hs)}", f"  most loaded link  {peak}",
                  f"  total hop-bytes   {ld.hop_bytes:.0f}"]
    peak, hb = w.ratio()
    lines.append("ratio (what-if / current): peak link bytes "
                 + (f"{peak:.3f}" if peak is not None else "-") + ", hop-bytes "
                 + (f"{hb:.3f}" if hb is not None else "-"))
    return "\n".join(lines)
