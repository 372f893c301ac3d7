"""Real MPI on this machine: Open MPI or MPICH (setting ``mpi``), one host.

The bench is built with the chosen implementation's mpicc (native.build) and
started with its own mpiexec, ``-n nodes*ppn``, on this host only. The
algorithm provider (providers/openmpi.py, providers/mpich.py) forces an
algorithm through the environment; the command recorded with every run starts
with ``env K=V ...`` so it shows (and reproduces) exactly what was forced, and
every measurement carries labels ``forced`` and ``ran`` (what really ran).

Launches are serialised within a process: two concurrent launches would share
the same cores and time each other. More ranks than cores oversubscribe them
(Open MPI needs ``--oversubscribe``); busy-polling ranks then fight for the
cores and timings are noise (use such layouts for correctness only).
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

from .. import native
from ..errors import BackendError, BuildError
from . import BACKENDS
from .base import Backend, Launch, LaunchResult, apply_labels, choose_provider, run_process

LIBRARY = {"openmpi": "Open MPI", "mpich": "MPICH"}
_RUN_LOCK = threading.Lock()


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def oversubscribed(ranks: int) -> bool:
    """More ranks than this machine's cores: they time-share the cores."""
    return ranks > host_cores()


def oversubscribed_runs(runs):
    """The stored launches (a Results' runs) of a backend that runs every rank on this
    machine (``shares_host_cores``: local, netns) with more ranks than its cores: their
    timings are noise."""
    from . import trait
    if runs.empty or "backend" not in runs or "nprocs" not in runs:
        return runs.iloc[0:0]
    here = runs["backend"].map(lambda b: trait(b, "shares_host_cores"))
    return runs[here.astype(bool) & (runs["nprocs"].fillna(0) > host_cores())]


# Launcher options when ranks outnumber the cores. Open MPI refuses to start without
# --oversubscribe (and then yields when idle). MPICH's ranks busy-poll and starve one
# another unless its progress loop sleeps after failed polls: 5 ranks on 2 cores ran
# a HAN matrix in 0.65 s throttled, 2.9 s with MPIR_CVAR_ENABLE_HEAVY_YIELD, 3.3 s as is.
OVERSUBSCRIBE_ARGS = {
    "openmpi": ("--oversubscribe",),
    "mpich": ("-genv", "MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1"),
}


def oversubscribe_args(impl, ranks: int) -> list[str]:
    """Launcher options for `ranks` ranks on this host (none when the cores suffice)."""
    return list(OVERSUBSCRIBE_ARGS.get(impl.name, ())) if oversubscribed(ranks) else []


def max_ranks() -> int:
    """A sane limit for one host: 4 ranks per core, at least 8."""
    return max(8, 4 * host_cores())


def make_provider(impl, settings):
    """The library's provider; settings: tune_presets, cache_dir."""
    from ..providers import PROVIDERS
    if impl.library.simulated:
        raise BackendError(f"the local backend runs Open MPI or MPICH, not {impl.library.title}")
    return PROVIDERS.get(impl.name)(impl, settings.cache_dir, settings.values.get("tune_presets", True))


def local_providers(settings) -> tuple[dict[str, Any], dict[str, str]]:
    """({name: provider}, {name: why unavailable}) for Open MPI and MPICH here
    (for `colltune info`; builds nothing but the small MPI_T lister)."""
    from .. import mpi
    found, errors = {}, {}
    for name in LIBRARY:
        try:
            found[name] = make_provider(mpi.find(name), settings)
        except (mpi.MPINotFound, BackendError, BuildError) as exc:
            errors[name] = str(exc).splitlines()[0]
    return found, errors


