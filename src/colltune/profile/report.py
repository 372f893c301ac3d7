"""Self-contained HTML report of a traffic profile on a network topology (issue 17).

The page holds, for one profile or two side by side (one colour scale for both): a
"what is missing" box first (ranks without a file, hosts not in the topology, regions
or collective kinds whose traffic is not visible), the SVG drawing of the topology with
every cable's two directions coloured, totals, the most loaded links, the breakdown by
region and collective kind, and the node x node and rank x rank matrices as heatmaps.
No script, style sheet, font or image is fetched: everything is inline.

The drawing code takes a :class:`Traffic` (host matrix, rank matrix, metadata) so it
does not depend on how a profile was read; :func:`traffic_from_profile` builds one
from ``colltune.profile.counts.TrafficProfile``.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from dataclasses import dataclass, field

import numpy as np

from .counts import LEFT_OUT
from .draw_dragonfly import draw_dragonfly
from .draw_fattree import draw_layered, draw_torus
from .draw_svg import ColourScale, fmt_bytes, fmt_count, heatmap_svg
from .loads import LinkLoads, link_loads

__all__ = ["Traffic", "Analysis", "analyse", "traffic_from_profile", "draw_topology", "render"]

SVG_MATRIX_MAX = 128    # larger matrices become a PNG (an SVG cell per entry gets too heavy)


@dataclass
class Traffic:
    """What a report needs from a profile. ``host_bytes``/``host_messages``: node x node
    matrices over ``hosts`` (rows send); ``rank_*``: rank x rank (or None);
    ``missing_ranks``: world ranks without a file; ``parts``: rows ``{region, kind,
    bytes, messages, visibility[, host_matrix: (bytes, messages, hosts)]}`` (with the
    matrix, the report gives the part's most loaded link and hop-bytes); ``notes``:
    caveats to show as they are."""
    label: str
    hosts: list[str]
    host_bytes: np.ndarray
    host_messages: np.ndarray
    rank_bytes: np.ndarray | None = None
    rank_messages: np.ndarray | None = None
    rank_hosts: list[str] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)
    parts: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    region: str = "run"
    kind: str | None = None
    source: str = ""
    # (region, kind, communicator size) -> rank-calls of the library's own collectives
    comm_calls: dict = field(default_factory=dict)


@dataclass
class Analysis:
    traffic: Traffic
    loads: LinkLoads
    dropped: dict            # host not in the topology -> (bytes sent, bytes received)
    used: set
    notes: list = field(default_factory=list)   # host-name matching (case, short name)

    @property
    def nonzero(self) -> dict:
        return self.loads.nonzero()


def traffic_from_profile(prof, region: str = "run", kind: str | None = None, label: str = "",
                         source: str = "") -> Traffic:
    """A :class:`Traffic` from H2's ``TrafficProfile`` (API of the profiling spec)."""
    hb, hm, hosts = prof.host_matrix(region=region, kind=kind)
    rb, rm = prof.matrix(region=region, kind=kind)
    parts = []
    for r in prof.regions():
        for k in prof.kinds():
            b, m = prof.matrix(region=r, kind=k)
            vis = prof.visibility(r, k)
            if b.sum() or m.sum() or vis == "not visible":
                parts.append({"region": r, "kind": k, "bytes": float(b.sum()), "messages": float(m.sum()),
                              "visibility": vis, "host_matrix": prof.host_matrix(region=r, kind=k)})
    notes = list(prof.notes)
    if kind and kind not in prof.kinds(region):     # asked for, absent: say so, not "all fine"
        notes.insert(0, f"no {kind} traffic in region '{region}' (kinds there: "
                        f"{', '.join(prof.kinds(region)) or 'none'}): there is nothing to draw")
    return Traffic(label=label or source or "profile", hosts=list(hosts), host_bytes=np.asarray(hb, float),
                   host_messages=np.asarray(hm, float), rank_bytes=np.asarray(rb, float),
                   rank_messages=np.asarray(rm, float), rank_hosts=list(prof.hosts),
                   missing_ranks=list(prof.missing), parts=parts, notes=notes,
                   comm_calls=dict(prof.comm_calls),
                   region=region, kind=kind, source=source)


def analyse(traffic: Traffic, topo) -> Analysis:
    """Link loads of the traffic's host matrix. Recorded host names are matched to the
    topology's (exact, case, short name: ``resolve.map_hosts``); hosts it lacks are left
    out (never a crash) and listed with the bytes they sent and received."""
    from .resolve import map_hosts
    hmap = map_hosts(traffic.hosts, topo)
    keep = [i for i, h in enumerate(traffic.hosts) if h in hmap.mapping]
    dropped = {}
    for i, h in enumerate(traffic.hosts):
        if h not in hmap.mapping:
            dropped[h or "(no host: rank file missing)"] = (float(traffic.host_bytes[i].sum()),
                                                            float(traffic.host_bytes[:, i].sum()))
    ix = np.ix_(keep, keep)
    names = [hmap.mapping[traffic.hosts[i]] for i in keep]
    loads = link_loads(topo, traffic.host_bytes[ix], traffic.host_messages[ix], hosts=names)
    return Analysis(traffic, loads, dropped, set(names),
                    [n for n in hmap.notes if "is not in topology" not in n])


def draw_topology(topo, loads: dict, scale: ColourScale, used: set, title: str) -> str:
    """The SVG drawing that suits the topology's kind."""
    if topo.kind == "DRAGONFLY":
        return draw_dragonfly(topo, loads, scale, used, title)
    if topo.kind == "TORUS":
        return draw_torus(topo, loads, scale, used, title)
    return draw_layered(topo, loads, scale, used, title)


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-top:.8em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 7px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}.note{color:#555;font-size:.9em}
.missing{border:3px solid #c0392b;background:#fdecea;padding:.4em 1em;margin:1em 0}
.missing h2{border:none;padding-top:0;color:#c0392b}
.ok{border:2px solid #27ae60;background:#eafaf1;padding:.3em 1em}
.row{display:flex;gap:24px;align-items:flex-start;overflow-x:auto}
.panel{flex:none}.panel h3{margin:.2em 0}"""


def _table(header: list[str], rows: list[list], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{html.escape(h)}</th>' for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{html.escape(str(v))}</td>'
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _routing(topo) -> str:
    return str(topo.params.get("routing") or "SimGrid 3.32's routing of the platform")


def _missing(a: Analysis, topo) -> list[str]:
    t = a.traffic
    out = []
    if _routing(topo).startswith("modelled"):
        out.append(f"the routes are modelled, not read from the fabric: {_routing(topo)}")
    if t.missing_ranks:
        rs = ", ".join(map(str, t.missing_ranks[:40])) + (" ..." if len(t.missing_ranks) > 40 else "")
        out.append(f"{len(t.missing_ranks)} rank(s) left no file (crashed or not profiled): {rs}. "
                   "Their sends are absent; what other ranks sent to them is drawn.")
    for h, (sent, recv) in a.dropped.items():
        out.append(f"host '{h}' is not in topology '{topo.name}': its traffic (sent {fmt_bytes(sent)}, "
                   f"received {fmt_bytes(recv)}) is left out of the drawing and the link tables.")
    for p in t.parts:
        if p["visibility"] == "not visible":
            out.append(f"region '{p['region']}', {p['kind']}: the library's traffic is not visible "
                       "(no counters for it): it is missing, not zero.")
    for p in t.parts:
        if p["visibility"] == "modelled":
            out.append(f"region '{p['region']}', {p['kind']}: counts are modelled from the algorithm, "
                       "not measured.")
    return out + [n for n in t.notes if not n.startswith(LEFT_OUT)] + list(a.notes)


def _left_out(a: Analysis) -> list[str]:
    """Traffic left out on purpose (colltune's own, paused counting): said, not as missing."""
    return [n[len(LEFT_OUT):] for n in a.traffic.notes if n.startswith(LEFT_OUT)]


def _totals(analyses: list[Analysis]) -> str:
    rows = []
    for name, f in (("bytes offered", lambda a: fmt_bytes(a.loads.offered_bytes)),
                    ("messages offered", lambda a: fmt_count(a.loads.offered_messages)),
                    ("host pairs with traffic", lambda a: a.loads.pairs),
                    ("hop-bytes", lambda a: f"{a.loads.hop_bytes:.0f}"),
                    ("mean hops per byte", lambda a: f"{a.loads.hop_bytes / a.loads.offered_bytes:.2f}"
                     if a.loads.offered_bytes else "-"),
                    ("most loaded link", lambda a: _peak(a)[0]),
                    ("its bytes", lambda a: _peak(a)[1]),
                    ("its messages", lambda a: _peak(a)[2])):
        rows.append([name] + [f(a) for a in analyses])
    return _table([""] + [a.traffic.label for a in analyses], rows)


def _no_link(sent) -> str:
    """The most loaded link where none is: messages that never left their host load none."""
    return "(inside the hosts only)" if sent else "(nothing sent)"


def _peak(a: Analysis) -> tuple[str, str, str]:
    best = a.loads.most_loaded()
    if best is None:
        return (_no_link(a.traffic.host_bytes.sum() + a.traffic.host_messages.sum()), "0", "0")
    link, b, m = best
    return (link.id, fmt_bytes(b), fmt_count(m))


def _top_links(a: Analysis, k: int = 15) -> str:
    rows = [[l.id, l.kind, fmt_bytes(b), fmt_count(m), f"{b / l.bandwidth * 1e3:.3g}" if l.bandwidth else "-",
             l.sg_name] for l, b, m in a.loads.top(k) if b or m]
    return _table(["link", "kind", "bytes", "messages", "ms at link bandwidth", "SimGrid name"], rows, left=2)


PART_PAIRS_MAX = 50_000   # host pairs with traffic up to which a part's links are computed


def _parts(t: Traffic, topo) -> str:
    if not t.parts:
        return "<p class='note'>No breakdown by region and kind in this input.</p>"
    from .resolve import map_hosts
    rows = []
    for p in t.parts:
        peak, hop = "-", "-"
        hm = p.get("host_matrix")
        if hm is not None and np.count_nonzero(hm[0]) + np.count_nonzero(hm[1]) <= PART_PAIRS_MAX:
            B, M, hosts = hm
            mapping = map_hosts(hosts, topo).mapping
            keep = [i for i, h in enumerate(hosts) if h in mapping]
            ld = link_loads(topo, np.asarray(B, float)[np.ix_(keep, keep)], np.asarray(M, float)[np.ix_(keep, keep)],
                            hosts=[mapping[hosts[i]] for i in keep])
            best = ld.most_loaded()
            peak = f"{best[0].id}: {fmt_bytes(best[1])}" if best else _no_link(p["bytes"] or p["messages"])
            hop = f"{ld.hop_bytes:.0f}"
        rows.append([p["region"], p["kind"], p["visibility"], fmt_bytes(p["bytes"]), fmt_count(p["messages"]),
                     hop, peak])
    table = _table(["region", "collective kind", "visibility", "bytes", "messages", "hop-bytes",
                    "most loaded link"], rows, left=3)
    if t.comm_calls:         # which communicators the library's collectives ran on
        table += ("<p class='note'>The library's own collectives by communicator size "
                  "(calls summed over the ranks):</p>"
                  + _table(["region", "collective kind", "communicator size", "rank-calls"],
                           [[r, k, str(n), fmt_count(c)] for (r, k, n), c in sorted(t.comm_calls.items())],
                           left=2))
    return table


def _matrix_png(m: np.ndarray, scale: ColourScale) -> str:
    import matplotlib.image as mpimg
    rgb = scale.rgb_array(m)
    rep = max(1, 640 // max(1, m.shape[0]))
    rgb = rgb.repeat(rep, 0).repeat(rep, 1)
    buf = io.BytesIO()
    mpimg.imsave(buf, rgb, format="png")
    return (f'<img class="heatmap" alt="matrix" src="data:image/png;base64,'
            f'{base64.b64encode(buf.getvalue()).decode()}">')


def _matrix(m: np.ndarray, labels: list[str], scale: ColourScale, what: str) -> str:
    if m is None or not len(labels):
        return "<p class='note'>(not available)</p>"
    if len(labels) <= SVG_MATRIX_MAX:
        return heatmap_svg(m, labels, scale, what)
    return _matrix_png(m, scale) + (f"<p class='note'>{len(labels)} x {len(labels)}: drawn as an image "
                                    "(no values on hover; see the CSV files)</p>")


def render(topo, traffics: list[Traffic], path: str | None = None, title: str | None = None,
           colour_by: str = "bytes") -> str:
    """Write (when ``path``) and return the HTML page for one or two profiles; the links
    coloured by their bytes or (colour_by="messages") messages."""
    analyses = [analyse(t, topo) for t in traffics]
    drawn = [{k: v for k, v in a.nonzero.items() if topo.links[k].is_cable} for a in analyses]
    scale = ColourScale([b if colour_by == "bytes" else m for d in drawn for b, m in d.values()],
                        colour_by)
    title = title or f"traffic on {topo.name}"
    sel = analyses[0].traffic
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p class='note'>Topology {html.escape(topo.name)} ({topo.kind}, {len(topo.hosts)} hosts, "
             f"{len(topo.nodes) - len(topo.hosts)} switches/routers, source {html.escape(str(topo.source))}). "
             f"Region <b>{html.escape(sel.region)}</b>, collective kind "
             f"<b>{html.escape(sel.kind or 'all')}</b>. Generated "
             f"{_dt.datetime.now().isoformat(timespec='seconds')}. Bytes are charged to every link of "
             f"each message's route; routes: {html.escape(_routing(topo))}.</p>"]
    for a in analyses:
        miss = _missing(a, topo)
        label = html.escape(a.traffic.label)
        if miss:
            parts.append(f"<div class='missing'><h2>What is missing ({label})</h2><ul>"
                         + "".join(f"<li>{html.escape(x)}</li>" for x in miss) + "</ul>"
                         "<p>Everything known is drawn and counted below.</p></div>")
        else:
            parts.append(f"<p class='ok'>{label}: every rank's file present, every host in the topology, "
                         "no invisible traffic reported.</p>")
        left = _left_out(a)
        if left:
            parts.append(f"<p class='note'>Left out on purpose ({label}): "
                         + " ".join(html.escape(x[0].upper() + x[1:] + ("" if x.endswith(".") else "."))
                                    for x in left) + "</p>")
    parts.append("<h2>Drawing</h2><p class='note'>Each cable is cut in the middle: the half at a node "
                 f"is coloured by the {colour_by} that node injected into the cable (the direction leaving it). "
                 "Hover for exact bytes and messages. Grey: no traffic; green: messages of 0 bytes only "
                 "(a barrier's). Loopback, limiter and backbone links "
                 "are not drawn (see the tables).</p>")
    parts.append(scale.legend())
    parts.append("<div class='row'>" + "".join(
        f"<div class='panel'><h3>{html.escape(a.traffic.label)}</h3>"
        + draw_topology(topo, d, scale, a.used, f"{a.traffic.label} on {topo.name}") + "</div>"
        for a, d in zip(analyses, drawn)) + "</div>")
    parts.append("<h2>Totals</h2>" + _totals(analyses))
    parts.append("<h2>Most loaded links</h2><div class='row'>" + "".join(
        f"<div class='panel'><h3>{html.escape(a.traffic.label)}</h3>{_top_links(a)}</div>" for a in analyses)
        + "</div>")
    parts.append("<h2>By region and collective kind</h2><div class='row'>" + "".join(
        f"<div class='panel'><h3>{html.escape(a.traffic.label)}</h3>{_parts(a.traffic, topo)}</div>"
        for a in analyses) + "</div>")
    mscale = ColourScale(np.concatenate([np.asarray(m, float).ravel() for t in traffics
                                         for m in (t.host_bytes, t.rank_bytes) if m is not None]))
    parts.append("<h2>Node x node bytes</h2><p class='note'>Rows send, columns receive; one colour scale "
                 "for every matrix of the page.</p>" + mscale.legend(240).replace("per link and direction",
                                                                                  "per pair")
                 + "<div class='row'>" + "".join(
                     f"<div class='panel'><h3>{html.escape(t.label)}</h3>"
                     f"{_matrix(t.host_bytes, t.hosts, mscale, 'node x node bytes')}</div>" for t in traffics)
                 + "</div>")
    parts.append("<h2>Rank x rank bytes</h2><div class='row'>" + "".join(
        f"<div class='panel'><h3>{html.escape(t.label)}</h3>"
        + _matrix(t.rank_bytes, [f"{r}" for r in range(len(t.rank_bytes))] if t.rank_bytes is not None else [],
                  mscale, "rank x rank bytes") + "</div>" for t in traffics) + "</div>")
    parts.append("</body></html>")
    text = "\n".join(parts)
    if path:
        with open(path, "w") as fh:
            fh.write(text)
    return text
