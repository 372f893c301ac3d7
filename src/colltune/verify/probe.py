"""The probe program and the tracer (C, next to this file), built per library,
and one observed launch of them.

A launch runs the probe on N ranks over the sample points with a given
environment; it returns the timings rank 0 printed and, per (rank, point), what
the tracer saw during the observed call: the library's algorithm functions
(Open MPI) and the messages handed to UCX (MPICH with MPIR_CVAR_NOLOCAL=1).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BackendError, BuildError

HERE = Path(__file__).resolve().parent
# Library functions whose calls identify the algorithm that ran (exported by libmpi).
TRACED = re.compile(r"^ompi_coll_base_(bcast|reduce|allreduce|allgather|gather|scatter|"
                    r"alltoall|reduce_scatter_block|barrier)_intra_\w+$")


# Where Open MPI's algorithm functions take the parameters a rules file gives them
# (coll_base_functions.h of the 4.x and 5.0 series: buffers, count, type, [op,] root,
# communicator and module come first): function -> ((parameter, argument index), ...).
# The tracer records arguments 6..9; a call is then named with them, e.g.
# ompi_coll_base_bcast_intra_pipeline(segsize=16384), so that a run that ignored the
# file's segment size does not look like the forced run.
_SEG6, _SEG7, _SEG8 = (("segsize", 6),), (("segsize", 7),), (("segsize", 8),)
TUNING_ARGS = {
    "ompi_coll_base_bcast_intra_chain": (("segsize", 6), ("fanout", 7)),
    "ompi_coll_base_bcast_intra_pipeline": _SEG6, "ompi_coll_base_bcast_intra_split_bintree": _SEG6,
    "ompi_coll_base_bcast_intra_bintree": _SEG6, "ompi_coll_base_bcast_intra_binomial": _SEG6,
    "ompi_coll_base_bcast_intra_knomial": _SEG6,
    "ompi_coll_base_reduce_intra_chain": (("segsize", 8), ("fanout", 9)),
    "ompi_coll_base_reduce_intra_pipeline": _SEG8, "ompi_coll_base_reduce_intra_binary": _SEG8,
    "ompi_coll_base_reduce_intra_binomial": _SEG8, "ompi_coll_base_reduce_intra_in_order_binary": _SEG8,
    "ompi_coll_base_allreduce_intra_ring_segmented": _SEG7,
}
ARGS_FROM = 6          # the first argument the tracer records


def call_name(fn: str, args: list[int], with_args: bool = True) -> str:
    """fn, with the tuning arguments it was called with where TUNING_ARGS knows them."""
    known = TUNING_ARGS.get(fn) if with_args else None
    if not known or len(args) < 4:
        return fn
    return fn + "(" + ",".join(f"{k}={args[i - ARGS_FROM] & 0xffffffff if k == 'segsize' else args[i - ARGS_FROM]}"
                               for k, i in known) + ")"


def library_symbols(impl) -> list[str]:
    """Exported functions of impl's libmpi that the tracer wraps (none for MPICH,
    whose algorithm functions are not exported)."""
    libs = sorted(Path(impl.prefix or "/nonexistent", "lib").glob("libmpi.so.*"))
    if not libs:
        return []
    nm = shutil.which("nm")
    if nm is None:
        raise BuildError("nm (binutils) is needed to list libmpi's functions for the tracer")
    out = subprocess.run([nm, "-D", "--defined-only", str(libs[0])], capture_output=True,
                         text=True, check=False).stdout
    names = {parts[2] for parts in (ln.split() for ln in out.splitlines())
             if len(parts) == 3 and parts[1] == "T" and TRACED.match(parts[2])}
    return sorted(names)


def _wrappers(symbols: list[str]) -> str:
    names = ", ".join(f'"{s}"' for s in symbols) or '"none"'
    body = "\n".join(f"WRAP({i}, {s})" for i, s in enumerate(symbols))
    return f"static const char *fn_names[] = {{{names}}};\n{body}\n"


@dataclass
class Tools:
    probe: Path
    tracer: Path
    symbols: list[str]
    # TUNING_ARGS holds for this library (Open MPI 4.x / 5.0 argument lists)
    tuning_args: bool = False


def build(impl, cache_dir: str) -> Tools:
    """Build probe and tracer with impl's mpicc, once per identity and source."""
    symbols = library_symbols(impl)
    wrappers = _wrappers(symbols)
    h = hashlib.sha256(wrappers.encode())
    for name in ("probe.c", "tracer.c"):
        h.update((HERE / name).read_bytes())
    out = Path(cache_dir).resolve() / f"verify-{impl.name}-{impl.identity()}-{h.hexdigest()[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    tools = Tools(out / "colltune-verify-probe", out / "libcolltune-trace.so", symbols,
                  impl.name == "openmpi" and str(impl.version).split(".")[0] in ("4", "5"))
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tools.tracer.exists():
            (out / "tracer_wrappers.h").write_text(wrappers)
            _cc(impl, ["-shared", "-fPIC", "-O1", f"-I{out}", str(HERE / "tracer.c"), "-ldl",
                       "-o", str(tools.tracer)], "the verify tracer")
        if not tools.probe.exists():
            _cc(impl, ["-O1", str(HERE / "probe.c"), "-ldl", "-o", str(tools.probe)],
                "the verify probe")
    return tools


