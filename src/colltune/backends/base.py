"""The backend interface: run one launch of the native benchmark somewhere.

A backend is small: it knows how to start ``colltune-bench`` on ``nodes`` x
``ppn`` processes with extra launcher arguments/environment (from the algorithm
provider), enforce a timeout, and hand back the JSON records it printed.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..proc import kill_group
from ..providers.base import LaunchMods, Provider


@dataclass
class Launch:
    nodes: int
    ppn: int
    bench_args: list[str]
    mods: LaunchMods = field(default_factory=LaunchMods)
    timeout: float = 300.0
    hosts: list[str] | None = None      # placed launch: run on these hosts (None = backend's default)


@dataclass
class LaunchResult:
    command: list[str]
    exit_code: int | None
    timed_out: bool
    wall_s: float
    header: dict[str, Any] | None
    records: list[dict[str, Any]]
    done: bool                      # the bench printed its closing record
    output_tail: str
    # Wall-clock end, taken when the result is built: before the backend gives its
    # hosts back, so a store's started/finished intervals never overlap on one host.
    ended_at: float = field(default_factory=time.time)

    @property
    def clean(self) -> bool:
        return self.done and not self.timed_out and self.exit_code in (0, 3)


def read_records(path: str) -> tuple[dict | None, list[dict], bool]:
    """Parse the bench's JSON lines; a torn last line (crash mid-write) is ignored."""
    header, records, done = None, [], False
    if not os.path.exists(path):
        return header, records, done
    with open(path) as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = rec.get("type")
            if kind == "header":
                header = rec
            elif kind == "measurement":
                records.append(rec)
            elif kind == "done":
                done = True
    return header, records, done


# launches running now (campaign workers' threads): an interrupted campaign kills them
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()
_STOPPED = False        # set by stop_launches: no launch starts until allow_launches


class LaunchesStopped(Exception):
    """A worker asked for a launch after the campaign was stopped (Ctrl-C, SIGTERM)."""


def stop_launches() -> None:
    """Kill every launch running now (process group and descendants) and start no other:
    Ctrl-C on a campaign must not wait for the launches in flight, and a worker between
    two launches had started a new one after a SIGTERM (a user's review: a fresh prterun
    3 s after the signal, colltune gone 9-33 s later)."""
    global _STOPPED
    with _LIVE_LOCK:
        _STOPPED = True
        live = list(_LIVE)
    for proc in live:
        if proc.poll() is None:
            kill_group(proc)


def start_launch(cmd: list[str], **popen) -> subprocess.Popen:
    """Popen in a session of its own, registered for stop_launches at once; refused
    (LaunchesStopped) once the campaign was stopped. end_launch when it has ended."""
    with _LIVE_LOCK:
        if _STOPPED:
            raise LaunchesStopped("the campaign was stopped")
        proc = subprocess.Popen(cmd, start_new_session=True, **popen)
        _LIVE.add(proc)
    return proc


def end_launch(proc: subprocess.Popen) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def allow_launches() -> None:
    """A new campaign may launch again (after an earlier one was stopped)."""
    global _STOPPED
    with _LIVE_LOCK:
        _STOPPED = False


def run_process(cmd: list[str], env: dict[str, str], timeout: float, cwd: str,
                json_path: str) -> LaunchResult:
    """Run a launcher command in its own process group; kill the group on timeout."""
    start = time.monotonic()
    log_path = os.path.join(cwd, "launch.log")
    with open(log_path, "w") as log:
        proc = start_launch(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        launched = time.monotonic()       # wait()'s deadline counts from here, so does ours
        timed_out = False
        try:
            proc.wait(timeout=timeout)
            # Popen.wait polls the child before it reads the clock: a waiter starved of
            # CPU past the deadline finds a launch that overran it already ended and
            # returns normally. What the waiter cannot prove ended in time is a timeout.
            timed_out = time.monotonic() - launched > timeout
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            proc.wait()
        finally:
            end_launch(proc)
    with open(log_path, errors="replace") as fh:
        tail = fh.read()[-4000:]
    header, records, done = read_records(json_path)
    return LaunchResult(cmd, None if timed_out else proc.returncode, timed_out,
                        time.monotonic() - start, header, records, done, tail)


# The setting ``provider`` naming the backend's MPI library, whatever it is.
LIBRARY = "library"


def choose_provider(backend, library: Provider) -> Provider:
    """The provider a backend's launches use: its MPI library's own (``library``,
    or its own name), or the one named by the setting ``provider`` built on top
    of it (``colltune``: colltune's algorithms, the library's selectors as
    baselines; ``both``: the two as one candidate set)."""
    wanted = backend.settings.values.get("provider") or library.name
    if wanted in (library.name, LIBRARY):
        return library
    from ..errors import ConfigError
    from ..providers import PROVIDERS
    cls = PROVIDERS.get(wanted)
    if backend.name not in getattr(cls, "backends", ()):
        raise ConfigError(f"provider {wanted!r} does not run on backend {backend.name!r} "
                          f"(it runs on {', '.join(cls.backends) or 'none'})")
    if not cls.on_library:
        raise ConfigError(f"provider {wanted!r}: this {backend.name} run uses {library.name}, whose "
                          f"own algorithms are provider {library.name!r} (or 'library'); for "
                          f"{wanted}'s, name its MPI (--mpi {wanted})")
    return cls(backend, library)


def apply_labels(launch: Launch, result: LaunchResult) -> None:
    """Add the provider's labels (e.g. what really ran) to every record."""
    label = getattr(launch.mods, "label", None)
    if callable(label):
        for rec in result.records:
            rec["labels"] = {**(rec.get("labels") or {}), **label(rec)}


class Backend:
    name = "?"
    description = ""
    # provenance items that are not part of a point's store key but say how it was
    # measured (its run's settings record them): a stored point measured with other
    # values is measured again (e.g. a platform sidecar's SMPI settings, edited since)
    run_settings: tuple[str, ...] = ()
    # What commands ask of a backend, instead of comparing its name:
    simulated = False           # SimGrid SMPI: simulated timings, the platform setting names the machine
    real_library = False        # the real MPI library (--mpi) runs on this machine (local, netns)
    emulated_hosts = False      # ... across emulated hosts; the platform setting names the cluster
    shares_host_cores = False   # every rank runs on this machine's cores (commands.oversubscribed_note)

    def prepare(self) -> None:
        """Check/install what this backend needs; raise BackendError naming what is missing."""
        raise NotImplementedError

    def provider(self) -> Provider:
        raise NotImplementedError

    def provenance(self) -> dict[str, Any]:
        raise NotImplementedError

    def max_ppn(self) -> int:
        raise NotImplementedError

    def max_nodes(self) -> int:
        raise NotImplementedError

    def check_layout(self, launch: Launch) -> None:
        """Raise a ColltuneError naming the layout when it does not fit this backend's
        machine (backends with their own words override it: local, netns)."""
        from ..errors import ColltuneError
        if launch.nodes > self.max_nodes() or launch.ppn > self.max_ppn():
            raise ColltuneError(f"layout {launch.nodes}x{launch.ppn} does not fit platform "
                                f"{self.max_nodes()} nodes x {self.max_ppn()} cores")

    def run(self, launch: Launch, workdir: str) -> LaunchResult:
        raise NotImplementedError
