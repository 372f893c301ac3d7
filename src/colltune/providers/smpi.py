"""SimGrid SMPI's built-in collective algorithms.

The algorithm lists are read from smpirun itself: given an unknown algorithm
name, it aborts and prints the valid ones. Names that every collective accepts
(``default``, ``ompi``, ``mpich``, ``automatic`` ...) are library *selectors*
(whole decision logics), not algorithms.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from functools import lru_cache

from ..errors import BackendError
from . import PROVIDERS
from .base import ALGORITHM, COLLECTIVES, SELECTOR, Algorithm, LaunchMods, Provider

# MPI_Reduce_scatter_block is implemented by SMPI's reduce_scatter algorithms
# (smpi_pmpi_coll.cpp calls Colls::reduce_scatter with equal counts).
CFG_KEY = {"reduce_scatter_block": "reduce_scatter"}
_PROBE = "__colltune_probe__"
_VALID = re.compile(r"Valid algorithms:\s*(.+?)\.?\s*$", re.MULTILINE)
_TINY_PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><cluster id="probe" prefix="probe-" radical="0-1" suffix=""
 speed="1Gf" bw="1GBps" lat="1us"/></platform>
"""


def cfg_key(collective: str) -> str:
    return CFG_KEY.get(collective, collective)


@lru_cache(maxsize=4)
def _probe_lists(smpirun: str, program: str) -> dict[str, list[str]]:
    """Ask smpirun for the valid names of every collective we know."""
    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        plat, hosts = os.path.join(tmp, "p.xml"), os.path.join(tmp, "h")
        with open(plat, "w") as fh:
            fh.write(_TINY_PLATFORM)
        with open(hosts, "w") as fh:
            fh.write("probe-0\nprobe-1\n")
        for coll in COLLECTIVES:
            key = cfg_key(coll)
            proc = subprocess.run(
                [smpirun, "-np", "2", "-platform", plat, "-hostfile", hosts,
                 f"--cfg=smpi/{key}:{_PROBE}", program],
                capture_output=True, text=True, timeout=60, cwd=tmp)
            m = _VALID.search(proc.stdout + proc.stderr)
            if m is None:
                if "Bad config key" in proc.stdout + proc.stderr:
                    continue  # this SimGrid has no selectable algorithms for it
                raise BackendError(f"could not read {coll} algorithms from {smpirun}: "
                                   f"{(proc.stdout + proc.stderr)[-800:]}")
            out[coll] = [n.strip() for n in m.group(1).split(",") if n.strip()]
    return out


@PROVIDERS.register("smpi")
class SMPIProvider(Provider):
    name = "smpi"
    description = "SimGrid SMPI built-in collective algorithms (--cfg=smpi/<coll>:<name>)"
    backends = ("sim",)
    default_baselines = ("ompi", "mpich")
    per_size_rules = False      # --cfg=smpi/<coll>:<name> holds for the whole run

    def __init__(self, smpirun: str, program: str):
        self._lists = _probe_lists(smpirun, program)
        lists = [set(v) for v in self._lists.values()]
        self._selector_names = set.intersection(*lists) if lists else set()

    def collectives(self) -> list[str]:
        return [c for c in COLLECTIVES if c in self._lists]

    def _make(self, coll: str, kind: str) -> list[Algorithm]:
        names = self._lists.get(coll, [])
        return [Algorithm(self.name, coll, n, kind)
                for n in names if (n in self._selector_names) == (kind == SELECTOR)]

    def algorithms(self, collective: str) -> list[Algorithm]:
        return self._make(collective, ALGORITHM)

    def selectors(self, collective: str) -> list[Algorithm]:
        return self._make(collective, SELECTOR)

    def force(self, algorithm: Algorithm) -> LaunchMods:
        # A selector is what a job with it runs: the selector for every collective,
        # so the collectives its algorithms call inside (reduce + bcast, ...) are its
        # own too. `smpi/allreduce:ompi` alone leaves those to SMPI's default: 168 us
        # against 55 us for a 3000 B allreduce on the dragonfly at 48x4.
        if algorithm.kind == SELECTOR:
            return self.decision_mods(algorithm.name)
        return LaunchMods(launcher_args=[f"--cfg=smpi/{cfg_key(algorithm.collective)}:{algorithm.name}"])

    def decision_mods(self, selector: str) -> LaunchMods:
        return LaunchMods(launcher_args=[f"--cfg=smpi/coll-selector:{selector}"])