def _holding(needle: bytes) -> list[int]:
    """Live processes (not zombies) whose command line contains needle."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def kill_leftovers(marker: str, wait_s: float = 10.0) -> list[int]:
    """SIGKILL the processes whose command line contains marker (the launch's own
    JSON path, unique per launch), and wait until they are gone so the next launch
    never shares the cores with dying ranks. Open MPI's launcher puts every rank in
    its own process group, so killing the launcher's group on a timeout leaves them
    running; a rank still being spawned is caught by scanning again."""
    killed: list[int] = []
    deadline = time.monotonic() + wait_s
    while True:
        pids = _holding(marker.encode())
        if not pids or time.monotonic() > deadline:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            if pid not in killed:
                killed.append(pid)
        time.sleep(0.05)


@BACKENDS.register("local")
class LocalBackend(Backend):
    name = "local"
    # every rank runs on this machine's cores (netns too): more ranks than cores make
    # timings noise (commands.oversubscribed_note)
    shares_host_cores = True
    real_library = True
    description = "real Open MPI or MPICH on this machine (--mpi openmpi|mpich; one host)"

    def __init__(self, settings, platform: str | None = None):
        self.settings = settings
        self.mpi_name = settings.values.get("mpi", "openmpi")
        self.impl = None
        self.bench = None
        self._provider = None

    def prepare(self) -> None:
        from .. import mpi
        if self.mpi_name not in LIBRARY:
            raise BackendError(f"the local backend runs {' or '.join(LIBRARY)}, "
                               f"not {self.mpi_name!r} (setting mpi)")
        try:
            self.impl = mpi.find(self.mpi_name)
        except mpi.MPINotFound as exc:
            raise BackendError(str(exc)) from None
        self.bench = native.build(self.impl, "bench", self.settings.cache_dir)

    def provider(self):
        if self._provider is None:
            self._provider = choose_provider(self, make_provider(self.impl, self.settings))
        return self._provider

    def max_ppn(self) -> int:
        return max_ranks()

    def max_nodes(self) -> int:
        return 1

    def provenance(self) -> dict[str, Any]:
        cores = host_cores()
        return {
            "backend": self.name,
            "platform": socket.gethostname(),
            "mpi_library": LIBRARY[self.impl.name],
            "mpi_version": self.impl.version,
            "mpi_flavour": self.impl.flavour,
            "mpi_cc": self.impl.cc,
            "cores": cores,
            "note": (f"one host with {cores} cores: layouts with more than {cores} ranks "
                     f"oversubscribe them and their timings are noise"),
        }

    # Hooks of the netns backend (several emulated hosts): where the launcher runs,
    # its placement options, and which layouts are accepted.
    def launch_prefix(self) -> list[str]:
        return []

    def placement_args(self, launch: Launch, workdir: str) -> list[str]:
        return oversubscribe_args(self.impl, launch.nodes * launch.ppn)

    def oversubscription_args(self, launch: Launch) -> list[str]:
        """More ranks than cores: every repetition has a rank descheduled at its
        start, so widen the late-start tolerance (the records carry it)."""
        tol = self.settings.values.get("late_tolerance_us") or 0.0
        if oversubscribed(launch.nodes * launch.ppn):
            tol = max(tol, self.settings.oversubscribed_late_tolerance_us)
        return ["--late-tolerance-us", f"{tol:g}"] if tol > 0 else []

    def check_layout(self, launch: Launch) -> None:
        if launch.nodes != 1:
            raise BackendError(f"the local backend runs on this one host: layout "
                               f"{launch.nodes}x{launch.ppn} needs {launch.nodes} nodes "
                               f"(use 1x{launch.nodes * launch.ppn})")
        if not 1 <= launch.ppn <= max_ranks():
            raise BackendError(f"layout 1x{launch.ppn}: at most {max_ranks()} ranks on this "
                               f"host ({host_cores()} cores)")

    def mpiexec(self, launch: Launch, workdir: str) -> list[str]:
        """The command up to the program: launcher, forcing and placement options."""
        return [*self.launch_prefix(), self.impl.launcher, *launch.mods.launcher_args,
                *self.placement_args(launch, workdir), "-n", str(launch.nodes * launch.ppn)]

    def command(self, launch: Launch, json_path: str) -> list[str]:
        cmd = [*self.mpiexec(launch, os.path.dirname(json_path)),
               launch.mods.program or str(self.bench), *launch.bench_args,
               *self.oversubscription_args(launch), "--json", json_path]
        if launch.mods.env:
            cmd = ["env", *(f"{k}={v}" for k, v in launch.mods.env.items()), *cmd]
        return cmd

    def run(self, launch: Launch, workdir: str) -> LaunchResult:
        self.check_layout(launch)
        os.makedirs(workdir, exist_ok=True)
        json_path = os.path.join(workdir, "records.jsonl")
        if os.path.exists(json_path):
            os.remove(json_path)
        env = self.impl.run_env()
        env.update(launch.mods.env)
        with _RUN_LOCK:
            result = run_process(self.command(launch, json_path), env, launch.timeout,
                                 workdir, json_path)
            if not result.clean:
                kill_leftovers(json_path)
        apply_labels(launch, result)
        return result
