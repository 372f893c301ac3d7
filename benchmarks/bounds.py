"""Lower bounds on bcast/allreduce times from a platform's files, one definition for every
benchmark that prints a distance to a bound (han_vs_selectors, han_breakdown, best_of_both,
best_of_both_links, topology_twin)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import lru_cache


@lru_cache(maxsize=None)
def injection_bw(xml: str) -> tuple[float, float]:
    """The cluster's per-link and loopback bandwidths (`bw="12.5GBps"`) in bytes/s (parsed once
    per file: the reports ask for every point)."""
    c = next(ET.parse(xml).getroot().iter("cluster"))

    def val(key):
        m = re.fullmatch(r"([\d.]+)([GMk]?)Bps", c.get(key, ""))
        if not m:
            raise SystemExit(f"{xml}: cannot read cluster {key}={c.get(key)!r}")
        return float(m[1]) * {"G": 1e9, "M": 1e6, "k": 1e3, "": 1}[m[2]]
    return val("bw"), val("loopback_bw")


def network_bound(bw: float, coll: str, size: int, nodes: int) -> float:
    """LBnet (s): every node takes in m bytes of a bcast through its link of bandwidth bw;
    an allreduce over N nodes sends and receives 2m(N-1)/N per node (reduce-scatter +
    allgather, the bandwidth-optimal volume)."""
    return size / bw if coll == "bcast" else 2 * size * (nodes - 1) / nodes / bw


def node_bounds(plat, coll: str, size: int, nodes: int, ppn: int, charged: bool = True) -> dict:
    """Lower bounds (s) on a bcast/allreduce of `size` bytes, by what limits it:
    'network' = LBnet; 'copy': every rank ends with the m bytes of the result, taken in
    through its node's NIC (B, shared by the ppn ranks) or from a core of its node at the
    core's copy rate Rc (the platform's loopback bandwidth = its memcpy charge rate), so for
    p > 1 p m <= (p Rc + B) T: T >= m / (Rc + B/p); 'reduction': an allreduce combines
    P = N p vectors, (P-1) m bytes of arithmetic spread at best over the P cores at the
    platform's charge rate R (only where the reductions are charged: SMPI's built-ins and
    colltune's with charging off reduce for free). SimGrid's FATPIPE loopback would let one
    rank take in several flows at Rc each, which no core does: 'copy' is the hardware's
    bound, not the simulator's."""
    bw, copy_bw = injection_bw(plat.xml_path)
    out = {"network": network_bound(bw, coll, size, nodes)}
    if ppn > 1:
        out["copy"] = size / (copy_bw + bw / ppn)
    rate = plat.charge_rates.get("reduction_bytes_per_s")
    if coll == "allreduce" and charged and rate:
        procs = nodes * ppn
        out["reduction"] = size * (procs - 1) / procs / rate
    return out
