"""Child processes that never outlive their timeout, nor colltune.

``subprocess.run(timeout=...)`` kills only the direct child: smpirun / mpiexec
leave their simulator or ranks running, orphaned and still burning a core.
Killing the launcher's process group is not enough either: MPICH's hydra puts its
proxy and every rank in a session of its own (``setsid``), and Open MPI's
launcher every rank in its own process group. So a job is the launcher's process
group plus every descendant of the launcher (``/proc`` parent links) and the
groups they lead, and a job is stopped by signalling all of them.

``run_group(..., forward_signals=True)`` (``colltune run``) also passes
SIGTERM / SIGINT / SIGHUP sent to colltune on to the whole job, waits
``grace_s`` for it to end, SIGKILLs what is left, reaps it and raises
``Interrupted`` (exit status 128 + signal number).
"""
from __future__ import annotations

import ctypes
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

GRACE_S = 5.0            # after a forwarded signal, before SIGKILL
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


class MemoryExhausted(RuntimeError):
    """The machine's available memory fell below the floor while a command ran;
    its process group was killed."""


class Interrupted(Exception):
    """colltune received ``signum`` while a job ran: the signal was passed on to the
    job, the job is gone (SIGKILLed after the grace period if need be) and reaped.
    ``status`` is the conventional exit status 128 + signum."""

    def __init__(self, signum: int, returncode: int | None = None):
        self.signum = signum
        self.status = 128 + signum
        self.returncode = returncode          # the launcher's, None if it was SIGKILLed
        super().__init__(f"{signal.Signals(signum).name}: job stopped")


def available_mb() -> int | None:
    """MemAvailable of /proc/meminfo in MiB (None where there is no such file).
    Not the child's RSS: SMPI_SHARED_MALLOC maps one block over and over, and RSS
    counts every mapping (a 192-rank 64 MiB bcast showed 25 GB RSS on a 23 GB
    machine while MemAvailable did not move)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


# -- the processes of a job --------------------------------------------------------

def _processes() -> dict[int, tuple[int, int, int, str, int]]:
    """{pid: (ppid, pgid, session, state, start time)} of every process, from
    /proc/PID/stat (the start time tells a reused pid from the process seen before)."""
    out = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()     # the name may hold spaces and ')'
        if len(fields) >= 20:
            out[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]), fields[0],
                               int(fields[19]))
    return out


class Job:
    """The processes of one launched job: the launcher, its process group, every
    descendant and every group or session a descendant leads. What it has seen once
    it remembers (pid and start time), so ranks orphaned by a dead launcher are
    still found. With ``adopt`` (colltune is their subreaper, one job at a time)
    colltune's own children in other sessions count too: the job's orphans."""

    def __init__(self, proc: subprocess.Popen, adopt: bool = False):
        self.proc = proc
        self.adopt = adopt
        self.seen: dict[int, int] = {}               # pid -> start time
        self.groups: set[int] = {proc.pid}           # start_new_session: pgid == sid == pid
        self.live_groups: dict[int, int] = {}        # live pid -> its pgid, at the last scan

    def scan(self) -> set[int]:
        """The job's live (not zombie) processes now; remembers them. Zombies that
        colltune adopted as subreaper are reaped."""
        procs = _processes()
        me, my_group, my_session = os.getpid(), os.getpgrp(), os.getsid(0)
        launcher = self.proc.pid
        for g in list(self.groups):                 # a group id reused by a stranger
            if g in procs and self.seen.get(g, procs[g][4]) != procs[g][4]:
                self.groups.discard(g)
        job = {p for p, (ppid, pgid, sid, _, start) in procs.items()
               if self.seen.get(p) == start or pgid in self.groups or sid in self.groups
               or (p == launcher and self.proc.returncode is None)
               or (self.adopt and ppid == me and sid != my_session)}
        grown = True
        while grown:                                  # descendants of the job's processes
            more = {p for p, (ppid, *_) in procs.items() if ppid in job and p not in job}
            job |= more
            grown = bool(more)
        job.discard(me)
        for p in job:
            ppid, pgid, sid, state, start = procs[p]
            self.seen[p] = start
            if pgid != my_group:
                self.groups.add(pgid)
            if sid != my_session:
                self.groups.add(sid)
            if state == "Z" and ppid == me and p != launcher:
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass
        self.live_groups = {p: procs[p][1] for p in job if procs[p][3] != "Z"}
        return set(self.live_groups)

    def signal(self, sig: int) -> set[int]:
        """Send sig once to every live process of the job: to its groups, and to
        each process that is in none of them; returns the processes."""
        live = self.scan()
        my_group, sent = os.getpgrp(), set()
        for g in self.groups:
            if g != my_group:
                try:
                    os.killpg(g, sig)
                    sent.add(g)
                except (ProcessLookupError, PermissionError):
                    pass
        for p, pgid in self.live_groups.items():
            if pgid not in sent:
                try:
                    os.kill(p, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        return live

    def wait_gone(self, deadline: float) -> bool:
        """Reap the launcher and wait until no process of the job is left or the
        deadline passes; True when none is left."""
        while True:
            self.proc.poll()
            if self.proc.returncode is not None and not self.scan():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def kill(self, wait_s: float = 10.0) -> bool:
        """SIGKILL every process of the job, reap, wait until they are gone."""
        self.signal(signal.SIGKILL)
        remove_launcher_session(self.proc)
        gone = self.wait_gone(time.monotonic() + wait_s)
        if not gone:                        # a rank being spawned: once more
            self.signal(signal.SIGKILL)
            gone = self.wait_gone(time.monotonic() + wait_s)
        return gone


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a job started with ``start_new_session=True``: its process group and
    every descendant (ranks in sessions of their own included)."""
    Job(proc).signal(signal.SIGKILL)
    remove_launcher_session(proc)


