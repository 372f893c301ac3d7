"""SVG pieces shared by the topology drawings: colour scale, cables drawn as two
halves, node squares, legend, heatmaps.

A cable between network nodes ``a`` and ``b`` is drawn as one line (straight, or a
quadratic curve when ``bend`` is nonzero: parallel cables, wrap-around links, chords)
cut at its middle. The half that touches ``a`` takes the colour of the directed link
``a -> b`` (the traffic injected into the cable at ``a``'s end, Boxfish's convention),
the half at ``b`` the colour of ``b -> a``. A link that carries both directions (SHARED
or FATPIPE clusters) colours both halves alike. Every half is a ``<path>`` with
``data-link`` (the link id), ``data-bytes``, ``data-messages`` and a ``<title>``
(exact values on hover). Halves without traffic are drawn first, thin and in
``NO_TRAFFIC``; loaded halves on top, so a loaded link is never hidden by an idle one.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NO_TRAFFIC", "ZERO_BYTES", "ColourScale", "Canvas", "fmt_bytes", "heatmap_svg"]

#: colour of a link (or matrix cell) that carried nothing
NO_TRAFFIC = "#d4d4d4"
#: colour of a link that carried messages of 0 bytes only (a barrier's, notifications): not
#: on the bytes scale, and not "nothing" either
ZERO_BYTES = "#2ca02c"

# matplotlib's 'plasma' sampled at 0, 1/8, ..., 7/8 (its palest yellow end left out:
# invisible on white); interpolated linearly in between
_STOPS = ["#0d0887", "#4c02a1", "#7e03a8", "#a92395", "#cc4778", "#e56b5d", "#f89441",
          "#fdc328"]


def _rgb(h: str) -> tuple[int, int, int]:
    return int(h[1:3], 16), int(h[3:5], 16), int(h[5:7], 16)


def fmt_bytes(b: float) -> str:
    """Human form with the exact count: '8.0 MiB (8388608 B)'."""
    b = float(b)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= scale:
            return f"{b / scale:.1f} {unit} ({b:.0f} B)"
    return f"{b:.0f} B"


def fmt_count(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


class ColourScale:
    """Logarithmic scale from the smallest to the largest positive value given, at
    least MIN_SPAN wide (all drawings of one page share one scale). Zero maps to
    ``NO_TRAFFIC``."""
    # without it, loads within a few % of each other (two profiles compared: 695 and 713
    # KiB) got the two ends of the scale
    MIN_SPAN = 10.0

    def __init__(self, values, what: str = "bytes"):
        arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float).ravel()
        pos = arr[arr > 0]
        self.hi = float(pos.max()) if pos.size else 1.0
        self.lo = min(float(pos.min()), self.hi / self.MIN_SPAN) if pos.size else 1.0
        self.what = what

    def value(self, nbytes: float, messages: float) -> float:
        """What this scale colours: the bytes, or (what="messages") the messages."""
        return messages if self.what == "messages" else nbytes

    def fraction(self, v: float) -> float:
        if self.hi <= self.lo:
            return 1.0
        return min(1.0, max(0.0, math.log(v / self.lo) / math.log(self.hi / self.lo)))

    def colour(self, v: float) -> str:
        if not v or v <= 0:
            return NO_TRAFFIC
        t = self.fraction(v) * (len(_STOPS) - 1)
        k = min(int(t), len(_STOPS) - 2)
        a, b = _rgb(_STOPS[k]), _rgb(_STOPS[k + 1])
        f = t - k
        return "#%02x%02x%02x" % tuple(round(x + (y - x) * f) for x, y in zip(a, b))

    def rgb_array(self, m: np.ndarray) -> np.ndarray:
        """``m``'s entries as uint8 RGB (vectorised :meth:`colour`, for images)."""
        m = np.asarray(m, dtype=float)
        out = np.empty(m.shape + (3,), dtype=np.uint8)
        out[:] = _rgb(NO_TRAFFIC)
        pos = m > 0
        if self.hi <= self.lo:
            t = np.full(int(pos.sum()), 1.0)
        else:
            t = np.clip(np.log(m[pos] / self.lo) / math.log(self.hi / self.lo), 0.0, 1.0)
        t = t * (len(_STOPS) - 1)
        k = np.minimum(t.astype(int), len(_STOPS) - 2)
        stops = np.array([_rgb(s) for s in _STOPS], dtype=float)
        f = (t - k)[:, None]
        out[pos] = np.round(stops[k] + (stops[k + 1] - stops[k]) * f).astype(np.uint8)
        return out

    def legend(self, width: int = 360) -> str:
        """A standalone SVG colour bar with its end values and the no-traffic swatch."""
        n = 64
        cells = "".join(f'<rect x="{10 + i * width / n:.1f}" y="6" width="{width / n + 0.6:.1f}" '
                        f'height="14" fill="{self.colour(self.lo * (self.hi / self.lo) ** (i / (n - 1)))}"/>'
                        for i in range(n))
        def label(v: float) -> str:
            return html.escape(fmt_bytes(v) if self.what == "bytes" else fmt_count(v))
        return (f'<svg class="legend" xmlns="http://www.w3.org/2000/svg" width="{width + 200}" height="54" '
                f'font-family="sans-serif">{cells}'
                f'<text x="10" y="34" font-size="11">{label(self.lo)}</text>'
                f'<text x="{10 + width}" y="34" font-size="11" text-anchor="end">{label(self.hi)}</text>'
                f'<rect x="{width + 24}" y="6" width="22" height="14" fill="{NO_TRAFFIC}"/>'
                f'<text x="{width + 50}" y="18" font-size="11">no traffic</text>'
                f'<rect x="{width + 24}" y="28" width="22" height="14" fill="{ZERO_BYTES}"/>'
                f'<text x="{width + 50}" y="40" font-size="11">0-byte messages only</text>'
                f'<text x="10" y="49" font-size="11">{self.what} per link and direction '
                f'(log scale; one scale for every drawing of the page)</text></svg>')


