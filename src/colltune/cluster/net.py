"""Create and remove an emulated cluster with iproute2, tc and util-linux.

Per host ``<name>-n<i>``: a network namespace (``ip netns``, so ``ip netns
exec`` also bind-mounts ``/etc/netns/<host>/hosts`` over /etc/hosts: every host
resolves every other), a UTS namespace persisted by bind mount (``unshare
--uts=FILE hostname <host>``), and a veth pair whose namespace end is ``eth0``
with address ``<subnet>.<i+2>``, the other end enslaved to bridge
``<name>-br`` (address ``<subnet>.1``, so this machine's own namespace, e.g. a
Slurm controller, reaches the hosts too). Shaping (optional) sits on every
host's eth0 egress: each packet between two hosts crosses exactly one shaper
(tbf / netem; without netem in the kernel, latency comes from the delay line
of links.py, which then replaces the veth pairs).
"""
from __future__ import annotations

import errno
import ipaddress
import json
import os
import shutil
import subprocess

from . import links, state
from .agent import write_agent
from .state import Cluster, ClusterError, Host

TOOLS = {"ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux",
         "unshare": "util-linux", "umount": "util-linux (mount)"}
DEFAULT_SUBNET = "10.213.0.0/24"
NETNS_ETC = "/etc/netns"


def _run(argv: list[str], what: str, ok_missing: bool = False) -> str:
    """Run a tool; raise ClusterError naming the step, command and error."""
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip()
        if ok_missing and any(s in err for s in ("Cannot find", "No such file", "not found",
                                                 "does not exist", "not mounted")):
            return ""
        raise ClusterError(f"{what}: `{' '.join(argv)}` failed (exit {proc.returncode}): {err}")
    return proc.stdout


def check_host() -> None:
    """Root and the tools: raise ClusterError saying what is missing."""
    if os.geteuid() != 0:
        raise ClusterError("an emulated cluster needs root (network namespaces, bridge, tc); "
                           "run as root")
    missing = [f"{t} (Debian package {p})" for t, p in TOOLS.items() if shutil.which(t) is None]
    if missing:
        raise ClusterError("missing tools: " + ", ".join(missing))


def _check_subnet(subnet: str, n: int, bridge: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as exc:
        raise ClusterError(f"--subnet {subnet!r}: {exc}") from None
    if not net.is_private:
        raise ClusterError(f"--subnet {subnet}: use a private range (addresses of these test "
                           f"hosts only)")
    if net.num_addresses - 3 < n:
        raise ClusterError(f"--subnet {subnet} has room for {net.num_addresses - 3} hosts, not {n}")
    out = json.loads(_run(["ip", "-j", "addr", "show"], "listing addresses") or "[]")
    for link in out:
        if link.get("ifname") == bridge:
            continue
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                mine = ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False)
                if mine.overlaps(net):
                    raise ClusterError(f"--subnet {subnet} overlaps {a['local']}/{a['prefixlen']} "
                                       f"on {link['ifname']}: choose another --subnet")
    return net


def _shaping(bandwidth: str | None, latency: str | None, netem: bool) -> list[str] | None:
    """The root qdisc of a host's eth0: netem for latency (with its own rate) when the
    kernel has it, else tbf for the bandwidth (a burst of 64 KiB lets TSO-sized
    packets through) and the delay line (links.py) for the latency."""
    if latency and netem:
        return ["netem", "delay", latency, "limit", "100000", *(["rate", bandwidth] if bandwidth else [])]
    if bandwidth:
        return ["tbf", "rate", bandwidth, "burst", "64kb", "latency", "200ms"]
    return None


def _hosts_file(cluster: Cluster) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             f"{cluster.bridge_ip}\t{cluster.name}-head {os.uname().nodename}"]
    lines += [f"{h.ip}\t{h.name}" for h in cluster.hosts]
    return "\n".join(lines) + "\n"


