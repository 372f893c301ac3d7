"""Network topology model of a SimGrid platform: nodes, directed links, routes.

A :class:`Topology` holds the network nodes (hosts, fat-tree switches, dragonfly
routers, the crossbar of a FLAT cluster), every link SimGrid creates for the platform
(with its bandwidth, latency and SimGrid name) and the routing function SimGrid 3.32
uses between two hosts (``colltune.profile.routing``). Load one with
:func:`load_topology` from a bundled platform name, a :class:`colltune.platforms.Platform`
or the path of a SimGrid 4.1 XML file holding one ``<cluster>``.

Links. SimGrid models a full-duplex cable (``sharing_policy="SPLITDUPLEX"``, the
default) as two links ``<name>_UP`` and ``<name>_DOWN``, one per direction; here they
are two directed :class:`Link` objects. With ``SHARED`` or ``FATPIPE`` clusters one
SimGrid link carries both directions: it is one :class:`Link` with ``directed=False``
(its id uses ``<->``). Per-host loopback links (``loopback_bw``/``loopback_lat``),
per-node limiters (``limiter_link``, also created for every fat-tree switch and
dragonfly router) and a FLAT cluster's backbone (``bb_bw``) are links too, because
SimGrid puts them on routes and charges bytes to them.

Link ids are stable and readable: ``"node-3 -> L1-switch0"``, ``"L1-switch3 -> L2-switch0 #1"``
(``#k``: the k-th of parallel cables between the same two nodes, only when there are
several), ``"g0-c1-r5 -> g0-c3-r5"`` (dragonfly router: group, chassis, router),
``"node-3 loopback"``, ``"L1-switch0 limiter"``, ``"switch backbone"``.
``Link.sg_name`` is SimGrid's own name of the link (``link_from_0_127_0_UP``), the key
to compare with SimGrid's routes.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..platforms import units

__all__ = ["Node", "Link", "Topology", "TopologyError", "load_topology", "parse_bandwidth",
           "parse_time", "KINDS"]

KINDS = ("FLAT", "FAT_TREE", "DRAGONFLY", "TORUS")
#: link kinds that are not a cable between two network nodes (no hop, not drawn as a cable)
LOCAL_KINDS = frozenset({"loopback", "limiter"})


class TopologyError(Exception):
    """A platform cannot be modelled (unsupported shape, bad parameters, unknown host)."""


@dataclass(frozen=True)
class Node:
    """A network node. ``kind``: ``host``, ``switch`` (fat-tree, FLAT crossbar) or
    ``router`` (dragonfly). ``level``: 0 for hosts, the fat-tree level of a switch,
    1 for dragonfly routers and the FLAT crossbar. ``position``: SimGrid's index of the
    node among those of its level. ``coords``: dragonfly (group, chassis, router[, node])
    or torus coordinates; empty otherwise. ``sg_id``: SimGrid's internal node id where it
    has one (fat-tree node id, dragonfly router index), else -1."""
    id: str
    kind: str
    level: int
    position: int
    coords: tuple[int, ...] = ()
    sg_id: int = -1


@dataclass(frozen=True)
class Link:
    """One SimGrid link. ``src -> dst`` is the direction it carries (``directed``); an
    undirected link (one SimGrid link for both directions: SHARED/FATPIPE clusters,
    loopback, limiter, backbone) lists its two ends in creation order, or the same node
    twice for loopback/limiter/backbone. ``bandwidth`` in bytes/s, ``latency`` in s, as
    SimGrid has them (a dragonfly link of count c has c x the cluster bw). ``kind``:
    ``up``/``down`` (fat-tree; FLAT host link), ``local-up``/``local-down`` (dragonfly
    node-router), ``green``/``black``/``blue`` (dragonfly), ``torus``, ``backbone``,
    ``loopback``, ``limiter``. ``cable``: index among parallel cables between the same
    nodes (SimGrid's order). ``sharing``: ``SHARED`` or ``FATPIPE``, SimGrid's policy of
    this (per-direction) link. ``count``: physical links it stands for (dragonfly
    green/black/blue counts; 1 elsewhere)."""
    id: str
    src: str
    dst: str
    bandwidth: float
    latency: float
    kind: str
    sg_name: str
    directed: bool = True
    cable: int = 0
    sharing: str = "SHARED"
    count: int = 1

    @property
    def is_cable(self) -> bool:
        """True for links between two different network nodes (counted as hops)."""
        return self.kind not in LOCAL_KINDS and self.kind != "backbone"


class Topology:
    """Nodes, links and host-to-host routing of one platform (see module docstring).

    ``hosts``: host names in SimGrid's order (the cluster's radical order).
    ``nodes``: node id -> :class:`Node`, hosts first. ``links``: link id -> :class:`Link`
    in SimGrid's creation order. ``route(a, b)``: the list of links a message from host
    ``a`` to host ``b`` crosses, in order, exactly as SimGrid 3.32 routes it."""

    ROUTE_CACHE = 300_000

    def __init__(self, name: str, kind: str, params: dict, source: str):
        self.name = name
        self.kind = kind
        self.params = params
        self.source = source
        self.hosts: list[str] = []
        self.nodes: dict[str, Node] = {}
        self.links: dict[str, Link] = {}
        self._pending: list[dict] = []
        self._by_sg: dict[str, Link] = {}
        self._host_index: dict[str, int] = {}
        self._router: Callable[[int, int], list[str]] | None = None
        self._route_cache: dict[int, tuple[int, ...]] = {}
        self._link_index: dict[str, int] = {}
        self._sg_index: dict[str, int] = {}
        self._link_list: list[Link] = []

    # ---- construction (used by colltune.profile.routing builders) ----
    def add_node(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise TopologyError(f"{self.source}: two network nodes named '{node.id}'")
        self.nodes[node.id] = node
        if node.kind == "host":
            self._host_index[node.id] = len(self.hosts)
            self.hosts.append(node.id)
        return node

    def add_link(self, src: str, dst: str, *, bandwidth: float, latency: float, kind: str,
                 sg_name: str, directed: bool = True, sharing: str = "SHARED", count: int = 1,
                 label: str | None = None) -> str:
        """Queue a link; returns its SimGrid name (ids are assigned by :meth:`seal`).
        ``label`` replaces the ``src -> dst`` form (loopback, limiter, backbone)."""
        if sg_name in self._by_sg:
            raise TopologyError(f"{self.source}: SimGrid link name '{sg_name}' would be created twice "
                                "(SimGrid 3.32 refuses such a platform: \"declared several times\")")
        base = label or (f"{src} -> {dst}" if directed else f"{src} <-> {dst}")
        self._pending.append(dict(base=base, src=src, dst=dst, bandwidth=float(bandwidth),
                                  latency=float(latency), kind=kind, sg_name=sg_name,
                                  directed=directed, sharing=sharing, count=count))
        self._by_sg[sg_name] = None  # type: ignore[assignment]  (reserved until seal)
        return sg_name

    def seal(self, router: Callable[[int, int], list[str]]) -> "Topology":
        """Assign link ids (``#k`` suffix where several links share a base id) and set the
        routing function ``router(src_index, dst_index) -> [SimGrid link names]``."""
        groups: dict[str, list[dict]] = {}
        for p in self._pending:
            groups.setdefault(p["base"], []).append(p)
        for p in self._pending:
            same = groups[p["base"]]
            k = next(i for i, q in enumerate(same) if q is p)
            lid = p["base"] if len(same) == 1 else f"{p['base']} #{k}"
            link = Link(id=lid, src=p["src"], dst=p["dst"], bandwidth=p["bandwidth"],
                        latency=p["latency"], kind=p["kind"], sg_name=p["sg_name"],
                        directed=p["directed"], cable=k, sharing=p["sharing"], count=p["count"])
            self._link_index[lid] = self._sg_index[link.sg_name] = len(self.links)
            self.links[lid] = link
            self._link_list.append(link)
            self._by_sg[link.sg_name] = link
        self._pending = []
        self._router = router
        return self

    # ---- queries ----
    def __repr__(self) -> str:
        return (f"<Topology {self.name} {self.kind}: {len(self.hosts)} hosts, "
                f"{len(self.nodes) - len(self.hosts)} switches/routers, {len(self.links)} links>")

    @property
    def link_ids(self) -> list[str]:
        return list(self.links)

    def link_index(self, link_id: str) -> int:
        """Position of a link in ``links`` (the row of per-link arrays)."""
        return self._link_index[link_id]

    def host_index(self, host: str) -> int:
        try:
            return self._host_index[host]
        except KeyError:
            raise TopologyError(f"host '{host}' is not in topology '{self.name}'") from None

    def link_by_sg_name(self, sg_name: str) -> Link:
        link = self._by_sg.get(sg_name)
        if link is None:
            raise TopologyError(f"no link named '{sg_name}' by SimGrid in topology '{self.name}'")
        return link

    def route_indices(self, src: str | int, dst: str | int) -> tuple[int, ...]:
        """Positions in ``links`` of the links from host ``src`` to host ``dst``, in order
        (cached for up to ``ROUTE_CACHE`` host pairs)."""
        i = src if isinstance(src, int) else self.host_index(src)
        j = dst if isinstance(dst, int) else self.host_index(dst)
        n = len(self.hosts)
        if not (0 <= i < n and 0 <= j < n):
            raise TopologyError(f"host index out of range 0..{n - 1}: {src!r} -> {dst!r}")
        key = i * n + j
        hit = self._route_cache.get(key)
        if hit is None:
            assert self._router is not None, "topology not sealed"
            hit = tuple(self._sg_index[name] for name in self._router(i, j))
            if len(self._route_cache) < self.ROUTE_CACHE:
                self._route_cache[key] = hit
        return hit

    def route(self, src: str | int, dst: str | int) -> tuple[Link, ...]:
        """Links from host ``src`` to host ``dst`` (names or host indices), in order."""
        return tuple(self._link_list[k] for k in self.route_indices(src, dst))

    def route_ids(self, src: str | int, dst: str | int) -> list[str]:
        return [link.id for link in self.route(src, dst)]

    def route_sg_names(self, src: str | int, dst: str | int) -> list[str]:
        """SimGrid's names of the links on the route (what ``Host::route_to`` lists)."""
        return [link.sg_name for link in self.route(src, dst)]

    def hops(self, src: str | int, dst: str | int) -> int:
        """Cables crossed from ``src`` to ``dst`` (loopback, limiters, backbone not counted)."""
        return sum(1 for link in self.route(src, dst) if link.is_cable)

    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind != "host"]

    def to_dict(self) -> dict:
        """JSON-ready description: nodes, links (with SimGrid names), parameters."""
        return {
            "name": self.name, "kind": self.kind, "params": self.params, "source": self.source,
            "hosts": list(self.hosts),
            "nodes": [{"id": n.id, "kind": n.kind, "level": n.level, "position": n.position,
                       "coords": list(n.coords)} for n in self.nodes.values()],
            "links": [{"id": l.id, "src": l.src, "dst": l.dst, "directed": l.directed,
                       "kind": l.kind, "cable": l.cable, "bandwidth": l.bandwidth,
                       "latency": l.latency, "sharing": l.sharing, "count": l.count,
                       "sg_name": l.sg_name} for l in self.links.values()],
        }


