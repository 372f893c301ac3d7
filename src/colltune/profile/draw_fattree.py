"""Drawings of FAT_TREE and FLAT clusters (hosts and switches as squares by level, the
Boxfish "Fat Tree" module's layout) and of TORUS clusters (hosts on a grid).

Every cable is a line cut in two halves, each coloured by the traffic injected at its
end (see ``draw_svg``); parallel cables between the same two switches are drawn as
curves fanned apart; loopback, limiter and backbone links are not cables and are not
drawn (their loads are in the report's tables).
"""
from __future__ import annotations

from .draw_svg import Canvas, ColourScale, cables, fmt_bytes

__all__ = ["draw_layered", "draw_torus"]

_LEVEL_GAP = 170
_MARGIN = 40


def node_bytes(topo, loads: dict) -> dict[str, list[float]]:
    """Node id -> [bytes it injected, bytes it received, messages injected, received] on
    its cables."""
    out = {nid: [0.0, 0.0, 0.0, 0.0] for nid in topo.nodes}
    for lid, (b, m) in loads.items():
        link = topo.links[lid]
        if link.is_cable and link.directed:   # an undirected cable's bytes have no one sender
            out[link.src][0] += b
            out[link.dst][1] += b
            out[link.src][2] += m
            out[link.dst][3] += m
    return out


def _node_tip(topo, nid: str, sums: dict, used: set) -> str:
    """Node id, and for a host the bytes it injected and received on its cables."""
    node = topo.nodes[nid]
    if node.kind != "host":
        return f"{nid} (level {node.level})"
    out, inn = sums[nid][:2]
    state = "in the job" if nid in used else "not in the job"
    return f"{nid} ({state}): injected {fmt_bytes(out)}, received {fmt_bytes(inn)}"


def _host_style(nid: str, used: set) -> str:
    return "#ffffff" if nid in used else "#eeeeee"


def draw_layered(topo, loads: dict, scale: ColourScale, used: set, title: str) -> str:
    """Fat-tree or FLAT cluster: level 0 (hosts) at the bottom, each level of switches
    above; nodes of a level spread evenly in SimGrid's position order."""
    by_level: dict[int, list] = {}
    for node in topo.nodes.values():
        by_level.setdefault(node.level, []).append(node)
    widest = max(len(v) for v in by_level.values())
    spacing = min(60.0, max(15.0, 960.0 / widest)) if widest <= 128 else 9.0
    width = 2 * _MARGIN + widest * spacing
    top = max(by_level)
    height = 2 * _MARGIN + top * _LEVEL_GAP + 60
    pos: dict[str, tuple[float, float]] = {}
    for level, nodes in by_level.items():
        nodes.sort(key=lambda n: n.position)
        step = (width - 2 * _MARGIN) / len(nodes)
        y = _MARGIN + 20 + (top - level) * _LEVEL_GAP
        for i, n in enumerate(nodes):
            pos[n.id] = (_MARGIN + (i + 0.5) * step, y)
    sums = node_bytes(topo, loads)
    cv = Canvas(width, height, scale, loads, idle_width=1.0, busy_width=3.0 if widest <= 128 else 2.0)
    for a, b, ab, ba, k, n in cables(topo):
        bend = (k - (n - 1) / 2) * 18.0 if n > 1 else 0.0
        cv.cable(pos[a], pos[b], ab, ba, bend)
    size = min(12.0, spacing * 0.7)
    for nid, (x, y) in pos.items():
        node = topo.nodes[nid]
        if node.kind == "host":
            cv.square(x, y, size, _host_style(nid, used), _node_tip(topo, nid, sums, used), nid, "host")
        else:
            sw = max(size, min(24.0, (width - 2 * _MARGIN) / len(by_level[node.level]) * 0.5))
            cv.square(x, y, sw, "#9aa7b8", _node_tip(topo, nid, sums, used), nid, "switch")
    hosts = by_level[0]
    every = 1 if len(hosts) <= 64 else 8 if len(hosts) <= 512 else 32
    for i, n in enumerate(hosts):
        if i % every == 0:
            x, y = pos[n.id]
            cv.text(x, y + size / 2 + 4, n.id, size=8, anchor="end", rotate=-90)
    for level in sorted(by_level):
        if level:
            cv.text(4, _MARGIN + 24 + (top - level) * _LEVEL_GAP, f"L{level}", size=11, anchor="start",
                    weight="bold")
    return cv.svg("topology fattree", title)


def draw_torus(topo, loads: dict, scale: ColourScale, used: set, title: str) -> str:
    """Torus: dimension 0 across, dimension 1 down, further dimensions as panels side by
    side; wrap-around cables and cables between panels are drawn as curves."""
    dims = list(topo.params.get("dims") or [len(topo.hosts)])
    d0 = dims[0]
    d1 = dims[1] if len(dims) > 1 else 1
    panels = 1
    for d in dims[2:]:
        panels *= d
    cell = 46.0
    panel_w = d0 * cell + 40
    width = 2 * _MARGIN + panels * panel_w
    height = 2 * _MARGIN + d1 * cell + 30
    pos = {}
    for node in topo.nodes.values():
        c = list(node.coords) + [0] * (len(dims) - len(node.coords))
        p, mul = 0, 1
        for j in range(2, len(dims)):
            p += c[j] * mul
            mul *= dims[j]
        pos[node.id] = (_MARGIN + p * panel_w + (c[0] + 0.5) * cell,
                        _MARGIN + 20 + (c[1] if len(dims) > 1 else 0) * cell + cell / 2)
    sums = node_bytes(topo, loads)
    cv = Canvas(width, height, scale, loads, idle_width=1.2, busy_width=3.5)
    for a, b, ab, ba, k, n in cables(topo):
        (xa, ya), (xb, yb) = pos[a], pos[b]
        far = abs(xa - xb) > cell * 1.5 or abs(ya - yb) > cell * 1.5
        bend = (k - (n - 1) / 2) * 12.0 + (18.0 if far else 0.0)
        cv.cable(pos[a], pos[b], ab, ba, bend)
    for nid, (x, y) in pos.items():
        cv.square(x, y, 14, _host_style(nid, used), _node_tip(topo, nid, sums, used), nid, "host")
        cv.text(x, y - 10, nid, size=8)
    for p in range(panels):
        if panels > 1:
            cv.text(_MARGIN + p * panel_w + 4, _MARGIN, f"panel {p} (dims 2+)", size=10, anchor="start")
    return cv.svg("topology torus", title)
