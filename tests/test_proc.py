"""colltune.proc.run_group: output, timeouts and the memory floor kill the
whole process group (smpirun's simulator / mpiexec's ranks included)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from colltune.proc import MemoryExhausted, available_mb, run_group


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:          # a zombie is dead too
        return f.read().split()[2] != "Z"


def test_output_and_return_code():
    r = run_group(["sh", "-c", "echo out; echo err >&2; exit 3"], 30,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")


@pytest.mark.parametrize("floor", [None, 1])
def test_timeout_kills_the_grandchild(tmp_path, floor):
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 1.5, min_available_mb=floor)
    assert time.monotonic() - t0 < 10
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


@pytest.mark.skipif(available_mb() is None, reason="no /proc/meminfo")
def test_memory_floor_kills_the_group(tmp_path):
    pidfile = tmp_path / "pid"
    floor = available_mb() + 100_000                # unreachable: fires at the first check
    with pytest.raises(MemoryExhausted, match=f"floor {floor} MiB"):
        run_group(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 30, min_available_mb=floor)
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))