# ---------------------------------------------------------------------------
# SimGrid value parsing (xbt_parse_units.cpp of 3.32: strtod prefix, then a unit)



def parse_bandwidth(text: str, what: str = "bandwidth") -> float:
    """SimGrid bandwidth ('12.5GBps', '100Gbps', '1MiBps'; bare numbers are Bps) -> bytes/s."""
    try:
        return units.parse_bandwidth(text, what)
    except units.UnitError as exc:
        raise TopologyError(str(exc)) from None


def parse_time(text: str, what: str = "time") -> float:
    """SimGrid time ('0.2us', '5ms', '1m' is a minute; bare numbers are s) -> seconds."""
    try:
        return units.parse_time(text, what)
    except units.UnitError as exc:
        raise TopologyError(str(exc)) from None


# ---------------------------------------------------------------------------
# loading

def _radicals(text: str, where: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        m = re.match(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$", part)
        if not m:
            raise TopologyError(f"{where}: bad radical piece '{part}' in '{text}'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        out.extend(range(lo, hi + 1))
    return out


@dataclass
class ClusterSpec:
    """The attributes of one ``<cluster>`` that shape its network, parsed as SimGrid does."""
    id: str
    prefix: str
    suffix: str
    radicals: list[int]
    topology: str
    topo_parameters: str
    bw: float
    lat: float
    sharing_policy: str = "SPLITDUPLEX"
    bb_bw: float = 0.0
    bb_lat: float = 0.0
    bb_sharing_policy: str = "SHARED"
    limiter_link: float = 0.0
    loopback_bw: float = 0.0
    loopback_lat: float = 0.0
    router_id: str = ""
    source: str = ""
    attrs: dict = field(default_factory=dict)

    @property
    def host_names(self) -> list[str]:
        return [f"{self.prefix}{r}{self.suffix}" for r in self.radicals]

    @property
    def has_loopback(self) -> bool:
        return self.loopback_bw > 0 or self.loopback_lat > 0

    @property
    def has_limiter(self) -> bool:
        return self.limiter_link > 0

    @property
    def split_duplex(self) -> bool:
        return self.sharing_policy == "SPLITDUPLEX"


def _cluster_spec(c: ET.Element, where: str) -> ClusterSpec:
    a = c.attrib
    for req in ("id", "prefix", "radical", "bw", "lat"):
        if req not in a:
            raise TopologyError(f"{where}: <cluster> has no '{req}' attribute")
    topo = (a.get("topology") or "FLAT").upper()
    if topo not in KINDS:
        raise TopologyError(f"{where}: unknown cluster topology '{a.get('topology')}' (SimGrid: {', '.join(KINDS)})")
    sp = (a.get("sharing_policy") or "SPLITDUPLEX").upper()
    if sp == "FULLDUPLEX":  # deprecated alias in SimGrid 3.32
        sp = "SPLITDUPLEX"
    if sp not in ("SHARED", "SPLITDUPLEX", "FATPIPE"):
        raise TopologyError(f"{where}: sharing_policy '{sp}' is not SHARED, SPLITDUPLEX or FATPIPE")
    bbsp = (a.get("bb_sharing_policy") or "SHARED").upper()
    if bbsp not in ("SHARED", "FATPIPE"):
        raise TopologyError(f"{where}: bb_sharing_policy '{bbsp}' is not SHARED or FATPIPE")
    cid = a["id"]

    def bw(key: str) -> float:
        return parse_bandwidth(a[key], f"{where}: {key} of cluster {cid}") if a.get(key) else 0.0

    def tm(key: str) -> float:
        return parse_time(a[key], f"{where}: {key} of cluster {cid}") if a.get(key) else 0.0

    spec = ClusterSpec(id=cid, prefix=a["prefix"], suffix=a.get("suffix", ""),
                       radicals=_radicals(a["radical"], where), topology=topo,
                       topo_parameters=a.get("topo_parameters", ""), bw=bw("bw"), lat=tm("lat"),
                       sharing_policy=sp, bb_bw=bw("bb_bw"), bb_lat=tm("bb_lat"),
                       bb_sharing_policy=bbsp, limiter_link=bw("limiter_link"),
                       loopback_bw=bw("loopback_bw"), loopback_lat=tm("loopback_lat"),
                       router_id=a.get("router_id", ""), source=where, attrs=dict(a))
    if spec.bw <= 0:
        raise TopologyError(f"{where}: cluster {cid} needs bw > 0")
    return spec


def _find_single_cluster(root: ET.Element, where: str) -> ET.Element:
    clusters = list(root.iter("cluster"))
    hosts = list(root.iter("host"))
    if len(clusters) != 1 or hosts:
        raise TopologyError(
            f"{where}: traffic routing models platforms made of exactly one <cluster> "
            f"(found {len(clusters)} cluster(s) and {len(hosts)} plain <host> element(s))")
    return clusters[0]


def load_topology(platform: Any) -> Topology:
    """Topology of a bundled platform name, a ``colltune.platforms.Platform``, or the
    path of a SimGrid XML file with one ``<cluster>`` (FLAT, FAT_TREE, DRAGONFLY, TORUS)."""
    from colltune import platforms as _platforms
    from . import routing

    plat = None
    if isinstance(platform, _platforms.Platform):
        plat = platform
    else:
        s = os.fspath(platform)
        try:
            plat = _platforms.load(s)
        except _platforms.PlatformError as exc:
            if not os.path.isfile(s):
                raise TopologyError(str(exc)) from None
            plat = None  # a file the Platform loader rejects: try it as a bare cluster file
            path = Path(s)
    if plat is not None:
        path = Path(plat.xml_path)
    where = str(path)
    try:
        root = ET.fromstring(path.read_bytes())
    except ET.ParseError as exc:
        raise TopologyError(f"{where}: malformed XML: {exc}") from None
    except OSError as exc:
        raise TopologyError(f"{where}: {exc}") from None
    spec = _cluster_spec(_find_single_cluster(root, where), where)
    name = plat.name if plat is not None else path.stem
    topo = routing.build(spec, name)
    if plat is not None and list(plat.hosts) != topo.hosts:
        raise TopologyError(f"{where}: host list differs from colltune.platforms' reading")
    return topo
