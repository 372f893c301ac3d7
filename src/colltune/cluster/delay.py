"""Delay line: added latency between emulated hosts when the kernel has no netem.

``python -m colltune.cluster.delay --cluster NAME --delay-us D HOSTTAP:BRIDGETAP ...``
creates, per host, two TAP devices and copies Ethernet frames between them: the
host's end (moved into the host's namespace as eth0 by `up`) and the bridge's end
(a port of the cluster's bridge). Frames from a host towards the bridge wait D
microseconds (a FIFO per host: constant delay, order kept); frames towards a host
go at once. So every packet between two hosts is delayed once, at its sender's
egress — what ``netem delay`` on eth0 would do. The taps live as long as this
process (started and stopped by colltune.cluster.net); it prints ``ready`` once
they exist. Timing resolution is that of epoll (about 1 ms) plus a Python
process on a shared core: good for milliseconds, not for microseconds.
"""
from __future__ import annotations

import argparse
import collections
import errno
import fcntl
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000
MODULE = "colltune.cluster.delay"


def open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def _send(fd: int, frame: bytes) -> None:
    try:
        os.write(fd, frame)
    except OSError as exc:      # link down or queue full: the frame is lost, as on a wire
        if exc.errno not in (errno.EAGAIN, errno.EIO, errno.ENOBUFS, errno.EINVAL):
            raise


def serve(pairs: list[tuple[int, int]], delay_s: float) -> None:
    poll = select.epoll()
    peer: dict[int, int] = {}
    delayed: dict[int, collections.deque] = {}       # bridge-side fd -> (due, frame)
    for host_fd, bridge_fd in pairs:
        peer[host_fd], peer[bridge_fd] = bridge_fd, host_fd
        delayed[bridge_fd] = collections.deque()
        poll.register(host_fd, select.EPOLLIN)
        poll.register(bridge_fd, select.EPOLLIN)
    while True:
        heads = [q[0][0] for q in delayed.values() if q]
        timeout = max(0.0, min(heads) - time.monotonic()) if heads else -1
        for fd, _ in poll.poll(timeout):
            out = peer[fd]
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if out in delayed:
                    delayed[out].append((time.monotonic() + delay_s, frame))
                else:
                    _send(out, frame)
        now = time.monotonic()
        for out, q in delayed.items():
            while q and q[0][0] <= now:
                _send(out, q.popleft()[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    ap.add_argument("--cluster", required=True, help="cluster name (marks the process)")
    ap.add_argument("--delay-us", type=float, required=True)
    ap.add_argument("pairs", nargs="+", help="HOSTTAP:BRIDGETAP")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    pairs = []
    for item in args.pairs:
        host, _, bridge = item.partition(":")
        pairs.append((open_tap(host), open_tap(bridge)))
    print("ready", flush=True)
    serve(pairs, args.delay_us * 1e-6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
