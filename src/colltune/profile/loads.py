"""Per-link loads of a host-to-host traffic matrix, hop-bytes, the most loaded link.

Every message from host ``a`` to host ``b`` is charged, bytes and one message, to every
link of ``Topology.route(a, b)`` — SimGrid's own route, limiters and loopback included —
so the per-link bytes equal what SimGrid's network model carries for those messages
(SimGrid's cross-traffic, the small reverse flow it adds when ``network/crosstraffic``
is on, is not a byte count and is not included). A link that carries both directions
(``Link.directed`` false: SHARED/FATPIPE clusters, loopback, limiter, backbone)
accumulates both.

Hop-bytes: sum over host pairs of bytes x hops, hops = cables on the route
(``Link.is_cable``: loopback, limiter and backbone links are not hops; a host to itself
is 0 hops).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .topology import Link, Topology, TopologyError

__all__ = ["LinkLoads", "link_loads", "aggregate_ranks"]


@dataclass
class LinkLoads:
    """Loads of one traffic matrix on one topology. ``bytes`` and ``messages`` are arrays
    over ``topology.links`` (in that order); ``hop_bytes`` as in the module docstring;
    ``offered_bytes`` / ``offered_messages``: the matrix totals (a host's traffic to itself
    included); ``pairs``: host pairs with traffic."""
    topology: Topology
    bytes: np.ndarray
    messages: np.ndarray
    hop_bytes: float
    offered_bytes: float
    offered_messages: float
    pairs: int

    def of(self, link_id: str) -> tuple[float, float]:
        """(bytes, messages) of one link id."""
        k = self.topology.link_index(link_id)
        return float(self.bytes[k]), float(self.messages[k])

    def nonzero(self) -> dict[str, tuple[float, float]]:
        """Link id -> (bytes, messages) for every link that carried something."""
        links = list(self.topology.links.values())
        return {links[k].id: (float(self.bytes[k]), float(self.messages[k]))
                for k in np.flatnonzero((self.bytes > 0) | (self.messages > 0))}

    def _mask(self, include_local: bool, kinds: Sequence[str] | None) -> np.ndarray:
        links = self.topology.links.values()
        if kinds is not None:
            return np.array([l.kind in kinds for l in links], dtype=bool)
        if include_local:
            return np.ones(len(self.bytes), dtype=bool)
        return np.array([l.kind != "loopback" for l in links], dtype=bool)

    def top(self, k: int = 10, *, by: str = "bytes", include_local: bool = False,
            kinds: Sequence[str] | None = None) -> list[tuple[Link, float, float]]:
        """The ``k`` most loaded links as (Link, bytes, messages), by ``bytes`` or
        ``messages``; ties keep the topology's link order. Loopback links (intra-node
        traffic) are left out unless ``include_local``; ``kinds`` selects link kinds."""
        if by not in ("bytes", "messages"):
            raise ValueError("by must be 'bytes' or 'messages'")
        vals = self.bytes if by == "bytes" else self.messages
        mask = self._mask(include_local, kinds)
        idx = np.flatnonzero(mask)
        order = idx[np.argsort(-vals[idx], kind="stable")][:k]
        links = list(self.topology.links.values())
        return [(links[i], float(self.bytes[i]), float(self.messages[i])) for i in order]

    def most_loaded(self, **kw) -> tuple[Link, float, float] | None:
        """The most loaded link (see :meth:`top`), or None when nothing was sent."""
        best = self.top(1, **kw)
        if not best or (best[0][1] == 0 and best[0][2] == 0):
            return None
        return best[0]

    def rows(self, only_nonzero: bool = True) -> list[dict]:
        """One dict per link: id, src, dst, kind, directed, cable, sg_name, bandwidth,
        bytes, messages."""
        out = []
        for k, l in enumerate(self.topology.links.values()):
            if only_nonzero and not (self.bytes[k] or self.messages[k]):
                continue
            out.append({"id": l.id, "src": l.src, "dst": l.dst, "kind": l.kind,
                        "directed": l.directed, "cable": l.cable, "sg_name": l.sg_name,
                        "bandwidth": l.bandwidth, "bytes": float(self.bytes[k]),
                        "messages": float(self.messages[k])})
        return out


def _as_matrices(topo: Topology, traffic, messages, hosts):
    if isinstance(traffic, Mapping):
        names = list(hosts) if hosts is not None else None
        entries = []
        for (a, b), v in traffic.items():
            if isinstance(v, (tuple, list)):
                nb, nm = float(v[0]), float(v[1])
            else:
                nb, nm = float(v), 0.0
            entries.append((a, b, nb, nm))
        if messages is not None:
            raise TypeError("with a dict of pairs, give (bytes, messages) values, not a messages matrix")
        if names is not None:
            known = set(names)
            for a, b, *_ in entries:
                for h in (a, b):
                    if h not in known:
                        raise TopologyError(f"host '{h}' of the traffic is not in the hosts given")
        out = [(topo.host_index(a), topo.host_index(b), nb, nm) for a, b, nb, nm in entries]
        return len(out), iter(out)
    B = np.asarray(traffic, dtype=float)
    if B.ndim != 2 or B.shape[0] != B.shape[1]:
        raise TopologyError(f"traffic matrix must be square, got shape {B.shape}")
    M = np.zeros_like(B) if messages is None else np.asarray(messages, dtype=float)
    if M.shape != B.shape:
        raise TopologyError(f"messages matrix shape {M.shape} differs from bytes matrix {B.shape}")
    names = list(hosts) if hosts is not None else list(topo.hosts)
    if len(names) != B.shape[0]:
        raise TopologyError(f"traffic matrix is {B.shape[0]}x{B.shape[0]} but {len(names)} hosts label it")
    idx = [topo.host_index(h) for h in names]
    if (B < 0).any() or (M < 0).any():
        raise TopologyError("traffic matrix has negative entries")
    ii, jj = np.nonzero((B != 0) | (M != 0))
    gi, gj = np.asarray(idx)[ii].tolist(), np.asarray(idx)[jj].tolist()
    return len(ii), zip(gi, gj, B[ii, jj].tolist(), M[ii, jj].tolist())


def link_loads(topo: Topology, traffic, messages=None, *, hosts: Sequence[str] | None = None) -> LinkLoads:
    """Charge a host-to-host traffic matrix to the links of ``topo``.

    ``traffic``: an n x n array of bytes (row: sender, column: receiver) whose rows and
    columns are ``hosts`` (default: all of ``topo.hosts`` in order), with ``messages`` an
    array of the same shape (or None: message counts 0); or a dict
    ``{(src_host, dst_host): bytes | (bytes, messages)}``.
    """
    npairs, entries = _as_matrices(topo, traffic, messages, hosts)
    nl = len(topo.links)
    by = [0.0] * nl
    ms = [0.0] * nl
    cable = [link.is_cable for link in topo.links.values()]
    hop_bytes = 0.0
    off_b = off_m = 0.0
    for i, j, nb, nm in entries:
        off_b += nb
        off_m += nm
        hops = 0
        for k in topo.route_indices(i, j):
            by[k] += nb
            ms[k] += nm
            hops += cable[k]
        hop_bytes += nb * hops
    return LinkLoads(topo, np.asarray(by), np.asarray(ms), hop_bytes, off_b, off_m, npairs)


def aggregate_ranks(rank_matrix, rank_hosts: Sequence[str], hosts: Sequence[str] | None = None):
    """Host x host matrix from a rank x rank one: entry (a, b) sums the entries of every
    rank pair placed on hosts a and b. ``rank_hosts[r]``: host of rank r. ``hosts``: the
    host order of the result (default: hosts in order of first appearance). Returns
    (matrix, hosts)."""
    R = np.asarray(rank_matrix, dtype=float)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] != len(rank_hosts):
        raise TopologyError(f"rank matrix shape {R.shape} does not match {len(rank_hosts)} ranks")
    order = list(hosts) if hosts is not None else list(dict.fromkeys(rank_hosts))
    pos = {h: k for k, h in enumerate(order)}
    missing = [h for h in rank_hosts if h not in pos]
    if missing:
        raise TopologyError(f"rank placed on host '{missing[0]}' which is not in the host list")
    m = np.array([pos[h] for h in rank_hosts])
    n = len(order)
    out = np.zeros((n, n))
    np.add.at(out, (m[:, None], m[None, :]), R)
    return out, order