def plan(name: str, n: int, subnet: str, bandwidth: str | None, latency: str | None) -> Cluster:
    """The cluster `up` would create (names and addresses only; nothing is touched)."""
    state.check_name(name)
    if not 1 <= n <= 250:
        raise ClusterError(f"--hosts {n}: between 1 and 250")
    if latency:
        links.time_us(latency)         # a bad value fails here, before anything is made
    bridge = f"{name}-br"
    net = _check_subnet(subnet, n, bridge)
    addrs = list(net.hosts())
    sdir = os.path.join(state.run_dir(), name)
    hosts = [Host(f"{name}-n{i}", str(addrs[i + 1]), f"{name}-v{i}",
                  os.path.join(sdir, "uts", f"{name}-n{i}")) for i in range(n)]
    return Cluster(name, str(net), bridge, str(addrs[0]), sdir, os.path.join(sdir, "rsh"),
                   hosts, bandwidth, latency)


def _same(a: Cluster, b: Cluster) -> bool:
    return (a.subnet, [h.name for h in a.hosts], a.bandwidth, a.latency) == \
           (b.subnet, [h.name for h in b.hosts], b.bandwidth, b.latency)


def up(n: int, name: str = state.DEFAULT_NAME, subnet: str = DEFAULT_SUBNET, bandwidth: str | None = None,
       latency: str | None = None) -> Cluster:
    """Create cluster ``name`` with n hosts (idempotent for the same parameters).
    A failure part-way removes what was made and raises ClusterError."""
    check_host()
    existing = state.load(name)
    want = plan(name, n, subnet, bandwidth, latency)
    if existing is not None:
        if existing.complete and _same(existing, want) and not problems(existing):
            return existing
        raise ClusterError(f"cluster {name!r} already exists "
                           f"({'incomplete' if not existing.complete else 'different parameters'}"
                           f"): `colltune cluster down --name {name}` first")
    state.save(want)                   # first: `down` can always find what we made
    try:
        _create(want)
    except BaseException:
        down(name)
        raise
    want.complete = True
    state.save(want)
    return want


def _create(c: Cluster) -> None:
    os.makedirs(os.path.join(c.state_dir, "uts"), exist_ok=True)
    prefix = ipaddress.IPv4Network(c.subnet).prefixlen
    _run(["ip", "link", "add", c.bridge, "type", "bridge"], "creating the bridge")
    _run(["ip", "addr", "add", f"{c.bridge_ip}/{prefix}", "dev", c.bridge], "bridge address")
    _run(["ip", "link", "set", c.bridge, "up"], "bridge up")
    for h in c.hosts:
        _run(["ip", "netns", "add", h.name], f"host {h.name}: network namespace")
        _run(["ip", "-n", h.name, "link", "set", "lo", "up"], f"host {h.name}: loopback")
    netem = bool(c.latency) and links.has_netem(c.hosts[0].name)
    if c.latency and not netem:
        links.start_delay_line(c, _run)
    else:
        links.add_veths(c, _run)
    qdisc = _shaping(c.bandwidth, c.latency, netem)
    for h in c.hosts:
        ns = ["ip", "-n", h.name]
        _run(["ip", "link", "set", h.veth, "master", c.bridge], f"host {h.name}: bridge port")
        _run(["ip", "link", "set", h.veth, "up"], f"host {h.name}: bridge port up")
        _run([*ns, "addr", "add", f"{h.ip}/{prefix}", "dev", h.iface], f"host {h.name}: address")
        _run([*ns, "link", "set", h.iface, "up"], f"host {h.name}: {h.iface} up")
        open(h.uts, "a").close()
        _run(["unshare", f"--uts={h.uts}", "hostname", h.name], f"host {h.name}: UTS namespace")
        if qdisc:
            _run(["tc", "-n", h.name, "qdisc", "add", "dev", h.iface, "root", *qdisc],
                 f"host {h.name}: shaping")
    for h in c.hosts:                  # after all hosts exist: every host knows all names
        os.makedirs(os.path.join(NETNS_ETC, h.name), exist_ok=True)
        with open(os.path.join(NETNS_ETC, h.name, "hosts"), "w") as fh:
            fh.write(_hosts_file(c))
    write_agent(c)


