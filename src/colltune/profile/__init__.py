"""Traffic profiling on the network topology (issue 17, docs/profile.md).

- counting: libcolltune writes per-rank counts (``colltune run --profile``,
  docs/profile-counting.md); ``counts.load_profile`` merges them with the simulator's
  message trace (``simtrace``), Open MPI's monitoring counters and modelled MPICH
  traffic (``model``) into one :class:`TrafficProfile` (docs/profile-files.md);
- topologies: SimGrid platforms (``topology``, ``routing``, checked against SimGrid's
  own routes), InfiniBand fabrics (``ib``), Slurm trees (``slurm_topo``), the emulated
  cluster (``emulated``), picked by ``resolve.resolve_topology`` (docs/profile-topologies.md);
- loads and pictures: ``loads.link_loads``, ``files.write_traffic`` (versioned JSON/CSV),
  ``report.render`` (HTML + SVG), ``whatif`` (another placement) (docs/profile-report.md).
"""
from __future__ import annotations

from .counts import ProfileError, TrafficProfile, load_profile
from .files import write_traffic
from .loads import LinkLoads, aggregate_ranks, link_loads
from .resolve import map_hosts, resolve_topology
from .topology import Link, Node, Topology, TopologyError, load_topology, parse_bandwidth, parse_time

__all__ = ["Link", "LinkLoads", "Node", "ProfileError", "Topology", "TopologyError",
           "TrafficProfile", "aggregate_ranks", "link_loads", "load_profile", "load_topology",
           "map_hosts", "parse_bandwidth", "parse_time", "resolve_topology", "write_traffic"]