def _cc(impl, argv: list[str], what: str) -> None:
    proc = subprocess.run([impl.cc, *argv], capture_output=True, text=True, env=impl.run_env())
    if proc.returncode != 0:
        raise BuildError(f"building {what} with {impl.cc} failed:\n{proc.stderr[-2000:]}")


@dataclass
class Observed:
    ok: bool
    command: list[str]
    output: str                                        # stdout + stderr (tail kept)
    times: dict[int, float] = field(default_factory=dict)     # point -> seconds per call
    calls: dict[tuple[int, int], list[str]] = field(default_factory=dict)   # (rank, point)
    messages: dict[tuple[int, int], dict[str, list[int]]] = field(default_factory=dict)

    def renumbered(self, index: list[int]) -> "Observed":
        """This launch's observations with point j renamed index[j] (a launch of
        a subset of the points, seen as part of the whole list)."""
        return Observed(self.ok, self.command, self.output,
                        {index[p]: t for p, t in self.times.items() if p < len(index)},
                        {(r, index[p]): v for (r, p), v in self.calls.items() if p < len(index)},
                        {(r, index[p]): v for (r, p), v in self.messages.items()
                         if p < len(index)})

    def signature(self, point: int, collective: str | None = None) -> tuple:
        """What identifies the algorithm at a point: per rank, the library's
        algorithm functions in first-call order, and the (count, bytes) of the
        messages sent to each peer (peers unnamed, sorted). With collective: of
        the functions only the first one of that collective, the algorithm the
        library chose for the call (what it calls inside is left out)."""
        ranks = sorted({r for r, p in list(self.calls) + list(self.messages) if p == point})
        sig = []
        for r in ranks:
            fns = tuple(dict.fromkeys(self.calls.get((r, point), [])))
            if collective is not None:
                own = [f for f in fns if f.startswith(f"ompi_coll_base_{collective}_intra_")]
                fns = tuple(own[:1]) or fns
            peers = tuple(sorted((len(v), sum(v)) for v in self.messages.get((r, point), {}).values()))
            sig.append((r, fns, peers))
        return tuple(sig)


def launch(cmd_prefix: list[str], tools: Tools, points: list[str], reps: int,
           env: dict[str, str], timeout: float) -> Observed:
    """Run ``cmd_prefix + [probe, reps, *points]`` with the tracer's output folder set."""
    with tempfile.TemporaryDirectory(prefix="colltune-verify-") as tmp:
        full_env = {**env, "COLLTUNE_TRACE_DIR": tmp}
        cmd = [*cmd_prefix, str(tools.probe), str(reps), *points]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env,
                                  timeout=timeout, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) \
                else (exc.stdout or "")
            return Observed(False, cmd, f"timed out after {timeout:.0f} s\n{out[-3000:]}")
        obs = Observed(proc.returncode == 0, cmd, (proc.stdout + proc.stderr)[-6000:])
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                obs.times[int(rec["point"])] = float(rec["median_s"])
        for f in Path(tmp).glob("trace.*"):
            for line in f.read_text().splitlines():
                parts = line.split()
                if parts[0] == "C" and len(parts) == 8:
                    name = call_name(parts[3], [int(a) for a in parts[4:]], tools.tuning_args)
                    obs.calls.setdefault((int(parts[1]), int(parts[2])), []).append(name)
                elif parts[0] == "M" and len(parts) == 5:
                    peers = obs.messages.setdefault((int(parts[1]), int(parts[2])), {})
                    peers.setdefault(parts[3], []).append(int(parts[4]))
    return obs


def require_ok(obs: Observed, what: str) -> Observed:
    if not obs.ok:
        raise BackendError(f"{what} failed:\n$ {' '.join(obs.command)}\n{obs.output[-2500:]}")
    return obs
