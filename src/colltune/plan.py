"""Benchmark plans: what one launch of the native bench measures.

A ``BenchSpec`` is one launch's worth of work (one algorithm, one nodes x ppn
layout, a list of sizes and scenario values). ``points()`` expands it into the
points it measures, in the order the bench measures them, each with the key the
store uses to skip work already done.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .providers.base import SELECTOR, Algorithm
from .store import point_key

SCENARIOS = ("plain", "delayed", "overlap")
# the bench's collectives that reduce (its descriptors' `reduces`): the only ones an
# operator (setting reduction_op) applies to
REDUCING = ("reduce", "allreduce", "reduce_scatter_block")
# the bench's datatypes (--dtype) and their sizes; without --dtype the reductions use
# float, the others char (native/bench/options.c)
TYPE_SIZE = {"char": 1, "int": 4, "float": 4, "double": 8}
MAX_COUNT = 2**31 - 1


def check_sizes(collective: str, sizes, dtype: str | None) -> None:
    """Refuse, before anything is launched, a size the bench would refuse (more elements than
    an MPI count holds) or measure as count 0 (less than one element)."""
    from .errors import ColltuneError
    dtype = dtype or ("float" if collective in REDUCING else "char")
    unit = TYPE_SIZE[dtype]
    for s in sizes:
        if s // unit > MAX_COUNT:
            raise ColltuneError(f"--sizes: {s} bytes of {dtype} for {collective} are more than "
                                f"{MAX_COUNT} elements, the largest MPI count")
        if 0 < s < unit:
            raise ColltuneError(f"--sizes: {s} bytes is less than one {dtype} ({unit} bytes), "
                                f"which {collective} would measure as a count of 0; give 0 or "
                                f"at least {unit}")
DEFAULT_OP = "sum"
# operators of the reducing collectives (colltune-bench --op; the C parser has the same names)
REDUCTION_OPS = (DEFAULT_OP, "charged-sum")


@dataclass(frozen=True)
class BenchSpec:
    collective: str
    algorithm: Algorithm
    nodes: int
    ppn: int
    sizes: tuple[int, ...]
    procs: tuple[int, ...] | None = None      # participant counts; None = every rank
    scenario: str = "plain"
    delays_us: tuple[float, ...] = ()
    delayed_rank: str | None = None
    tcalc_us: tuple[float, ...] = ()
    root: int = 0
    dtype: str | None = None

    @property
    def reduces(self) -> bool:
        return self.collective in REDUCING

    @property
    def nprocs(self) -> int:
        return self.nodes * self.ppn

    def scenario_values(self) -> list[dict[str, Any]]:
        if self.scenario == "delayed":
            return [{"delay_us": float(d), "delayed_rank": self.delayed_rank, "tcalc_us": None}
                    for d in self.delays_us]
        if self.scenario == "overlap":
            return [{"delay_us": None, "delayed_rank": None, "tcalc_us": float(t)}
                    for t in self.tcalc_us]
        return [{"delay_us": None, "delayed_rank": None, "tcalc_us": None}]

    def points(self) -> list[dict[str, Any]]:
        """Points in bench order: participants, then size, then scenario value."""
        out = []
        for p in (self.procs or (self.nprocs,)):
            for m in self.sizes:
                for sv in self.scenario_values():
                    out.append({"participants": p, "msg_size": m, **sv})
        return out

    def with_sizes(self, sizes: list[int]) -> "BenchSpec":
        return replace(self, sizes=tuple(sizes))

    def bench_args(self, settings, check: str) -> list[str]:
        args = ["--coll", self.collective, "--scenario", self.scenario,
                "--sizes", ",".join(map(str, self.sizes)), "--root", str(self.root),
                "--warmup", str(settings.warmup), "--min-reps", str(settings.min_reps),
                "--max-reps", str(settings.max_reps), "--rse", str(settings.rse),
                "--check", check]
        if self.procs:
            args += ["--procs", ",".join(map(str, self.procs))]
        if self.dtype:
            args += ["--dtype", self.dtype]
        if self.reduces and settings.reduction_op != DEFAULT_OP:
            args += ["--op", settings.reduction_op]
        if self.scenario == "delayed":
            args += ["--delays-us", ",".join(f"{d:g}" for d in self.delays_us),
                     "--delayed-rank", self.delayed_rank or "last"]
        if self.scenario == "overlap":
            args += ["--tcalc-us", ",".join(f"{t:g}" for t in self.tcalc_us)]
        return args

    def key_of(self, point: dict[str, Any], context: dict[str, Any]) -> str:
        # selectors are measured as a job runs them (every collective's selector; see
        # SMPIProvider.force): points measured before, with only this collective's,
        # are not reused
        scope = {"selector_scope": "job"} if self.algorithm.kind == SELECTOR else {}
        # the operator is part of what a reduction measured (points with MPI_SUM keep
        # their key); it means nothing to the other collectives
        bench = context.get("bench", {})
        if "reduction_op" in bench and (not self.reduces or bench["reduction_op"] == DEFAULT_OP):
            context = {**context, "bench": {k: v for k, v in bench.items() if k != "reduction_op"}}
        return point_key(collective=self.collective, algorithm=self.algorithm.label,
                         provider=self.algorithm.provider, nodes=self.nodes, ppn=self.ppn,
                         scenario=self.scenario, root=self.root, dtype=self.dtype,
                         **scope, **point, **context)


def check_bytes_per_rank(collective: str, msg_size: int, nprocs: int) -> int:
    """Real-buffer bytes one rank needs to check a point (send + receive)."""
    many = {"allgather", "gather", "scatter", "alltoall", "reduce_scatter_block"}
    if collective == "barrier":
        return 0
    if collective == "alltoall":
        return 2 * nprocs * msg_size
    if collective in many:
        return (nprocs + 1) * msg_size
    return 2 * msg_size
