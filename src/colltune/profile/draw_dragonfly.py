"""Drawing of a DRAGONFLY cluster, readable at a thousand nodes.

Groups are placed around a circle; inside a group, routers are squares on a grid
(one row per chassis, one column per router number). Green links (inside a chassis)
are arcs above their row, black links (between chassis, same router number) arcs
beside their column, blue (global) links chords between groups, all cut in two halves
coloured by direction (``draw_svg``). Hosts are aggregated per router: the small
two-part mark under each router shows the bytes its hosts injected (left) and
received (right); its tooltip lists every host. Loopback and limiter links are not
drawn (their loads are in the report's tables).
"""
from __future__ import annotations

import html
import math

from .draw_fattree import node_bytes
from .draw_svg import Canvas, ColourScale, cables, fmt_bytes

__all__ = ["draw_dragonfly"]

_COL = 26.0       # router column spacing
_ROW = 46.0       # chassis row spacing (room for the green arcs)
_SQ = 12.0        # router square


def draw_dragonfly(topo, loads: dict, scale: ColourScale, used: set, title: str) -> str:
    routers = [n for n in topo.nodes.values() if n.kind == "router"]
    groups = sorted({n.coords[0] for n in routers})
    chassis = max(n.coords[1] for n in routers) + 1
    rnum = max(n.coords[2] for n in routers) + 1
    bw, bh = rnum * _COL + 30, chassis * _ROW + 40
    ng = len(groups)
    diag = math.hypot(bw, bh)
    radius = 0.0 if ng == 1 else max(diag * 0.62, diag * ng / (2 * math.pi) * 1.1)
    half_w, half_h = radius + bw / 2 + 30, radius + bh / 2 + 30
    width, height = 2 * half_w, 2 * half_h + 20
    origin, flip = {}, {}
    for k, g in enumerate(groups):
        ang = -math.pi / 2 + 2 * math.pi * k / ng
        cx, cy = half_w + radius * math.cos(ang), half_h + 20 + radius * math.sin(ang)
        origin[g] = (cx - bw / 2, cy - bh / 2)
        # chassis 0 holds the blue links' routers: its row faces the circle's centre
        flip[g] = ng > 1 and math.sin(ang) < -1e-9
    pos = {}

    def row(g: int, c: int) -> float:
        return origin[g][1] + 30 + ((chassis - 1 - c) if flip[g] else c) * _ROW + _ROW / 2

    for n in routers:
        g, c, r = n.coords[:3]
        pos[n.id] = (origin[g][0] + 20 + (r + 0.5) * _COL, row(g, c))
    cv = Canvas(width, height, scale, loads, idle_width=0.5, busy_width=3.0)
    for g in groups:
        ox, oy = origin[g]
        cv.raw(f'<rect x="{ox:.1f}" y="{oy:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="#f7f9fc" '
               f'stroke="#8aa" rx="8"/>', below=True)
        cv.text(ox + 8, oy + 14, f"group {g}", size=11, anchor="start", weight="bold")
        for c in range(chassis):
            cv.text(ox + 16, row(g, c) + 3, f"c{c}", size=7, anchor="end")
    hosts_of: dict[str, list[str]] = {}
    for a, b, ab, ba, k, n in cables(topo):
        ka = topo.nodes[a].kind
        kb = topo.nodes[b].kind
        if ka == "host" or kb == "host":
            router = b if ka == "host" else a
            hosts_of.setdefault(router, []).append(a if ka == "host" else b)
            continue
        (xa, ya), (xb, yb) = pos[a], pos[b]
        kind = ab.kind if ab is not None else ba.kind
        fan = (k - (n - 1) / 2) * 4.0
        if kind == "blue":   # leaves each group through its chassis-0 side, then curves across
            reach = 0.3 * math.hypot(xb - xa, yb - ya) + 40
            ga, gb = topo.nodes[a].coords[0], topo.nodes[b].coords[0]
            ca = (xa + fan, ya + (reach if flip[ga] else -reach))
            cb = (xb + fan, yb + (reach if flip[gb] else -reach))
            cv.cubic(pos[a], ca, cb, pos[b], ab, ba, width=4.0 if _busy(loads, ab, ba) else 1.5)
        # arcs bulge enough that their middles (where the halves meet) clear the squares
        # of the routers they pass over: apex offset h/2 > half a square
        elif abs(ya - yb) < 1:           # green: same chassis row, arc upwards
            h = (8.0 if abs(xa - xb) < 1.5 * _COL else 16 + min(8.0, abs(xa - xb) * 0.03)) + fan
            cv.cable(pos[a], pos[b], ab, ba, -h if xa < xb else h)
        else:                            # black: same router column, arc to the right
            h = (8.0 if abs(ya - yb) < 1.5 * _ROW else 16 + min(6.0, abs(ya - yb) * 0.02)) + fan
            cv.cable(pos[a], pos[b], ab, ba, -h if ya < yb else h)
    sums = node_bytes(topo, loads)
    for n in routers:
        x, y = pos[n.id]
        inj, rec = sums[n.id][:2]
        cv.square(x, y, _SQ, "#9aa7b8", f"{n.id}: sent {fmt_bytes(inj)}, received {fmt_bytes(rec)} "
                                        f"on its cables", n.id, "router")
        hs = hosts_of.get(n.id, [])
        if hs:
            _hosts_mark(cv, scale, x, y + _SQ / 2 + 5, hs, sums, used)
    return cv.svg("topology dragonfly", title)


def _busy(loads: dict, *links) -> bool:
    return any(l is not None and loads.get(l.id, (0, 0)) != (0, 0) for l in links)


def _hosts_mark(cv: Canvas, scale: ColourScale, x: float, y: float, hosts: list[str], sums: dict,
                used: set) -> None:
    """The hosts of one router as one mark: left half bytes injected, right half received."""
    inj, rec, inj_m, rec_m = (sum(sums[h][i] for h in hosts) for i in range(4))
    in_job = [h for h in hosts if h in used]
    lines = [f"{len(hosts)} hosts, {len(in_job)} in the job"] + [
        f"{h}: injected {fmt_bytes(sums[h][0])}, received {fmt_bytes(sums[h][1])}" for h in hosts]
    tip = html.escape("\n".join(lines))
    stroke = "#000" if in_job else "#bbb"
    cv.raw(f'<g class="hosts" data-hosts="{html.escape(",".join(hosts))}"><title>{tip}</title>'
           f'<rect x="{x - 6:.1f}" y="{y - 2.5:.1f}" width="6" height="5" fill="{scale.colour(scale.value(inj, inj_m))}" '
           f'stroke="{stroke}" stroke-width="0.4"/>'
           f'<rect x="{x:.1f}" y="{y - 2.5:.1f}" width="6" height="5" fill="{scale.colour(scale.value(rec, rec_m))}" '
           f'stroke="{stroke}" stroke-width="0.4"/></g>')