@dataclass
class Canvas:
    """An SVG being built: idle halves, loaded halves and nodes kept apart so the
    loaded ones end up drawn above the idle ones and nodes above every line."""
    width: float
    height: float
    scale: ColourScale
    loads: dict                       # link id -> (bytes, messages)
    idle: list = field(default_factory=list)
    busy: list = field(default_factory=list)
    marks: list = field(default_factory=list)
    idle_width: float = 1.0
    busy_width: float = 3.0

    def _half(self, link, d: str, width: float | None) -> None:
        b, m = self.loads.get(link.id, (0.0, 0.0)) if link is not None else (0.0, 0.0)
        lid = link.id if link is not None else ""
        busy = b > 0 or m > 0
        w = width if width is not None else (self.busy_width if busy else self.idle_width)
        tip = f"{lid}: {fmt_bytes(b)}, {fmt_count(m)} messages" if link is not None else "(no link)"
        v = self.scale.value(b, m)
        colour = self.scale.colour(v) if v > 0 else (ZERO_BYTES if m > 0 else NO_TRAFFIC)
        el = (f'<path class="half" d="{d}" stroke="{colour}" stroke-width="{w:.2f}" '
              f'fill="none" data-link="{html.escape(lid)}" data-bytes="{b:.0f}" data-messages="{m:.0f}">'
              f'<title>{html.escape(tip)}</title></path>')
        (self.busy if busy else self.idle).append(el)

    def cable(self, p, q, ab, ba, bend: float = 0.0, width: float | None = None) -> None:
        """Cable from point ``p`` (node a) to ``q`` (node b): half at ``p`` coloured by
        link ``ab`` (a -> b), half at ``q`` by ``ba`` (b -> a; the same link object for an
        undirected cable). ``bend``: perpendicular offset of the curve's control point."""
        (x0, y0), (x2, y2) = p, q
        dx, dy = x2 - x0, y2 - y0
        n = math.hypot(dx, dy) or 1.0
        cx, cy = (x0 + x2) / 2 - dy / n * bend, (y0 + y2) / 2 + dx / n * bend
        # de Casteljau at t = 1/2: two quadratic halves meeting at the curve's middle
        ax, ay = (x0 + cx) / 2, (y0 + cy) / 2
        bx, by = (cx + x2) / 2, (cy + y2) / 2
        mx, my = (ax + bx) / 2, (ay + by) / 2
        if bend:
            self._half(ab, f"M{x0:.1f},{y0:.1f} Q{ax:.1f},{ay:.1f} {mx:.1f},{my:.1f}", width)
            self._half(ba, f"M{x2:.1f},{y2:.1f} Q{bx:.1f},{by:.1f} {mx:.1f},{my:.1f}", width)
        else:
            self._half(ab, f"M{x0:.1f},{y0:.1f} L{mx:.1f},{my:.1f}", width)
            self._half(ba, f"M{x2:.1f},{y2:.1f} L{mx:.1f},{my:.1f}", width)

    def cubic(self, p, c1, c2, q, ab, ba, width: float | None = None) -> None:
        """A cable drawn as the cubic curve p, c1, c2, q, cut at t = 1/2 (halves as in
        :meth:`cable`)."""
        def mid(u, v):
            return ((u[0] + v[0]) / 2, (u[1] + v[1]) / 2)
        a, b, c = mid(p, c1), mid(c1, c2), mid(c2, q)
        d, e = mid(a, b), mid(b, c)
        m = mid(d, e)
        f = "{:.1f},{:.1f}".format
        self._half(ab, f"M{f(*p)} C{f(*a)} {f(*d)} {f(*m)}", width)
        self._half(ba, f"M{f(*q)} C{f(*c)} {f(*e)} {f(*m)}", width)

    def square(self, x: float, y: float, size: float, fill: str, tip: str, node: str = "",
               cls: str = "node") -> None:
        self.marks.append(f'<rect class="{cls}" x="{x - size / 2:.1f}" y="{y - size / 2:.1f}" '
                          f'width="{size:.1f}" height="{size:.1f}" fill="{fill}" stroke="#333" '
                          f'stroke-width="0.6" data-node="{html.escape(node)}">'
                          f'<title>{html.escape(tip)}</title></rect>')

    def text(self, x: float, y: float, s: str, size: float = 10, anchor: str = "middle",
             rotate: float = 0, weight: str = "normal") -> None:
        rot = f' transform="rotate({rotate:.0f} {x:.1f} {y:.1f})"' if rotate else ""
        self.marks.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}"{rot}>{html.escape(s)}</text>')

    def raw(self, el: str, below: bool = False) -> None:
        (self.idle if below else self.marks).append(el)

    def svg(self, cls: str, title: str) -> str:
        body = "\n".join(self.idle + self.busy + self.marks)
        return (f'<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}" '
                f'height="{self.height:.0f}" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
                f'font-family="sans-serif"><title>{html.escape(title)}</title>\n{body}\n</svg>')