# -- what a SIGKILLed launcher leaves behind ---------------------------------------

def _exited_unreaped(proc: subprocess.Popen, wait_s: float) -> bool:
    """Wait until the signalled launcher has exited without reaping it: True when it
    is a zombie now, so its pid cannot be given to a new process yet."""
    if proc.returncode is not None:
        return False
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
        except ChildProcessError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def session_dirs(pid: int) -> list[str]:
    """PRRTE session directories of launcher ``pid``: ``<tmpdir>/<name>.<pid>`` holding
    its PMIx rendezvous files (``pmix.*``); tmpdir as PRRTE picks it (TMPDIR, TEMP,
    TMP, /tmp)."""
    bases = {os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")}
    bases |= {tempfile.gettempdir(), "/tmp"}
    found = []
    for base in sorted(b for b in bases if b and os.path.isdir(b)):
        for d in glob.glob(os.path.join(glob.escape(base), f"*.{pid}")):
            try:
                if not os.path.islink(d) and any(n.startswith("pmix.") for n in os.listdir(d)):
                    found.append(d)
            except OSError:
                continue
    return found


def remove_launcher_session(proc: subprocess.Popen, wait_s: float = 10.0) -> list[str]:
    """Open MPI's launcher removes its session directory, named after its pid, when
    it exits, but not when SIGKILLed. A later launcher given the same pid then finds
    the stale rendezvous files and dies ("The PMIx server's listener thread failed
    to start", exit 213). So once a killed launcher is a zombie, and before it is
    reaped and its pid free again, its session directory goes too."""
    if not _exited_unreaped(proc, wait_s):
        return []
    dirs = session_dirs(proc.pid)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    return dirs


# -- signal forwarding ----------------------------------------------------------------

def _subreaper(on: bool) -> bool | None:
    """Make colltune the reaper of its orphaned descendants (Linux); returns the
    previous state, None where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prev = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(prev), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
        return bool(prev.value)
    except (OSError, AttributeError):
        return None


class _Forwarding:
    """Handlers for FORWARDED that only record the signal (the loop acts on it)."""

    def __init__(self):
        self.received: list[int] = []
        self.saved: dict[int, object] = {}
        self.subreaper: bool | None = None

    def __enter__(self):
        for sig in FORWARDED:
            self.saved[sig] = signal.signal(sig, self._on)
        self.subreaper = _subreaper(True)
        return self

    def _on(self, signum, frame) -> None:
        self.received.append(signum)

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if self.subreaper is False:
            _subreaper(False)
        return False


def _stop(job: Job, fwd: _Forwarding, grace_s: float) -> Interrupted:
    """Pass the first signal on to the whole job, give it grace_s (a second signal
    cuts it short), SIGKILL what is left, reap."""
    first = fwd.received[0]
    job.signal(first)
    deadline = time.monotonic() + grace_s
    while len(fwd.received) == 1 and time.monotonic() < deadline:
        if job.wait_gone(min(deadline, time.monotonic() + 0.1)):
            break
    job.kill()
    job.proc.wait()
    return Interrupted(first, job.proc.returncode)


def run_group(cmd: list[str], timeout: float | None = None, min_available_mb: int | None = None,
              forward_signals: bool = False, grace_s: float = GRACE_S,
              **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a new session; on timeout the whole job is killed
    (process group and every descendant) and ``subprocess.TimeoutExpired`` raised
    (with the output collected so far).
    With ``min_available_mb`` the machine's available memory is checked every
    second and the job killed (``MemoryExhausted``) before the kernel's OOM killer
    picks a victim -- possibly another run.
    With ``forward_signals`` (main thread only) SIGTERM, SIGINT and SIGHUP sent to
    colltune are passed on to the whole job, which gets ``grace_s`` seconds to end
    before it is SIGKILLed; then ``Interrupted`` is raised."""
    if forward_signals and threading.current_thread() is not threading.main_thread():
        forward_signals = False
    deadline = None if timeout is None else time.monotonic() + timeout
    fwd = _Forwarding() if forward_signals else None
    if fwd is not None:
        fwd.__enter__()
    try:
        with subprocess.Popen(cmd, start_new_session=True, **kw) as proc:
            job = Job(proc, adopt=fwd is not None and fwd.subreaper is not None)
            while True:
                if fwd is not None and fwd.received:
                    exc = _stop(job, fwd, grace_s)
                    proc.communicate()
                    raise exc
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                step = left
                if min_available_mb is not None:
                    step = 1.0 if step is None else min(1.0, step)
                if fwd is not None:
                    step = 0.2 if step is None else min(0.2, step)
                try:
                    out, err = proc.communicate(timeout=step)
                    if fwd is not None and fwd.received:     # it ended on our signal
                        job.proc.wait()
                        exc = _stop(job, fwd, grace_s)
                        raise exc
                    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
                except subprocess.TimeoutExpired as exc:
                    if deadline is not None and time.monotonic() >= deadline:
                        job.kill()
                        exc.timeout = timeout
                        exc.output, exc.stderr = proc.communicate()
                        raise
                avail = available_mb() if min_available_mb is not None else None
                if avail is not None and avail < min_available_mb:
                    job.kill()
                    proc.communicate()
                    raise MemoryExhausted(f"{cmd[0]}: killed, available memory {avail} MiB "
                                          f"< floor {min_available_mb} MiB")
    finally:
        if fwd is not None:
            fwd.__exit__(None, None, None)
