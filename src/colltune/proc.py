"""Child processes that never outlive their timeout.

``subprocess.run(timeout=...)`` kills only the direct child: smpirun / mpiexec
leave their simulator or ranks running, orphaned and still burning a core.
"""
from __future__ import annotations

import os
import signal
import subprocess


def run_group(cmd: list[str], timeout: float | None = None, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a new process group; on timeout the whole group is killed
    and ``subprocess.TimeoutExpired`` raised (with the output collected so far)."""
    with subprocess.Popen(cmd, start_new_session=True, **kw) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill_group(proc)
            exc.output, exc.stderr = proc.communicate()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