def _netns_pids(ns: str) -> list[int]:
    out = _run(["ip", "netns", "pids", ns], f"processes of {ns}", ok_missing=True)
    return [int(p) for p in out.split()]


def _stop_processes(namespaces: list[str]) -> None:
    """Stop what still runs inside the cluster's namespaces."""
    links.terminate(lambda: [p for ns in namespaces for p in _netns_pids(ns)])


def _ours(name: str) -> list[str]:
    """Network namespaces named like this cluster's hosts (for a lost state file)."""
    out = _run(["ip", "netns", "list"], "listing network namespaces")
    pre = f"{name}-n"
    return [w.split()[0] for w in out.splitlines()
            if w.split() and w.split()[0].startswith(pre) and w.split()[0][len(pre):].isdigit()]


def down(name: str = state.DEFAULT_NAME) -> bool:
    """Remove everything of cluster ``name`` (idempotent; also after a partial up or
    a lost state file). Returns whether anything was there."""
    check_host()
    c = state.load(name)
    sdir = os.path.join(state.run_dir(), name)
    hosts = sorted(set(([h.name for h in c.hosts] if c else []) + _ours(name)))
    found = c is not None or bool(hosts)
    _stop_processes([h for h in hosts if os.path.exists(f"/run/netns/{h}")])
    if links.delay_line_pids(name):    # its taps go with it
        found = True
        links.terminate(lambda: links.delay_line_pids(name))
    # veths first: one dies with its namespace, but asynchronously (netns cleanup)
    for link in sorted(os.listdir("/sys/class/net")):
        if link.startswith(f"{name}-v") and link[len(name) + 2:].isdigit():
            found = True
            _run(["ip", "link", "del", link], "removing a veth", ok_missing=True)
    for h in hosts:
        uts = os.path.join(sdir, "uts", h)
        if os.path.ismount(uts):
            _run(["umount", uts], f"host {h}: UTS namespace", ok_missing=True)
        _run(["ip", "netns", "del", h], f"host {h}: network namespace", ok_missing=True)
        shutil.rmtree(os.path.join(NETNS_ETC, h), ignore_errors=True)
    bridge = c.bridge if c else f"{name}-br"
    if os.path.exists(f"/sys/class/net/{bridge}"):
        found = True
        _run(["ip", "link", "del", bridge], "removing the bridge", ok_missing=True)
    if os.path.isdir(sdir):
        found = True
        try:
            shutil.rmtree(sdir)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            raise ClusterError(f"{sdir}: still in use ({exc}); a UTS file is still mounted") from None
    state.forget(name)
    return found


def problems(c: Cluster) -> list[str]:
    """What is missing or wrong in a recorded cluster (empty: healthy)."""
    out = []
    if not c.complete:
        out.append("`up` did not complete")
    if not os.path.exists(f"/sys/class/net/{c.bridge}"):
        out.append(f"bridge {c.bridge} is missing")
    for h in c.hosts:
        if not os.path.exists(f"/run/netns/{h.name}"):
            out.append(f"{h.name}: network namespace missing")
            continue
        if not os.path.ismount(h.uts):
            out.append(f"{h.name}: UTS namespace file {h.uts} not mounted")
            continue
        proc = subprocess.run(["nsenter", f"--uts={h.uts}", "hostname"], capture_output=True,
                              text=True)
        if proc.stdout.strip() != h.name:
            out.append(f"{h.name}: hostname is {proc.stdout.strip()!r}")
    if c.delay_pid is not None and not links.delay_line_pids(c.name):
        out.append(f"the delay line (pid {c.delay_pid}) is not running")
    if c.complete and not os.access(c.agent, os.X_OK):
        out.append(f"ssh stand-in {c.agent} missing")
    return out
