"""`colltune run` passes SIGTERM / SIGINT on to the whole MPI job and reaps it, as
a batch system's kill or an outside `timeout` expects: under SMPI (smpirun and its
simulator), MPICH (mpiexec, hydra's proxy and ranks, each in a session of its own)
and Open MPI (prterun, every rank in its own process group). The program never
ends by itself (tests/data/run/forever.c waits in pause()); the test waits until
every rank is past MPI_Init, signals colltune only, and checks that when colltune
has exited (status 128 + signal) no process of the job is left."""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import CACHE, REPO, have_mpi


APP = os.path.join(REPO, "tests", "data", "run", "forever.c")


def _procs() -> dict[int, tuple[int, str]]:
    """{pid: (ppid, state)} of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            out[int(entry)] = (int(fields[1]), fields[0])
    return out


def _descendants(root: int) -> set[int]:
    procs = _procs()
    found, more = set(), {root}
    while more:
        found |= more
        more = {p for p, (ppid, _) in procs.items() if ppid in found and p not in found}
    return found - {root}


def _holding(marker: str) -> set[int]:
    """Live (not zombie) processes whose command line contains marker."""
    procs = _procs()
    pids = set()
    for pid, (_, state) in procs.items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read() and state != "Z":
                    pids.add(pid)
        except OSError:
            continue
    return pids


def _alive(pids: set[int]) -> set[int]:
    procs = _procs()
    return {p for p in pids if p in procs and procs[p][1] != "Z"}


def _read_until(proc: subprocess.Popen, needle: bytes, limit_s: float) -> bytes:
    """colltune's stdout up to needle (the job prints it once every rank is up)."""
    buf, end = b"", time.monotonic() + limit_s
    while needle not in buf:
        left = end - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            break
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    return buf


@pytest.mark.parametrize("backend,sig", [("sim", signal.SIGTERM), ("mpich", signal.SIGTERM),
                                         ("openmpi", signal.SIGTERM), ("mpich", signal.SIGINT)])
def test_signal_stops_and_reaps_the_job(workdir, backend, sig):
    args = ["--backend", "sim"] if backend == "sim" else ["--backend", "local", "--mpi", backend]
    if backend != "sim" and not have_mpi(backend):
        pytest.skip(f"{backend} not installed")
    marker = f"sigtest-{uuid.uuid4().hex[:12]}"
    env = dict(os.environ, COLLTUNE_CACHE_DIR=CACHE)
    proc = subprocess.Popen([sys.executable, "-m", "colltune.cli", "run", *args, "-n", "2",
                             "--", APP, marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    try:
        out = _read_until(proc, b"forever: ready", 240)
        job = _descendants(proc.pid) | _holding(marker)
        assert b"forever: ready" in out and _holding(marker), \
            (out, proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        proc.send_signal(sig)                 # colltune only, as `timeout` or a batch system does
        proc.wait(timeout=120)
        # colltune exits only once the job is gone: nothing of it is left now
        left = _alive(job) | _holding(marker)
        assert not left, f"left running after colltune exited: {left}"
        _, err = proc.communicate(timeout=60)     # the job no longer holds the pipes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _alive(job) | _holding(marker):  # never leave a job behind a failure
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    err = err.decode(errors="replace")
    assert proc.returncode == 128 + sig, err[-3000:]
    assert f"{signal.Signals(sig).name}: job stopped" in err
    # the SMPI hostfile went to a temporary folder, removed; nothing in the output folder
    assert not os.path.exists(workdir / "out" / "run.hostfile")
    m = re.search(r"-hostfile (\S+)", err)
    assert (m is not None) == (backend == "sim")
    if m:
        assert not os.path.exists(os.path.dirname(m.group(1)))
