"""colltune.proc.run_group: output, timeouts and the memory floor kill the
whole job (process group, and descendants in sessions of their own, as MPICH's
hydra makes its ranks); with forward_signals, SIGTERM / SIGINT sent to colltune
are passed on to the job, which is SIGKILLed after the grace period and reaped.
run_group returns or raises only once the job is gone, so no test here sleeps."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
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


@pytest.mark.parametrize("floor,setsid", [(None, ""), (1, ""), (None, "setsid ")])
def test_timeout_kills_the_grandchild(tmp_path, floor, setsid):
    """Also a grandchild that left the group for a session of its own."""
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(["sh", "-c", f"{setsid}sleep 60 & echo $! > {pidfile}; wait"], 1.5,
                  min_available_mb=floor)
    assert time.monotonic() - t0 < 30              # the timeout fired, not sleep's 60 s
    assert not _alive(int(pidfile.read_text()))


@pytest.mark.skipif(available_mb() is None, reason="no /proc/meminfo")
def test_memory_floor_kills_the_group(tmp_path):
    pidfile = tmp_path / "pid"
    floor = available_mb() + 100_000                # unreachable: fires at the first check
    with pytest.raises(MemoryExhausted, match=f"floor {floor} MiB"):
        run_group(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 30, min_available_mb=floor)
    assert not _alive(int(pidfile.read_text()))


CHILD = """
import sys
from colltune.proc import Interrupted, run_group
try:
    run_group(["sh", "-c", sys.argv[1]], forward_signals=True, grace_s=float(sys.argv[2]))
except Interrupted as exc:
    print("interrupted", exc.signum, flush=True)
    sys.exit(exc.status)
sys.exit(0)
"""


@pytest.mark.parametrize("sig,script", [
    # the job ends on the forwarded signal (sh and its child both get it)
    (signal.SIGTERM, "sleep 60 & echo $! > {pidfile}; wait"),
    # the job ignores it, its grandchild in a session of its own: SIGKILL after the grace
    (signal.SIGTERM, "trap '' TERM; setsid sleep 60 & echo $! > {pidfile}; wait"),
    # sh's background commands ignore SIGINT: SIGKILL after the grace
    (signal.SIGINT, "sleep 60 & echo $! > {pidfile}; wait"),
])
def test_signal_is_forwarded_then_the_job_killed_and_reaped(tmp_path, sig, script):
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, script.format(pidfile=pidfile), "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()):   # the job is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        grandchild = int(pidfile.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, (out, err)
    assert out == f"interrupted {int(sig)}\n"
    assert not _alive(grandchild)                  # gone before colltune exited


def test_forward_signals_off_the_main_thread_is_a_plain_run():
    import threading
    res = {}
    t = threading.Thread(target=lambda: res.update(r=run_group(["true"], 30, forward_signals=True)))
    t.start()
    t.join(60)
    assert res["r"].returncode == 0
