"""Traffic profiling on the network topology (issue 17).

Built so far: the topology model and SimGrid 3.32's routing for one-cluster SimGrid
platforms (``topology``, ``routing``, checked against SimGrid's own routes with
``simgrid_routes``), and per-link loads of a host-to-host traffic matrix (``loads``).
Not built yet: counting (``colltune run --profile``), InfiniBand / Slurm / emulated
topologies, reports and drawings. See docs/profile.md.
"""
from __future__ import annotations

from .loads import LinkLoads, aggregate_ranks, link_loads
from .topology import Link, Node, Topology, TopologyError, load_topology, parse_bandwidth, parse_time

__all__ = ["Link", "LinkLoads", "Node", "Topology", "TopologyError", "aggregate_ranks",
           "link_loads", "load_topology", "parse_bandwidth", "parse_time"]
