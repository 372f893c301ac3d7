"""SimGrid 3.32's cluster networks and host-to-host routing, re-implemented in Python.

Written from a reading of SimGrid 3.32's sources (``src/surf/sg_platf.cpp`` for how a
``<cluster>`` becomes a zone and names its links, ``src/kernel/routing/StarZone.cpp``
(FLAT), ``FatTreeZone.cpp``, ``DragonflyZone.cpp``, ``TorusZone.cpp``,
``ClusterZone.cpp``). Each builder creates the links SimGrid creates, with SimGrid's
names, and a routing function that returns, for a host pair, SimGrid's link list in
SimGrid's order, limiters and loopbacks included. ``tests/test_profile_topology.py``
checks it route for route against SimGrid itself (``colltune.profile.simgrid_routes``).

What SimGrid 3.32 does, including what a reader might not expect (kept on purpose, so
byte counts along these routes equal SimGrid's):

* FLAT (a star): route = sender's [limiter, link up, backbone] + receiver's [backbone,
  link down, limiter], a link already on the route is not added again (so the backbone
  appears once, and with a SHARED host link a host-to-itself route without loopback
  holds that link once).
* FAT_TREE, D-mod-k: going up from a node at level l, the parent port is
  ``(dst_position / prod(up[0..l-1])) mod (up[l] * cables[l])``; going down, the cable is
  chosen from the *source* position (``src_position mod cables[l-1]``), and the down
  loop scans the child ports from ``that * down[l-1]`` on while it descends, exactly as
  SimGrid's nested loop does. Limiters: the sender's, every switch's on the way (before
  its up link, after the down link leaving it), the receiver's.
* DRAGONFLY, minimal: to another group through router (own chassis, blade = target
  group), then chassis 0, then the one blue link of that router; then a green hop to the
  target blade, after which SimGrid continues *from chassis 0* of the target group
  (``routers_[group*C*R + blade]``), then a black hop if the target chassis differs. So
  inside one group, a route starting in chassis c != 0 that changes blade takes its green
  hop in chassis c and then a black link leaving chassis 0 (or none when the target is in
  chassis 0): SimGrid's links, not a physical path. The router limiters (when
  ``limiter_link`` is set) are placed as SimGrid places them.
* TORUS: dimension-ordered, direction chosen once from the source and target
  coordinates (SimGrid's wrap-around test), limiters of every node passed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .topology import ClusterSpec, Node, Topology, TopologyError

__all__ = ["build"]


def build(spec: ClusterSpec, name: str) -> Topology:
    """Topology of one parsed ``<cluster>``."""
    builder = {"FLAT": _build_flat, "FAT_TREE": _build_fat_tree,
               "DRAGONFLY": _build_dragonfly, "TORUS": _build_torus}[spec.topology]
    return builder(spec, name)


def _ints(text: str, sep: str, what: str, where: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(sep)]
    except ValueError:
        raise TopologyError(f"{where}: {what}: cannot read integers from '{text}'") from None
    if any(v <= 0 for v in vals):
        raise TopologyError(f"{where}: {what}: every value must be > 0, got '{text}'")
    return vals


def _host_extras(t: Topology, spec: ClusterSpec, host: str, position: int,
                 radical: int) -> tuple[str | None, str | None]:
    """Loopback then limiter of one host of a FAT_TREE, DRAGONFLY or TORUS cluster, as
    SimGrid creates them (loopback named by radical, limiter by position). Returns their
    SimGrid names."""
    loop = lim = None
    if spec.has_loopback:
        loop = t.add_link(host, host, bandwidth=spec.loopback_bw, latency=spec.loopback_lat,
                          kind="loopback", sg_name=f"{spec.id}_link_{radical}_loopback",
                          directed=False, sharing="FATPIPE", label=f"{host} loopback")
    if spec.has_limiter:
        lim = t.add_link(host, host, bandwidth=spec.limiter_link, latency=0.0, kind="limiter",
                         sg_name=f"{spec.id}_link_{position}_limiter", directed=False,
                         label=f"{host} limiter")
    return loop, lim


def _cable(t: Topology, spec: ClusterSpec, a: str, b: str, sg_base: str, *, up_kind: str,
           down_kind: str, undirected_kind: str, bw: float, count: int = 1) -> tuple[str, str]:
    """One cable a-b as SimGrid creates it: (a->b link, b->a link) SimGrid names; the
    same name twice when the cluster is not SPLITDUPLEX."""
    if spec.split_duplex:
        up = t.add_link(a, b, bandwidth=bw, latency=spec.lat, kind=up_kind, sg_name=sg_base + "_UP",
                        count=count)
        down = t.add_link(b, a, bandwidth=bw, latency=spec.lat, kind=down_kind, sg_name=sg_base + "_DOWN",
                          count=count)
        return up, down
    one = t.add_link(a, b, bandwidth=bw, latency=spec.lat, kind=undirected_kind, sg_name=sg_base,
                     directed=False, count=count)
    return one, one


# --------------------------------------------------------------------------- FLAT

def _build_flat(spec: ClusterSpec, name: str) -> Topology:
    hosts = spec.host_names
    t = Topology(name, "FLAT", {"cluster": spec.id, "hosts": len(hosts)}, spec.source)
    for i, h in enumerate(hosts):
        t.add_node(Node(h, "host", 0, i))
    sw = "switch"
    t.add_node(Node(sw, "switch", 1, 0))
    backbone = None
    if spec.bb_bw > 0 or spec.bb_lat > 0:
        backbone = t.add_link(sw, sw, bandwidth=spec.bb_bw, latency=spec.bb_lat, kind="backbone",
                              sg_name=f"{spec.id}_backbone", directed=False,
                              sharing=spec.bb_sharing_policy, label=f"{sw} backbone")
    ups: list[list[str]] = []
    downs: list[list[str]] = []
    loops: list[str | None] = []
    for i, (h, r) in enumerate(zip(hosts, spec.radicals)):
        link_id = f"{spec.id}_link_{r}"
        loop = lim = None
        if spec.has_loopback:
            loop = t.add_link(h, h, bandwidth=spec.loopback_bw, latency=spec.loopback_lat,
                              kind="loopback", sg_name=link_id + "_loopback", directed=False,
                              sharing="FATPIPE", label=f"{h} loopback")
        if spec.has_limiter:
            lim = t.add_link(h, h, bandwidth=spec.limiter_link, latency=0.0, kind="limiter",
                             sg_name=link_id + "_limiter", directed=False, label=f"{h} limiter")
        up, down = _cable(t, spec, h, sw, link_id, up_kind="up", down_kind="down",
                          undirected_kind="cable", bw=spec.bw)
        ups.append([x for x in (lim, up, backbone) if x])
        downs.append([x for x in (backbone, down, lim) if x])
        loops.append(loop)

    def route(i: int, j: int) -> list[str]:
        if i == j and loops[i]:
            return [loops[i]]  # type: ignore[list-item]
        out: list[str] = []
        for name_ in ups[i] + downs[j]:
            if name_ not in out:  # StarZone skips a link already on the route
                out.append(name_)
        return out

    return t.seal(route)


# --------------------------------------------------------------------------- FAT_TREE

@dataclass(eq=False)
class _FTNode:
    id: int
    level: int
    position: int
    name: str
    limiter: str | None = None
    label: list[int] = field(default_factory=list)
    parents: list = field(default_factory=list)
    children: list = field(default_factory=list)


@dataclass(eq=False)
class _FTLink:
    up_node: _FTNode
    down_node: _FTNode
    up: str    # SimGrid name, child -> parent
    down: str  # SimGrid name, parent -> child


def _build_fat_tree(spec: ClusterSpec, name: str) -> Topology:
    where = spec.source
    parts = spec.topo_parameters.split(";")
    if len(parts) != 4:
        raise TopologyError(f"{where}: FAT_TREE topo_parameters '{spec.topo_parameters}' needs "
                            "'levels;downlinks;uplinks;parallel cables' (4 ';'-separated fields)")
    try:
        levels = int(parts[0])
    except ValueError:
        raise TopologyError(f"{where}: FAT_TREE: first field '{parts[0]}' is not the number of levels") from None
    if levels <= 0:
        raise TopologyError(f"{where}: FAT_TREE: number of levels must be > 0")
    down = _ints(parts[1], ",", "FAT_TREE downlinks", where)
    up = _ints(parts[2], ",", "FAT_TREE uplinks", where)
    count = _ints(parts[3], ",", "FAT_TREE parallel cables", where)
    for what, vec in (("downlinks", down), ("uplinks", up), ("parallel cables", count)):
        if len(vec) != levels:
            raise TopologyError(f"{where}: FAT_TREE: {levels} levels but {len(vec)} {what} values")
    hosts = spec.host_names
    if math.prod(down) != len(hosts):
        raise TopologyError(f"{where}: FAT_TREE downlinks {down} give {math.prod(down)} hosts, "
                            f"the radical gives {len(hosts)}")
    n = len(hosts)
    by_level = [n] + [math.prod(up[: i + 1]) * math.prod(down[i + 1:]) for i in range(levels)]
    t = Topology(name, "FAT_TREE", {"cluster": spec.id, "levels": levels, "down": down, "up": up,
                                    "cables": count, "nodes_by_level": by_level}, spec.source)
    nodes: list[_FTNode] = []
    for i, (h, r) in enumerate(zip(hosts, spec.radicals)):
        t.add_node(Node(h, "host", 0, i, sg_id=i))
        _, lim = _host_extras(t, spec, h, i, r)
        nodes.append(_FTNode(i, 0, i, h, lim, parents=[None] * (up[0] * count[0])))
    k = 2 * n
    for i in range(levels):
        for j in range(by_level[i + 1]):
            k -= 1
            sname = f"L{i + 1}-switch{j}"
            t.add_node(Node(sname, "switch", i + 1, j, sg_id=k))
            lim = None
            if spec.has_limiter:
                lim = t.add_link(sname, sname, bandwidth=spec.limiter_link, latency=0.0, kind="limiter",
                                 sg_name=f"{spec.id}_link_{k}_limiter", directed=False,
                                 label=f"{sname} limiter")
            node = _FTNode(k, i + 1, j, sname, lim, children=[None] * (down[i] * count[i]))
            if i != levels - 1:
                node.parents = [None] * (up[i + 1] * count[i + 1])
            nodes.append(node)
    # labels: per level, a mixed-radix counter, digit 0 least significant
    kk = 0
    for i in range(levels + 1):
        cur = [0] * levels
        maxl = [down[j] if j + 1 > i else up[j] for j in range(levels)]
        for _ in range(by_level[i]):
            nodes[kk].label = list(cur)
            pos = 0
            while pos < levels:
                cur[pos] += 1
                if cur[pos] >= maxl[pos]:
                    cur[pos] = 0
                    pos += 1
                else:
                    break
            kk += 1
    start = [sum(by_level[:lv]) for lv in range(levels + 2)]
    uid = 0
    kk = 0
    for lv in range(levels):
        for _ in range(by_level[lv]):
            child = nodes[kk]
            for parent in nodes[start[lv + 1]: start[lv + 1] + by_level[lv + 1]]:
                if all(parent.label[i] == child.label[i] or i + 1 == parent.level for i in range(levels)):
                    for j in range(count[lv]):
                        base = f"link_from_{child.id}_{parent.id}_{uid}"
                        uid += 1
                        u, d = _cable(t, spec, child.name, parent.name, base, up_kind="up",
                                      down_kind="down", undirected_kind="cable", bw=spec.bw)
                        link = _FTLink(parent, child, u, d)
                        parent.children[child.label[lv] + j * down[lv]] = link
                        child.parents[parent.label[lv] + j * up[lv]] = link
            kk += 1
    loops = [f"{spec.id}_link_{r}_loopback" if spec.has_loopback else None for r in spec.radicals]

    def in_sub_tree(root: _FTNode, node: _FTNode) -> bool:
        if root.level <= node.level:
            return False
        if any(root.label[i] != node.label[i] for i in range(node.level)):
            return False
        return all(root.label[i] == node.label[i] for i in range(root.level, levels))

    def route(si: int, di: int) -> list[str]:
        src, dst = nodes[si], nodes[di]
        if si == di and loops[si]:
            return [loops[si]]  # type: ignore[list-item]
        out: list[str] = []
        cur = src
        while not in_sub_tree(cur, dst):
            d = dst.position
            for i in range(cur.level):
                d //= up[i]
            d %= up[cur.level] * count[cur.level]
            if cur.limiter:
                out.append(cur.limiter)
            link = cur.parents[d]
            if link is None:
                raise TopologyError(f"{where}: fat-tree node {cur.name} has no parent port {d}")
            out.append(link.up)
            cur = link.up_node
        guard = 0
        while cur is not dst:
            guard += 1
            if guard > 4 * (levels + 2):
                raise TopologyError(f"{where}: fat-tree down route {src.name} -> {dst.name} does not converge")
            d = src.position % count[cur.level - 1]
            i = d * down[cur.level - 1]
            # SimGrid's loop keeps scanning ports with the node it has just descended to
            while i < len(cur.children):
                if i % down[cur.level - 1] == dst.label[cur.level - 1]:
                    link = cur.children[i]
                    out.append(link.down)
                    if cur.limiter:
                        out.append(cur.limiter)
                    cur = link.down_node
                i += 1
        if cur.limiter:
            out.append(cur.limiter)
        return out

    return t.seal(route)


# --------------------------------------------------------------------------- DRAGONFLY

def _build_dragonfly(spec: ClusterSpec, name: str) -> Topology:
    where = spec.source
    p = spec.topo_parameters.split(";")
    try:
        if len(p) != 4:
            raise ValueError
        (G, blue), (C, black), (R, green) = [_pair(x) for x in p[:3]]
        N = int(p[3])
    except ValueError:
        raise TopologyError(f"{where}: DRAGONFLY topo_parameters '{spec.topo_parameters}' must be "
                            "'groups,blue;chassis,black;routers,green;nodes per router'") from None
    if min(G, blue, C, black, R, green, N) <= 0:
        raise TopologyError(f"{where}: DRAGONFLY: every parameter must be > 0 ('{spec.topo_parameters}')")
    if G > R:
        raise TopologyError(f"{where}: DRAGONFLY needs groups ({G}) <= routers per chassis ({R}): "
                            "SimGrid attaches group g's blue link to router g of chassis 0")
    hosts = spec.host_names
    total = G * C * R * N
    if total != len(hosts):
        raise TopologyError(f"{where}: DRAGONFLY gives {total} hosts, the radical gives {len(hosts)}")
    t = Topology(name, "DRAGONFLY", {"cluster": spec.id, "groups": G, "blue": blue, "chassis": C,
                                     "black": black, "routers": R, "green": green,
                                     "nodes_per_router": N}, spec.source)
    loops: list[str | None] = []
    hlims: list[str | None] = []
    for i, (h, r) in enumerate(zip(hosts, spec.radicals)):
        g, rest = divmod(i, C * R * N)
        c, rest = divmod(rest, R * N)
        b, nn = divmod(rest, N)
        t.add_node(Node(h, "host", 0, i, coords=(g, c, b, nn), sg_id=i))
        loop, lim = _host_extras(t, spec, h, i, r)
        loops.append(loop)
        hlims.append(lim)
    nrouters = G * C * R
    rname: list[str] = []
    rlim: list[str | None] = []
    lid = 2 * total
    for g in range(G):
        for c in range(C):
            for b in range(R):
                ri = (g * C + c) * R + b
                nm = f"g{g}-c{c}-r{b}"
                rname.append(nm)
                t.add_node(Node(nm, "router", 1, ri, coords=(g, c, b), sg_id=ri))
                lim = None
                if spec.has_limiter:
                    lid -= 1
                    lim = t.add_link(nm, nm, bandwidth=spec.limiter_link, latency=0.0, kind="limiter",
                                     sg_name=f"{spec.id}_link_{lid}_limiter", directed=False,
                                     label=f"{nm} limiter")
                rlim.append(lim)
    uid = 0
    node_up: list[str] = [""] * total
    node_down: list[str] = [""] * total
    for ri in range(nrouters):
        for j in range(N):
            h = hosts[ri * N + j]
            base = f"local_link_from_router_{ri}_to_node_{j}_{uid}"
            node_up[ri * N + j], node_down[ri * N + j] = _cable(
                t, spec, h, rname[ri], base, up_kind="local-up", down_kind="local-down",
                undirected_kind="local", bw=spec.bw)
            uid += 1
    green_l: dict[tuple[int, int], str] = {}
    for ci in range(G * C):
        for j in range(R):
            for k in range(j + 1, R):
                base = (f"green_link_in_chassis_{ci % C}_between_routers_{j}_and_{k}_{uid}")
                a, b_ = ci * R + j, ci * R + k
                green_l[(a, k)], green_l[(b_, j)] = _cable(
                    t, spec, rname[a], rname[b_], base, up_kind="green", down_kind="green",
                    undirected_kind="green", bw=spec.bw * green, count=green)
                uid += 1
    black_l: dict[tuple[int, int], str] = {}
    for g in range(G):
        for j in range(C):
            for k in range(j + 1, C):
                for b in range(R):
                    base = (f"black_link_in_group_{g}_between_chassis_{j}_and_{k}_blade_{b}_{uid}")
                    a, b_ = (g * C + j) * R + b, (g * C + k) * R + b
                    black_l[(a, k)], black_l[(b_, j)] = _cable(
                        t, spec, rname[a], rname[b_], base, up_kind="black", down_kind="black",
                        undirected_kind="black", bw=spec.bw * black, count=black)
                    uid += 1
    blue_l: dict[int, str] = {}
    for i in range(G):
        for j in range(i + 1, G):
            rni, rnj = i * R * C + j, j * R * C + i
            base = f"blue_link_between_group_{i}_and_{j}_routers_{rni}_and_{rnj}_{uid}"
            blue_l[rni], blue_l[rnj] = _cable(t, spec, rname[rni], rname[rnj], base, up_kind="blue",
                                              down_kind="blue", undirected_kind="blue",
                                              bw=spec.bw * blue, count=blue)
            uid += 1

    def coords(i: int) -> tuple[int, int, int, int]:
        g, rest = divmod(i, C * R * N)
        c, rest = divmod(rest, R * N)
        b, nn = divmod(rest, N)
        return g, c, b, nn

    def route(si: int, di: int) -> list[str]:
        if si == di and loops[si]:
            return [loops[si]]  # type: ignore[list-item]
        sg, sc, sb, _ = coords(si)
        tg, tc, tb, _ = coords(di)
        my = (sg * C + sc) * R + sb
        target = (tg * C + tc) * R + tb
        cur = my
        out: list[str] = []
        if hlims[si]:
            out.append(hlims[si])  # type: ignore[arg-type]
        out.append(node_up[si])

        def rg(r: int) -> tuple[int, int, int]:  # (group, chassis, blade) of a router
            g, rest = divmod(r, C * R)
            c, b = divmod(rest, R)
            return g, c, b

        if target != my:
            if tg != rg(cur)[0]:
                if rg(cur)[2] != tg:
                    if rlim[cur]:
                        out.append(rlim[cur])  # type: ignore[arg-type]
                    out.append(green_l[(cur, tg)])
                    cur = (sg * C + sc) * R + tg
                if rg(cur)[1] != 0:
                    if rlim[cur]:
                        out.append(rlim[cur])  # type: ignore[arg-type]
                    out.append(black_l[(cur, 0)])
                    cur = sg * C * R + tg
                out.append(blue_l[cur])
                if rlim[cur]:
                    out.append(rlim[cur])  # type: ignore[arg-type]
                cur = tg * C * R + sg
            if tb != rg(cur)[2]:
                if rlim[cur]:
                    out.append(rlim[cur])  # type: ignore[arg-type]
                out.append(green_l[(cur, tb)])
                cur = tg * C * R + tb  # SimGrid continues from chassis 0 of the target group
            if tc != rg(cur)[1]:
                if rlim[cur]:
                    out.append(rlim[cur])  # type: ignore[arg-type]
                out.append(black_l[(cur, tc)])
        if rlim[target]:
            out.append(rlim[target])  # type: ignore[arg-type]
        out.append(node_down[di])
        if hlims[di]:
            out.append(hlims[di])  # type: ignore[arg-type]
        return out

    return t.seal(route)


def _pair(text: str) -> tuple[int, int]:
    a, b = text.split(",")
    return int(a), int(b)


# --------------------------------------------------------------------------- TORUS

def _build_torus(spec: ClusterSpec, name: str) -> Topology:
    where = spec.source
    dims = _ints(spec.topo_parameters, ",", "TORUS dimensions", where) if spec.topo_parameters else []
    if not dims:
        raise TopologyError(f"{where}: TORUS needs topo_parameters 'd1,d2,...'")
    hosts = spec.host_names
    total = math.prod(dims)
    if total != len(hosts):
        raise TopologyError(f"{where}: TORUS dimensions {dims} give {total} hosts, the radical gives {len(hosts)}")
    t = Topology(name, "TORUS", {"cluster": spec.id, "dims": dims}, spec.source)
    loops: list[str | None] = []
    lims: list[str | None] = []
    ups: list[list[str]] = []
    downs: list[list[str]] = []

    def coords_of(i: int) -> tuple[int, ...]:
        out, prod = [], 1
        for d in dims:
            out.append((i // prod) % d)
            prod *= d
        return tuple(out)

    for i, h in enumerate(hosts):
        t.add_node(Node(h, "host", 0, i, coords=coords_of(i), sg_id=i))
    for i, (h, r) in enumerate(zip(hosts, spec.radicals)):
        loop, lim = _host_extras(t, spec, h, i, r)
        loops.append(loop)
        lims.append(lim)
        u_row, d_row = [], []
        prod = 1
        for d in dims:
            nb = i - (d - 1) * prod if (i // prod) % d == d - 1 else i + prod
            u, dn = _cable(t, spec, h, hosts[nb], f"{spec.id}_link_from_{i}_to_{nb}", up_kind="torus",
                           down_kind="torus", undirected_kind="torus", bw=spec.bw)
            u_row.append(u)
            d_row.append(dn)
            prod *= d
        ups.append(u_row)
        downs.append(d_row)

    def route(si: int, di: int) -> list[str]:
        if si == di and loops[si]:
            return [loops[si]]  # type: ignore[list-item]
        my, tgt = coords_of(si), coords_of(di)
        out: list[str] = []
        cur = si
        while cur != di:
            nxt, lnk = 0, ""
            prod = 1
            for j, d in enumerate(dims):
                if (cur // prod) % d != (di // prod) % d:
                    if (tgt[j] > my[j] and tgt[j] <= my[j] + d // 2) or \
                            (my[j] > d // 2 and (my[j] + d // 2) % d >= tgt[j]):
                        nxt = cur + prod - prod * d if (cur // prod) % d == d - 1 else cur + prod
                        lnk = ups[cur][j]
                    else:
                        nxt = cur - prod + prod * d if (cur // prod) % d == 0 else cur - prod
                        lnk = downs[nxt][j]
                    break
                prod *= d
            if lims[cur]:
                out.append(lims[cur])  # type: ignore[arg-type]
            out.append(lnk)
            cur = nxt
        if lims[di]:
            out.append(lims[di])  # type: ignore[arg-type]
        return out

    return t.seal(route)
