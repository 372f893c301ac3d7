"""The link between a host and the bridge: a veth pair, or (added latency on a
kernel without netem) a pair of TAP devices joined by the delay line (delay.py)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from .delay import MODULE
from . import state
from .state import Cluster, ClusterError

_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|ms|msec|us|usec)?\s*$")
_SCALE_US = {None: 1.0, "us": 1.0, "usec": 1.0, "ms": 1e3, "msec": 1e3, "s": 1e6, "sec": 1e6}


def time_us(text: str) -> float:
    """tc's time syntax (``50us``, ``20ms``, ``1s``; no unit = us) in microseconds."""
    m = _TIME.match(text or "")
    if not m:
        raise ClusterError(f"--latency {text!r}: expected a time such as 50us, 20ms, 1s")
    return float(m.group(1)) * _SCALE_US[m.group(2)]


def has_netem(netns: str) -> bool:
    """Whether the kernel offers the netem qdisc (tried on a scratch qdisc of lo)."""
    probe = subprocess.run(["tc", "-n", netns, "qdisc", "add", "dev", "lo", "root", "netem",
                            "delay", "1ms"], capture_output=True, text=True)
    if probe.returncode == 0:
        subprocess.run(["tc", "-n", netns, "qdisc", "del", "dev", "lo", "root"], capture_output=True)
        return True
    return False


def add_veths(c: Cluster, run) -> None:
    for h in c.hosts:
        run(["ip", "link", "add", h.veth, "type", "veth", "peer", "name", h.iface,
             "netns", h.name], f"host {h.name}: veth pair")


def start_delay_line(c: Cluster, run) -> int:
    """Start the delay line (its taps: <name>-e<i> moved into host i as eth0, and
    h.veth on the bridge side); returns its pid once the taps exist."""
    pairs = [f"{c.name}-e{i}:{h.veth}" for i, h in enumerate(c.hosts)]
    log = open(os.path.join(c.state_dir, "delay.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", MODULE, "--cluster", c.name, "--delay-us",
                             f"{time_us(c.latency):g}", *pairs], stdout=subprocess.PIPE,
                            stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    c.delay_pid = proc.pid
    with open(_pidfile(c.name), "w") as fh:
        fh.write(str(proc.pid))
    line = proc.stdout.readline().decode().strip()
    proc.stdout.close()
    if line != "ready":
        proc.wait(timeout=10)
        with open(os.path.join(c.state_dir, "delay.log")) as fh:
            raise ClusterError(f"the delay line did not start (exit {proc.returncode}): "
                               f"{fh.read()[-800:]}")
    for i, h in enumerate(c.hosts):
        run(["ip", "link", "set", f"{c.name}-e{i}", "netns", h.name, "name", h.iface],
            f"host {h.name}: delay line tap")
    return proc.pid


def _pidfile(name: str) -> str:
    return os.path.join(state.run_dir(), name, "delay.pid")


def delay_line_pids(name: str) -> list[int]:
    """The delay line process of cluster ``name`` (from its pid file, checked against
    the process's command line: a pid may have been reused)."""
    try:
        with open(_pidfile(name)) as fh:
            pid = int(fh.read())
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            alive = f"{MODULE}\0--cluster\0{name}\0".encode() in fh.read()
    except (OSError, ValueError):
        return []
    return [pid] if alive else []


def terminate(list_pids, wait_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, the processes list_pids() returns, until there are none."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = list_pids()
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and list_pids():
            time.sleep(0.05)
