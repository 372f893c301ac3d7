"""Child processes that never outlive their timeout.

``subprocess.run(timeout=...)`` kills only the direct child: smpirun / mpiexec
leave their simulator or ranks running, orphaned and still burning a core.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time


class MemoryExhausted(RuntimeError):
    """The machine's available memory fell below the floor while a command ran;
    its process group was killed."""


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


def run_group(cmd: list[str], timeout: float | None = None, min_available_mb: int | None = None,
              **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a new process group; on timeout the whole group is killed
    and ``subprocess.TimeoutExpired`` raised (with the output collected so far).
    With ``min_available_mb`` the machine's available memory is checked every
    second and the group killed (``MemoryExhausted``) before the kernel's OOM killer
    picks a victim -- possibly another run."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with subprocess.Popen(cmd, start_new_session=True, **kw) as proc:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = left if min_available_mb is None else (1.0 if left is None else min(1.0, left))
            try:
                out, err = proc.communicate(timeout=step)
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired as exc:
                if deadline is not None and time.monotonic() >= deadline:
                    kill_group(proc)
                    exc.timeout = timeout
                    exc.output, exc.stderr = proc.communicate()
                    raise
            avail = available_mb() if min_available_mb is not None else None
            if avail is not None and avail < min_available_mb:
                kill_group(proc)
                proc.communicate()
                raise MemoryExhausted(f"{cmd[0]}: killed, available memory {avail} MiB "
                                      f"< floor {min_available_mb} MiB")


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
