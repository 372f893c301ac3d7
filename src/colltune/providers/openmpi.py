"""Open MPI's coll/tuned algorithms, read from the library with ompi_info.

Discovery: ``ompi_info --param coll tuned --level 9 --parsable`` lists, for each
``coll_tuned_<coll>_algorithm`` variable, its enumerator values
(``...:enumerator:value:<N>:<name>``); value 0 (``ignore``) means "let tuned
decide" and is not an algorithm. ``ompi_info --parsable`` lists the coll
components and their priorities.

Forcing (environment of mpiexec, which prterun forwards to the ranks):
``OMPI_MCA_coll_tuned_use_dynamic_rules=1``,
``OMPI_MCA_coll_tuned_<coll>_algorithm=<N>``, and priority 0 for every coll
component that implements intra-communicator collectives and would outrank tuned
(``han`` in 5.0 has 35 > tuned's 30; ``xhc``/``acoll``/``ucc``/``hcoll`` ... when
the library has them). Selector ``default``: no environment at all.

Open MPI silently substitutes some forced algorithms (checked against
coll_base_*.c of the 5.0 series); ``ran()`` says what really ran at a point,
and the local backend records it in every measurement's labels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from ..errors import BackendError
from . import PROVIDERS
from .base import (ALGORITHM, COLLECTIVES, SELECTOR, Algorithm, LaunchMods, Provider,
                   with_presets)

# colltune collective -> Open MPI's name in coll_tuned_<name>_algorithm (and rules files).
OMPI_NAME = {
    "bcast": "bcast", "reduce": "reduce", "allreduce": "allreduce",
    "allgather": "allgather", "gather": "gather", "scatter": "scatter",
    "alltoall": "alltoall", "reduce_scatter_block": "reduce_scatter_block",
    "barrier": "barrier",
}
assert set(OMPI_NAME) == set(COLLECTIVES)

# Components that implement intra-communicator collectives and could take a
# communicator away from tuned (when present and of higher priority).
TAKEOVER = ("han", "xhc", "acoll", "adapt", "sm", "smdirect", "ucc", "hcoll", "cuda",
            "accelerator")

_ENUM = re.compile(r"^mca:coll:tuned:param:coll_tuned_(\w+?)_algorithm:enumerator:value:(\d+):(\S+)$")
_PRIO = re.compile(r"^mca:coll:(\w+):param:coll_\1_priority:value:(-?\d+)$")
_COMP = re.compile(r"^mca:coll:(\w+):version:")


@dataclass
class LabelledMods(LaunchMods):
    """LaunchMods plus what the backend writes into every record's labels:
    fixed labels, and ``per_point(record) -> labels`` for what really ran."""
    labels: dict[str, str] = field(default_factory=dict)
    per_point: Callable[[dict], dict] | None = None

    def label(self, record: dict) -> dict:
        out = dict(self.labels)
        if self.per_point is not None:
            out.update(self.per_point(record))
        if record.get("scenario") == "overlap" and "ran" in out:
            # The variables select blocking algorithms; MPI_I<coll> (what the overlap
            # scenario times) has its own (libnbc / MPIR_I<coll>) selection.
            out.pop("switched_from", None)
            out["ran"] = "library default non-blocking algorithm (forcing applies to blocking calls)"
        return out


def _run(argv: list[str], env: dict[str, str]) -> str:
    from ..mpi.impl import run_tool
    code, out = run_tool(argv, env=env, timeout=60)
    if code != 0:
        raise BackendError(f"{' '.join(argv)} failed (exit {code}): {out[-800:]}")
    return out


@lru_cache(maxsize=8)
def _probe(info_tool: str, env_items: tuple) -> tuple[dict, dict, tuple]:
    """({coll: {name: N}}, {component: priority}, components) from ompi_info."""
    env = dict(env_items)
    algos: dict[str, dict[str, int]] = {}
    for line in _run([info_tool, "--param", "coll", "tuned", "--level", "9", "--parsable"],
                     env).splitlines():
        m = _ENUM.match(line.strip())
        if m and int(m.group(2)) != 0:
            algos.setdefault(m.group(1), {})[m.group(3)] = int(m.group(2))
    prios: dict[str, int] = {}
    comps: list[str] = []
    for line in _run([info_tool, "--param", "coll", "all", "--level", "9", "--parsable"],
                     env).splitlines():
        line = line.strip()
        m = _PRIO.match(line)
        if m:
            prios[m.group(1)] = int(m.group(2))
        m = _COMP.match(line)
        if m and m.group(1) not in comps:
            comps.append(m.group(1))
    return algos, prios, tuple(comps)


# What coll/tuned hands an algorithm besides the buffers (<coll>_intra_do_this of
# coll_tuned_<coll>_decision.c, 5.0): a segment size and, for the chains, their
# fan-out. A rules file has a column for each; forcing sets
# coll_tuned_<coll>_algorithm_segmentsize / _chain_fanout (the forced path passes the
# chain fan-out). bcast's knomial radix is one MCA variable for the whole job
# (coll_tuned_bcast_algorithm_knomial_radix, read for forced and rules-file calls alike):
# forced with it; an export sets it once, and refuses two radices (openmpi_tuned).
SEGSIZE = {"default": 0, "min": 0, "max": 1 << 30, "unit": "bytes",
           "help": "segment size: the message goes in pieces of this size (0: one piece)"}
FANOUT = {"default": 4, "min": 1, "max": 1024, "unit": "",
          "help": "number of chains the root feeds"}
RADIX = {"default": 4, "min": 2, "max": 1024, "unit": "",
         "help": "k-nomial tree radix; one value for the whole job (MCA coll_tuned_bcast_algorithm_knomial_radix)"}
RADIX_VAR = "OMPI_MCA_coll_tuned_bcast_algorithm_knomial_radix"
_SEG, _CHAIN = {"segsize": SEGSIZE}, {"segsize": SEGSIZE, "fanout": FANOUT}
PARAMETERS = {
    "bcast": {"chain": _CHAIN, "pipeline": _SEG, "split_binary_tree": _SEG, "binary_tree": _SEG,
              "binomial": _SEG, "knomial": {**_SEG, "radix": RADIX}},
    "reduce": {"chain": _CHAIN, "pipeline": _SEG, "binary": _SEG, "binomial": _SEG,
               "in-order_binary": _SEG},
    "allreduce": {"segmented_ring": _SEG},
}
# Segmented algorithms a tuning campaign also measures (with tune_presets): the
# algorithm and segment size pairs of coll/tuned's classic fixed decision (its
# coll_tuned_decision_fixed.c of the 1.x series, measured on a cluster of its time: bcast
# split binary tree 1 / 8 KiB, pipeline 16 / 128 KiB; reduce binary and pipeline 1 KiB,
# pipeline 32 / 64 KiB; allreduce segmented ring 1 MiB): a starting set, not a search.
PRESETS = {
    "bcast": {"split_binary_tree": ("segsize=1024", "segsize=8192"),
              "pipeline": ("segsize=16384", "segsize=131072")},
    "reduce": {"binary": ("segsize=1024",),
               "pipeline": ("segsize=1024", "segsize=32768", "segsize=65536")},
    "allreduce": {"segmented_ring": ("segsize=1048576",)},
}


def _pof2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def _type_size(rec: dict) -> int:
    """Bytes per element of a record (msg_size / count; 4, the bench's default type)."""
    try:
        return max(1, int(rec["msg_size"]) // int(rec["count"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 4


def ran(collective: str, name: str, count: int, participants: int, segsize: int = 0,
        type_size: int = 4) -> str:
    """What Open MPI 5.0 really runs when tuned is forced to ``name`` (MPI_SUM,
    segment size segsize), from the fallbacks in ompi/mca/coll/base."""
    p = participants
    if p == 1:
        return "self"                          # coll/self takes one-rank communicators
    if collective == "allreduce":
        if name == "segmented_ring":
            # COLL_BASE_COMPUTED_SEGCOUNT: a segment of segsize bytes when smaller than
            # the message, else the whole; fewer than p segments' worth: the plain ring
            seg = segsize // type_size if type_size <= segsize < count * type_size else count
            if count < p * max(seg, 1):
                name = "ring"
        if name == "ring" and count < p:
            return "recursive_doubling"
        if name == "rabenseifner" and count < _pof2_floor(p):
            return "basic_linear"
    elif collective == "reduce":
        if name == "rabenseifner" and (_pof2_floor(p) < 2 or count < _pof2_floor(p)):
            return "linear"
    elif collective == "bcast":
        if name in ("scatter_allgather", "scatter_allgather_ring") and count < p:
            return "basic_linear"
        if name == "split_binary_tree" and count < 2:
            return "chain"
    elif collective == "allgather":
        if name == "recursive_doubling" and p & (p - 1):
            return "bruck"
        if name == "neighbor" and p % 2:
            return "ring"
    return name


@PROVIDERS.register("openmpi")
class OpenMPIProvider(Provider):
    name = "openmpi"
    description = "Open MPI coll/tuned algorithms (OMPI_MCA_coll_tuned_<coll>_algorithm)"
    backends = ("local",)
    default_baselines = ("default",)

    def __init__(self, impl, cache_dir: str | None = None, presets: bool = True):
        self.presets = presets
        if impl.info_tool is None:
            raise BackendError(f"Open MPI at {impl.cc} has no ompi_info beside it: "
                               f"cannot list its algorithms")
        self.impl = impl
        self._ids, self._prios, self._components = _probe(
            impl.info_tool, tuple(sorted(impl.run_env().items())))
        if not self._ids:
            raise BackendError(f"{impl.info_tool} lists no coll_tuned_*_algorithm enumerators")

    # -- discovery -----------------------------------------------------------
    def components(self) -> tuple[str, ...]:
        return self._components

    def collectives(self) -> list[str]:
        return [c for c in COLLECTIVES if OMPI_NAME[c] in self._ids]

    def algorithm_ids(self, collective: str) -> dict[str, int]:
        """{name: enumerator value} as ompi_info lists them."""
        return dict(self._ids.get(OMPI_NAME[collective], {}))

    def algorithms(self, collective: str) -> list[Algorithm]:
        """Every algorithm, then (presets) the segmented ones with PRESETS' segment sizes."""
        var = f"coll_tuned_{OMPI_NAME[collective]}_algorithm"
        plain = [Algorithm(self.name, collective, n, ALGORITHM, description=f"{var}={i}")
                 for n, i in sorted(self.algorithm_ids(collective).items(), key=lambda kv: kv[1])]
        if not self.presets:
            return plain
        return with_presets(plain, PRESETS.get(collective, {}))

    def parameters(self, collective: str, name: str) -> dict:
        return {k: dict(v) for k, v in PARAMETERS.get(collective, {}).get(name, {}).items()}

    def selectors(self, collective: str) -> list[Algorithm]:
        if collective not in self.collectives():
            return []
        return [Algorithm(self.name, collective, "default", SELECTOR,
                          description="Open MPI untouched (its own component and algorithm choice)")]

    # -- forcing ---------------------------------------------------------------
    def takeover_env(self) -> dict[str, str]:
        """Priority 0 for the components that would outrank tuned."""
        return {f"OMPI_MCA_coll_{c}_priority": "0" for c in TAKEOVER
                if c in self._components and self._prios.get(c, 0) > 0}

    def forcing_env(self, collective: str, ident: int, segsize: int = 0, fanout: int = 0,
                    radix: int = 0) -> dict:
        """The environment that forces coll/tuned's algorithm number ident (an unknown number
        as is: Open MPI then rejects it like a file), with a segment size and fan-out where
        given (the forced path passes the chain fan-out; the tree fan-out is set alike),
        and the components that would outrank tuned off."""
        var = f"OMPI_MCA_coll_tuned_{OMPI_NAME[collective]}_algorithm"
        env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", var: str(ident), **self.takeover_env()}
        if segsize:
            env[f"{var}_segmentsize"] = str(segsize)
        if fanout:
            env[f"{var}_tree_fanout"] = env[f"{var}_chain_fanout"] = str(fanout)
        if radix:
            env[RADIX_VAR] = str(radix)
        return env

    def force(self, algorithm: Algorithm) -> LaunchMods:
        if algorithm.kind == SELECTOR:
            return LabelledMods(labels={"forced": "none (library default)"})
        ident = self.algorithm_ids(algorithm.collective).get(algorithm.name)
        if ident is None:
            self.lookup(algorithm.collective, algorithm.name)   # raises, listing the names
        params = dict(algorithm.params)
        env = self.forcing_env(algorithm.collective, ident, params.get("segsize", 0),
                               params.get("fanout", 0), params.get("radix", 0))
        known = set(self.algorithm_ids(algorithm.collective))

        def per_point(rec: dict) -> dict:
            count, parts = rec.get("count"), rec.get("participants")
            if count is None or parts is None:
                return {}
            really = ran(algorithm.collective, algorithm.name, int(count), int(parts),
                         params.get("segsize", 0), _type_size(rec))
            if really != algorithm.name and (really in known or really == "self"):
                return {"ran": really, "switched_from": algorithm.name}
            return {"ran": algorithm.name}

        return LabelledMods(env=env, per_point=per_point,
                            labels={"forced": " ".join(f"{k}={v}" for k, v in env.items())})