def heatmap_svg(matrix, labels: list[str], scale: ColourScale, what: str, cell: float | None = None,
                max_labels: int = 64) -> str:
    """Rows (senders) x columns (receivers) as coloured cells, exact values on hover."""
    n = len(labels)
    cell = cell or max(3.0, min(14.0, 640.0 / max(n, 1)))
    pad = 70
    size = pad + n * cell + 10
    out = [f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{size:.0f}" height="{size:.0f}" '
           f'font-family="sans-serif"><title>{html.escape(what)}</title>']
    step = max(1, math.ceil(n / max_labels))
    for i in range(0, n, step):
        y = pad + (i + 0.5) * cell
        out.append(f'<text x="{pad - 3}" y="{y + 3:.1f}" font-size="{min(9, cell * 0.9 * step):.1f}" '
                   f'text-anchor="end">{html.escape(labels[i])}</text>')
        out.append(f'<text x="{y:.1f}" y="{pad - 3}" font-size="{min(9, cell * 0.9 * step):.1f}" '
                   f'transform="rotate(-90 {y:.1f} {pad - 3})">{html.escape(labels[i])}</text>')
    for i in range(n):
        for j in range(n):
            v = float(matrix[i][j])
            if v <= 0:
                continue
            out.append(f'<rect x="{pad + j * cell:.1f}" y="{pad + i * cell:.1f}" width="{cell:.2f}" '
                       f'height="{cell:.2f}" fill="{scale.colour(v)}"><title>{html.escape(labels[i])} -> '
                       f'{html.escape(labels[j])}: {html.escape(fmt_bytes(v) if scale.what == "bytes" else fmt_count(v))}'
                       f'</title></rect>')
    out.append(f'<rect x="{pad}" y="{pad}" width="{n * cell:.1f}" height="{n * cell:.1f}" fill="none" '
               f'stroke="#999"/></svg>')
    return "\n".join(out)


def cables(topo) -> list[tuple]:
    """Every cable of ``topo`` as ``(a, b, link a->b, link b->a, k, n)``: ``k``-th of
    ``n`` parallel cables between nodes a and b. A directed pair ``a -> b #k`` /
    ``b -> a #k`` is one cable; an undirected link is a cable on its own (both halves
    the same link). Loopback, limiter and backbone links are not cables."""
    pending: dict[tuple, object] = {}
    out: list[list] = []
    for link in topo.links.values():
        if not link.is_cable:
            continue
        if not link.directed:
            out.append([link.src, link.dst, link, link])
            continue
        back = pending.pop((link.dst, link.src, link.cable), None)
        if back is None:
            pending[(link.src, link.dst, link.cable)] = link
        else:
            out.append([back.src, back.dst, back, link])
    for (a, b, _), link in pending.items():      # a direction without its reverse
        out.append([a, b, link, None])
    count: dict[frozenset, int] = {}
    for c in out:
        count[frozenset(c[:2])] = count.get(frozenset(c[:2]), 0) + 1
    seen: dict[frozenset, int] = {}
    res = []
    for a, b, ab, ba in out:
        key = frozenset((a, b))
        k = seen.get(key, 0)
        seen[key] = k + 1
        res.append((a, b, ab, ba, k, count[key]))
    return res
