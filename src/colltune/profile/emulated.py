"""The emulated cluster of ``colltune cluster`` as a :class:`Topology`: a star.

Every host (a network namespace ``<name>-n<i>``, whose UTS namespace makes
``gethostname()`` - what MPI_Get_processor_name returns there - equal to that name) has
one link to the bridge ``<name>-br``; every packet between two hosts crosses the sender's
link up and the receiver's link down (docs/cluster.md). The host names come from the
cluster's saved state (``colltune.cluster.state``), so no root is needed to read it.

Links: ``ct-n0 -> ct-br`` (kind ``up``: the host's eth0 egress, where ``--bandwidth`` /
``--latency`` shaping sits, so it carries their values) and ``ct-br -> ct-n0`` (``down``,
unshaped: bandwidth 0 = not limited, latency 0). With latency on a kernel without netem
the link is a TAP pair and the delay line; the path is the same. A host to itself:
loopback or shared memory, no link (an empty route).
"""
from __future__ import annotations

import re

from ..cluster import state as cstate
from ..cluster.links import time_us
from ..cluster.state import Cluster, ClusterError
from .topology import Node, Topology, TopologyError

__all__ = ["emulated_topology", "tc_rate"]

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.I)
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
           "ki": 1024.0, "mi": 1024.0 ** 2, "gi": 1024.0 ** 3, "ti": 1024.0 ** 4}


def tc_rate(text: str) -> float:
    """tc's rate syntax in bytes/s: ``1gbit``, ``100mbit``, ``10mibit`` (bits/s), ``125mbps``
    (bytes/s), a bare number = bits/s (tc(8) RATES)."""
    m = _RATE.match(text or "")
    unit = m.group(2).lower() if m else ""
    for suffix, per_byte in (("bit", 8.0), ("bps", 1.0), ("", 8.0)):
        if m and unit.endswith(suffix) and unit[:len(unit) - len(suffix)] in _PREFIX:
            return float(m.group(1)) * _PREFIX[unit[:len(unit) - len(suffix)]] / per_byte
    raise TopologyError(f"emulated cluster bandwidth '{text}': not a tc rate such as 1gbit, 100mbit, 125mbps")


def emulated_topology(cluster: str | Cluster | None = None) -> Topology:
    """Star topology of an emulated cluster: a :class:`Cluster`, the name of one with a
    saved state, or ``None`` / ``"emulated"`` for the only one that is up."""
    if cluster is None or cluster == "emulated":
        up = cstate.names()
        if len(up) != 1:
            raise TopologyError(f"'emulated': {'no emulated cluster is up' if not up else 'several are up: ' + ', '.join(up)}"
                                f" (state files in {cstate.run_dir()}); name one, or `colltune cluster up --hosts N`")
        cluster = up[0]
    if isinstance(cluster, str):
        try:
            c = cstate.load(cluster)
        except ClusterError as exc:
            raise TopologyError(str(exc)) from None
        if c is None:
            raise TopologyError(f"no emulated cluster '{cluster}': no state file {cstate.state_path(cluster)} "
                                f"(clusters up: {', '.join(cstate.names()) or 'none'})")
    else:
        c = cluster
    if not c.hosts:
        raise TopologyError(f"emulated cluster '{c.name}' has no hosts")
    try:
        lat = time_us(c.latency) * 1e-6 if c.latency else 0.0
    except ClusterError as exc:
        raise TopologyError(str(exc)) from None
    bw = tc_rate(c.bandwidth) if c.bandwidth else 0.0
    t = Topology(c.name, "EMULATED", {}, cstate.state_path(c.name))
    for i, h in enumerate(c.hosts):
        t.add_node(Node(h.name, "host", 0, i))
    t.add_node(Node(c.bridge, "switch", 1, 0))
    for h in c.hosts:
        t.add_link(h.name, c.bridge, bandwidth=bw, latency=lat, kind="up", sg_name=f"{h.name} {h.iface}")
        t.add_link(c.bridge, h.name, bandwidth=0.0, latency=0.0, kind="down", sg_name=h.veth)
    hosts = c.hosts

    def route(i: int, j: int) -> list[str]:
        return [] if i == j else [f"{hosts[i].name} {hosts[i].iface}", hosts[j].veth]

    t.params = {"routing": "star: sender's link to the bridge, bridge to the receiver",
                "bridge": c.bridge, "subnet": c.subnet, "bandwidth": c.bandwidth, "latency": c.latency,
                "addresses": {h.name: h.ip for h in c.hosts}, "complete": c.complete}
    return t.seal(route)
