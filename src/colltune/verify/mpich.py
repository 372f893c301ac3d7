"""Verify an MPICH CSEL JSON file on the real MPICH.

Acceptance: with MPIR_CVAR_DEBUG_SUMMARY=1 MPICH prints which JSON its MPIR
selection came from ("MPIR: <file>" or its built-in "MPII_coll_generic_json");
a file it cannot use aborts MPI_Init with an assertion, which is reported.
Which algorithm ran: MPICH's algorithm functions are not exported, but with
MPIR_CVAR_NOLOCAL=1 every message, collective-internal ones included, goes
through UCX's ucp_*_send_nbx, which the tracer wraps: the per-peer message
counts and bytes at a point with the file must equal those with the file's
algorithm forced (MPIR_CVAR_<COLL>_INTRA_ALGORITHM through the MPI_T shim of
providers/mpich.py, MPIR_CVAR_COLLECTIVE_FALLBACK=error). All runs of one verify
use NOLOCAL, so they differ from a deployment only in locality.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from ..exporters.mpich_json import MPICHJsonExporter, func_name, library_json
from ..providers.base import Algorithm
from ..providers.mpich import MPICH_NAME, MPICHProvider
from ..providers.mpich_params import forcing_env, leaf_defaults, param_cvars, tunable
from . import VERIFIERS, Point, Report, compare, default_note
from . import probe as _probe
from .hosts import Placement
from .rules import AVG_KEY, comm_branch, csel_leaf, cvar_name, load_csel
from .static_check import check_csel, library_has
from .table_check import check_against_table

REDUCTIONS = ("reduce", "allreduce", "reduce_scatter_block")


def _params_differ(point: Point, resolved) -> str | None:
    """The file's parameters of the algorithm at point against the table rule's (each
    parameter the rule leaves out at the control variable's default the measurement had)."""
    func = func_name(point.collective, resolved.algorithm)
    want = forcing_env(func, {**leaf_defaults(func), **resolved.params})
    got = dict(point.force[2])
    names = {cvar: p for p, cvar in param_cvars(func).items()}
    diff = [f"{names[c]} {want.get(c, 'unset')} in the table, {got.get(c, 'unset')} in the file"
            for c in sorted(set(want) | set(got)) if want.get(c) != got.get(c)]
    return f"{point.expected}: " + "; ".join(diff) if diff else None
_THRESH = re.compile(r"(avg|total)_msg_size<=?(\d+)")


def sample_sizes(branch: dict, coll: str, ranks: int, limit: int = 8) -> list[int]:
    """Bytes per rank on both sides of every message-size threshold in branch
    that can be reached (a threshold nested under a message-size branch counts
    only inside that branch's range: e.g. the library's own branch copied under
    a range where the table names its default decision)."""
    unit = 4 if coll in REDUCTIONS else 1
    div = 1 if coll in AVG_KEY else ranks
    found: set[int] = set()

    def walk(node, lo: int, hi: float):
        prev = lo
        for key, sub in node.items():
            k = key.replace(" ", "")
            m = _THRESH.fullmatch(k)
            sub_lo, sub_hi = lo, hi
            if m:
                edge = int(m.group(2)) // div
                if lo <= edge <= hi:       # the last size at or below, the first above
                    found.add(edge // unit * unit)
                    if edge < hi:
                        found.add(-(-(edge + 1) // unit) * unit)
                sub_lo, sub_hi, prev = prev, min(hi, edge), max(prev, edge + 1)
            elif k.endswith("msg_size=any"):
                sub_lo = prev
            if isinstance(sub, dict) and not key.startswith("algorithm="):
                walk(sub, sub_lo, sub_hi)
    walk(branch, 0, float("inf"))
    sizes = sorted({max(unit, s) for s in found} | {unit})
    return [0] if coll == "barrier" else sizes[:limit]


_TUNED_ON = re.compile(r"colltune: tuned on ([0-9x, ]+)")


def default_ranks(table, text: str = "", lo: int = 2, hi: int = 4) -> int:
    """The comm size a verify runs by default: the largest tuned one in lo..hi (from the
    table, else from the export's "colltune: tuned on NxP, ..." header key), else lo."""
    if table is not None:
        tuned = [e.nodes * e.ppn for e in table.entries if e.collective in MPICH_NAME]
    else:
        tuned = [int(n) * int(p) for m in _TUNED_ON.findall(text)
                 for n, p in re.findall(r"(\d+)x(\d+)", m)]
    return max([c for c in tuned if lo <= c <= hi], default=lo)


@VERIFIERS.register("mpich")
class MPICHVerifier:
    formats = ("mpich-json",)

    def __init__(self, impl, cache_dir: str):
        self.impl = impl
        self.provider = MPICHProvider(impl, cache_dir)
        self.tools = _probe.build(impl, cache_dir)
        self.placement = Placement(impl)      # where the launches run (verify/hosts.py)

    def guess_format(self, text: str) -> str:
        return "mpich-json"

    def _observe(self, ranks, points, env, reps, timeout, preload=(), nolocal=True):
        """A probe launch; nolocal routes all traffic through UCX (observed), and
        is left out of the timing launches, which run as deployed."""
        libs = " ".join([*map(str, preload), str(self.tools.tracer)])
        cmd = self.placement.command(ranks, ["-genv", "LD_PRELOAD", libs])
        local = {"MPIR_CVAR_NOLOCAL": "1"} if nolocal else {}
        return _probe.launch(cmd, self.tools, [f"{p.collective}:{p.nbytes}" for p in points],
                             reps, {**self.impl.run_env(), **local, **env}, timeout)

    def _tuned_collectives(self, tree: dict, table) -> list[str]:
        """The table's collectives, else those whose intra branch differs from the
        library's built-in selection."""
        if table is not None:
            return [c for c in table.collectives() if c in MPICH_NAME]
        base = self._builtin()
        return [c for c in MPICH_NAME
                if tree.get(f"collective={c}", {}).get("comm_type=intra")
                != base.get(f"collective={c}", {}).get("comm_type=intra")]

    def verify(self, path: str, fmt: str, table, ranks: int | None, reps: int,
               timeout: float) -> Report:
        ranks = ranks or default_ranks(table, Path(path).read_text(errors="replace"))
        notes: list[str] = []
        env_file = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(Path(path).resolve()),
                    "MPIR_CVAR_DEVICE_COLLECTIVES": "none", "MPIR_CVAR_DEBUG_SUMMARY": "1"}
        try:
            tree = load_csel(path)
        except InputError as exc:       # what MPICH would abort on, said where it is
            return Report("mpich", fmt, path, ranks, False, str(exc))
        static = None
        if tree:
            exporter = None
            if table is not None:
                exporter = MPICHJsonExporter()
                exporter.allow_substitute = True
            static = check_csel(tree, ranks, [c for c in self._tuned_collectives(tree, table)
                                              if f"collective={c}" in tree],
                                library_has(self._libmpi()), self.impl.version, table, exporter)
        points, unchecked = [], []
        for coll in self._tuned_collectives(tree, table):
            branch = comm_branch(tree, coll, ranks)
            for nbytes in sample_sizes(branch, coll, ranks):
                leaf = csel_leaf(tree, coll, ranks, nbytes)
                if isinstance(leaf, str):
                    unchecked.append(f"{coll} {nbytes} B/rank: {leaf}")
                    continue
                name = cvar_name(coll, leaf[0])
                params = tuple(sorted(forcing_env(leaf[0], leaf[1]).items()))
                detail = " ".join(f"{k} {v}" for k, v in leaf[1].items() if k in tunable(leaf[0]))
                points.append(Point(coll, nbytes, name or leaf[0], (coll, name, params), detail))
        probe_points = points or [Point("barrier", 0, "")]
        with_file = self._observe(ranks, probe_points, env_file, 0, timeout)
        accepted, evidence = self._acceptance(with_file, env_file)
        if not accepted or not points:
            if not points:
                unchecked.append("no sample point: the file changes no collective's intra branch")
            return Report("mpich", fmt, path, ranks, accepted, evidence, unchecked=unchecked,
                          notes=notes, static=static)
        default = _probe.require_ok(self._observe(ranks, points, {}, 0, timeout),
                                    "the run with the library default")
        forced = {}
        for key in dict.fromkeys(p.force for p in points):
            # only the points of this algorithm: forced with COLLECTIVE_FALLBACK=error,
            # MPICH aborts at a point where the algorithm is not usable (e.g.
            # reduce_scatter_allgather with fewer elements than ranks)
            coll, name, params = key
            index = [i for i, p in enumerate(points) if p.force == key]
            mods = self.provider.force(Algorithm("mpich", coll, name))
            forced[key] = self._observe(ranks, [points[i] for i in index],
                                        {**mods.env, **dict(params)}, 0, timeout,
                                        [self.provider.shim]).renumbered(index)
        results = compare(points, default, with_file, forced)
        # timings as deployed: shared memory on, no debug summary, back to back
        env_timed = {k: v for k, v in env_file.items() if k != "MPIR_CVAR_DEBUG_SUMMARY"}
        t_default = self._observe(ranks, points, {}, reps, timeout, nolocal=False)
        t_file = self._observe(ranks, points, env_timed, reps, timeout, nolocal=False)
        for i, r in enumerate(results):
            if t_default.times.get(i) and t_file.times.get(i):
                r.ratio = t_default.times[i] / t_file.times[i]
        if table is not None:
            notes += check_against_table(table, "mpich", results, ranks,
                                         lambda c: {a.name for a in self.provider.algorithms(c)},
                                         lambda p: self._default_name(p, ranks), _params_differ)
            notes += default_note(results, "MPIR_CVAR_DEVICE_COLLECTIVES=none: the untouched "
                                  "library may serve the call with ch4's own device-level "
                                  "selection first")
        return Report("mpich", fmt, path, ranks, accepted, evidence, results, unchecked, notes,
                      static)

    def _libmpi(self) -> str | None:
        libs = sorted(Path(self.impl.prefix or "/nonexistent", "lib").glob("libmpi.so.*"))
        return str(libs[0]) if libs else None

    def _builtin(self) -> dict:
        """MPICH's built-in MPIR selection tree (compiled into libmpi), {} if unknown."""
        if not hasattr(self, "_builtin_tree"):
            lib = self._libmpi()
            self._builtin_tree = library_json(lib)[0] if lib else {}
        return self._builtin_tree

    def _default_name(self, point: Point, ranks: int) -> str | None:
        """The algorithm MPICH's built-in selection names at point (its default
        decision, as the observed runs see the communicator: MPIR_CVAR_NOLOCAL)."""
        found = csel_leaf(self._builtin(), point.collective, ranks, point.nbytes)
        return None if isinstance(found, str) else (cvar_name(point.collective, found[0])
                                                    or found[0])

    @staticmethod
    def _acceptance(obs, env: dict) -> tuple[bool, str]:
        wanted = env["MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE"]
        if not obs.ok:
            why = [ln.strip() for ln in obs.output.splitlines()
                   if "Assertion failed" in ln or "unknown key" in ln or "unrecognized key" in ln
                   or "Internal error" in ln or "timed out" in ln]
            crash = re.search(r"EXIT STRING: (.+)|EXIT CODE: (\d+)", obs.output)
            return False, ("MPICH rejected the file (the run with it failed"
                           + (f": {(crash.group(1) or 'exit code ' + crash.group(2)).strip()}"
                              if crash else "") + "): "
                           + (" | ".join(dict.fromkeys(why)) or obs.output.strip()[-300:]))
        m = re.search(r"^MPIR: (.+)$", obs.output, re.MULTILINE)
        if m is None:
            return False, "MPICH's debug summary did not say where its selection came from"
        if m.group(1).strip() != wanted:
            return False, f"MPICH's selection came from {m.group(1).strip()}, not the file"
        return True, f"MPICH's debug summary says its MPIR selection came from {wanted}"
