"""The traffic report's drawings, rendered in a real headless Chromium: coloured links
exactly where the traffic flowed (SVG attributes read from Chromium's DOM, and the
screenshot's pixels at those lines), the dragonfly at 1152 nodes, two profiles on one
colour scale, a host the topology lacks reported while the rest is drawn."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np

from colltune.profile import load_topology
from colltune.profile.draw_svg import NO_TRAFFIC, ColourScale
from colltune.profile.report import Traffic, render

# Collected in the page by Chromium itself: every drawn half's link, stroke, the screen
# position of its middle, and whether it is the topmost element there.
PROBE = """<pre id="probe"></pre><script>
const halves = [...document.querySelectorAll('path.half')];
const screen = (el, at) => { const p = el.getPointAtLength(at);
  return new DOMPoint(p.x, p.y).matrixTransform(el.getScreenCTM()); };
const loaded = [];   // points along loaded lines, 1 px apart (anti-aliasing tints their surroundings)
for (const el of halves) if (+el.getAttribute('data-bytes') > 0)
  for (let s = 0; s <= el.getTotalLength(); s += 1) loaded.push([el, screen(el, s)]);
const out = [];
for (const el of halves) {
  const pt = screen(el, el.getTotalLength() / 2);
  const hit = document.elementFromPoint(pt.x, pt.y);
  const near = loaded.some(([e, q]) => e !== el && Math.abs(q.x - pt.x) < 5 && Math.abs(q.y - pt.y) < 5);
  out.push({link: el.getAttribute('data-link'), stroke: el.getAttribute('stroke'),
            bytes: +el.getAttribute('data-bytes'), x: pt.x, y: pt.y, near: near,
            top: hit === el || (hit && hit.parentNode === el)});
}
document.getElementById('probe').textContent = JSON.stringify(out);
</script>"""
WINDOW = (2000, 1400)


def _chromium(html_path, workdir, *mode):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: run `make setup` (scripts/setup.sh installs it)"
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--force-device-scale-factor=1", "--hide-scrollbars",
                           f"--user-data-dir={workdir / 'chrome'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                           *mode, "file://" + os.path.abspath(html_path)],
                          capture_output=True, text=True, timeout=120, check=True)


def render_probe(html: str, tmp_path, shot: str = "shot.png"):
    """Chromium's view of the page: the probe's records and the screenshot (RGB uint8)."""
    page = tmp_path / "page.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"))
    dom = _chromium(page, tmp_path, "--dump-dom", "--virtual-time-budget=5000").stdout
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), "the probe script did not run"
    records = json.loads(m.group(1).replace("&amp;", "&").replace("&gt;", ">").replace("&lt;", "<"))
    _chromium(page, tmp_path, f"--screenshot={tmp_path / shot}")
    import matplotlib.image as mpimg
    img = (mpimg.imread(str(tmp_path / shot))[..., :3] * 255).round().astype(int)
    return records, img


def _hex(c: str) -> np.ndarray:
    return np.array([int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)])


def traffic(hosts, pairs, label="job", **kw) -> Traffic:
    """A synthetic host matrix: {(src, dst): bytes}, one message each."""
    ix = {h: i for i, h in enumerate(hosts)}
    B = np.zeros((len(hosts), len(hosts)))
    M = np.zeros_like(B)
    for (a, b), nb in pairs.items():
        B[ix[a], ix[b]] += nb
        M[ix[a], ix[b]] += 1
    return Traffic(label, list(hosts), B, M, **kw)


def check_exact_links(records, img, expected: set[str], idle_share: float = 0.5):
    """Coloured halves are exactly ``expected``, in the DOM and on screen; at least
    ``idle_share`` of the halves are idle, unhidden and checked grey on screen."""
    coloured = {r["link"] for r in records if r["stroke"] != NO_TRAFFIC}
    assert coloured == expected
    assert {r["link"] for r in records if r["bytes"] > 0} == expected
    h, w = img.shape[:2]
    seen_idle = 0
    for r in records:
        x, y = int(r["x"]), int(r["y"])
        assert 0 <= x < w and 0 <= y < h, f"{r['link']} drawn outside the screenshot at {x},{y}"
        px = img[y, x]
        if r["link"] in expected:
            assert r["top"], f"loaded link {r['link']} is hidden under another element"
            assert np.abs(px - _hex(r["stroke"])).max() <= 40, (r, px)
        elif r["top"] and not r["near"]:
            seen_idle += 1     # an idle line: grey or white (anti-aliased), never a traffic colour
            assert px.max() - px.min() <= 30, (r, px)
    assert seen_idle > idle_share * len(records)


def test_fattree_route_coloured_exactly(tmp_path):
    topo = load_topology("fattree64x12")
    hosts = topo.hosts
    t = traffic(hosts, {("node-0", "node-40"): 8 << 20})
    html = render(topo, [t], str(tmp_path / "r.html"))
    route = [l.id for l in topo.route("node-0", "node-40") if l.is_cable]
    assert len(route) == 4
    records, img = render_probe(html, tmp_path)
    # every cable drawn, two halves each: 64 host cables + 4 x 16 leaf-spine cables
    assert len(records) == 2 * (64 + 64)
    assert {r["link"] for r in records} == {l.id for l in topo.links.values() if l.is_cable}
    check_exact_links(records, img, set(route))
    # the half at node-0 of the node-0 cable carries the traffic, the half at the leaf does not
    mine = {r["link"]: r for r in records if r["link"] in ("node-0 -> L1-switch0", "L1-switch0 -> node-0")}
    assert mine["node-0 -> L1-switch0"]["y"] > mine["L1-switch0 -> node-0"]["y"]   # hosts at the bottom


def test_page_is_self_contained(tmp_path):
    topo = load_topology("small")
    t = traffic(topo.hosts, {("node-0", "node-5"): 1000, ("node-5", "node-0"): 10})
    html = render(topo, [t])
    urls = set(re.findall(r"(?:https?:|ftp:)//[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}         # the SVG namespace name, never fetched
    assert not re.search(r"<(?:link|iframe|object|embed)\b", html)
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!data:|#)""", html)
    assert "@import" not in html and "url(" not in html


def test_flat_and_torus_drawn(tmp_path):
    topo = load_topology("small")
    t = traffic(topo.hosts, {("node-1", "node-6"): 4096, ("node-6", "node-6"): 10})
    records, img = render_probe(render(topo, [t]), tmp_path, "flat.png")
    # the intra-node message stays on the loopback, which is not drawn
    check_exact_links(records, img, {"node-1 -> switch", "switch -> node-6"})
    xml = tmp_path / "torus.xml"
    xml.write_text("<?xml version='1.0'?><!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"
                   "<platform version=\"4.1\"><zone id=\"w\" routing=\"Full\"><cluster id=\"t\" prefix=\"n\" "
                   "radical=\"0-23\" suffix=\"\" bw=\"1GBps\" lat=\"1us\" topology=\"TORUS\" "
                   "topo_parameters=\"3,4,2\"/></zone></platform>")
    torus = load_topology(str(xml))
    t = traffic(torus.hosts, {("n0", "n23"): 5000})
    route = {l.id for l in torus.route("n0", "n23") if l.is_cable}
    assert route == {"n0 -> n2", "n2 -> n11", "n11 -> n23 #0"}   # x and y wrap around, then z
    records, img = render_probe(render(torus, [t]), tmp_path, "torus.png")
    check_exact_links(records, img, route)


def test_missing_host_reported_rest_drawn(tmp_path):
    topo = load_topology("fattree64x12")
    hosts = ["node-3", "node-17", "mystery-9"]
    t = traffic(hosts, {("node-3", "node-17"): 5 << 20, ("mystery-9", "node-3"): 777},
                missing_ranks=[4, 7])
    html = render(topo, [t])
    box = re.search(r"<div class='missing'>(.*?)</div>", html, re.S).group(1)
    assert "mystery-9" in box and "777 B" in box and "not in topology" in box
    assert "2 rank(s) left no file" in box and ": 4, 7." in box
    records, img = render_probe(html, tmp_path)
    check_exact_links(records, img, {l.id for l in topo.route("node-3", "node-17") if l.is_cable})


def test_dragonfly_1152_nodes(tmp_path):
    topo = load_topology("dragonfly")
    # node-0 (group 0) to node-1151 (group 2) and node-700 (group 1) to node-5 (group 0)
    pairs = {("node-0", "node-1151"): 1 << 20, ("node-700", "node-5"): 3 << 20}
    t = traffic(["node-0", "node-5", "node-700", "node-1151"], pairs)
    html = render(topo, [t])
    expected = set()
    for a, b in pairs:
        expected |= {l.id for l in topo.route(a, b) if l.is_cable and not l.kind.startswith("local")}
    assert sum(topo.links[x].kind == "blue" for x in expected) == 2
    records, img = render_probe(html, tmp_path, "dragonfly.png")
    assert len(records) == 2 * (2160 + 720 + 3)   # green, black and blue cables, two halves each
    check_exact_links(records, img, expected, idle_share=0.35)   # arcs overlap more here
    # hosts aggregated per router: one mark per router, the 4 hosts in its tooltip
    assert html.count('<g class="hosts"') == 288
    assert 'data-hosts="node-0,node-1,node-2,node-3"' in html


def test_two_profiles_share_one_scale(tmp_path):
    topo = load_topology("fattree64x12")
    hosts = [f"node-{i}" for i in range(0, 64, 4)]
    lib = traffic(hosts, {("node-0", h): 1 << 20 for h in hosts[1:]}, "library bcast")
    han = traffic(hosts, {("node-0", "node-16"): 1 << 20, ("node-16", "node-20"): 1 << 20}, "colltune HAN bcast")
    html = render(topo, [lib, han])
    assert html.count("<svg class=\"topology fattree\"") == 2
    legends = re.findall(r'<svg class="legend".*?</svg>', html, re.S)
    assert "15.0 MiB" in legends[0] and "1.0 MiB" in legends[0]   # node-0's up link of the library's bcast
    records, img = render_probe(html, tmp_path, "pair.png")
    left = [r for r in records[: len(records) // 2]]
    right = [r for r in records[len(records) // 2:]]
    assert max(r["x"] for r in left) < min(r["x"] for r in right)
    scale = ColourScale([1 << 20, 15 << 20])
    for side in (left, right):
        for r in side:
            assert r["stroke"] == scale.colour(r["bytes"])
    # the same link with the same bytes gets the same colour on both sides
    l0 = {r["link"]: r for r in left}
    r0 = {r["link"]: r for r in right}
    assert l0["L1-switch1 -> node-20"]["stroke"] == r0["L1-switch1 -> node-20"]["stroke"] != NO_TRAFFIC
    assert l0["node-0 -> L1-switch0"]["stroke"] != r0["node-0 -> L1-switch0"]["stroke"]


def test_loads_a_few_percent_apart_look_alike():
    """A user review: compared profiles at 695 and 713 KiB got the two ends of the
    scale; the scale spans at least a decade, so 2.6 % is a small step of it."""
    scale = ColourScale([695 << 10, 713 << 10])
    assert scale.fraction(713 << 10) == 1.0 and scale.fraction(695 << 10) > 0.98
    assert ColourScale([1 << 10, 1 << 20]).fraction(1 << 10) == 0.0     # wide ranges as before


def test_infiniband_parallel_cables_apart(tmp_path):
    """H4's InfiniBand fabric (ibsim data: 4 leaves, 2 spines, 2 cables per leaf-spine
    pair): the route takes cable #0, whose halves are lit; the parallel #1 stays grey and
    is drawn visibly apart."""
    from colltune.profile.resolve import resolve_topology
    data = os.path.join(os.path.dirname(__file__), "data", "profile", "ib", "ibnetdiscover.txt")
    topo = resolve_topology(data)
    t = traffic(topo.hosts, {("node01", "node09"): 1 << 20})
    route = {l.id for l in topo.route("node01", "node09") if l.is_cable}
    assert {"leaf1 -> spine1 #0", "spine1 -> leaf3 #0"} <= route
    records, img = render_probe(render(topo, [t]), tmp_path, "ib.png")
    check_exact_links(records, img, route)
    at = {r["link"]: (r["x"], r["y"]) for r in records}
    (x0, y0), (x1, y1) = at["leaf1 -> spine1 #0"], at["leaf1 -> spine1 #1"]
    assert abs(x0 - x1) + abs(y0 - y1) >= 5


def test_slurm_tree_says_routes_are_modelled():
    from colltune.profile.resolve import resolve_topology
    topo = resolve_topology(os.path.join(os.path.dirname(__file__), "data", "profile", "slurm", "topology.conf"))
    a, b = topo.hosts[0], topo.hosts[-1]
    html = render(topo, [traffic([a, b], {(a, b): 4096})])
    box = re.search(r"<div class='missing'>(.*?)</div>", html, re.S).group(1)
    assert "the routes are modelled" in box
    lit = set(re.findall(r'data-link="([^"]+)" data-bytes="4096"', html))
    assert lit == {l.id.replace(">", "&gt;") for l in topo.route(a, b) if l.is_cable}


def test_a_link_of_zero_byte_messages_is_not_drawn_as_idle():
    """A barrier's links (12 messages, 0 bytes) had been grey, the colour of no traffic."""
    from types import SimpleNamespace

    from colltune.profile.draw_svg import NO_TRAFFIC, ZERO_BYTES, Canvas, ColourScale
    cv = Canvas(100, 100, ColourScale([1000.0]), {"a->b": (0.0, 12.0), "b->a": (0.0, 0.0)})
    cv._half(SimpleNamespace(id="a->b"), "M0 0 L1 1", None)
    cv._half(SimpleNamespace(id="b->a"), "M1 1 L2 2", None)
    assert f'stroke="{ZERO_BYTES}"' in cv.busy[0] and 'data-messages="12"' in cv.busy[0]
    assert f'stroke="{NO_TRAFFIC}"' in cv.idle[0]
    assert "0-byte messages only" in ColourScale([1000.0]).legend()


def test_colour_by_messages():
    """--colour-by messages: a barrier's links (0 bytes, 12 messages) take the scale's top."""
    from types import SimpleNamespace

    from colltune.profile.draw_svg import Canvas, ColourScale
    scale = ColourScale([12.0, 3.0], "messages")
    cv = Canvas(100, 100, scale, {"a->b": (0.0, 12.0), "b->c": (4096.0, 3.0)})
    cv._half(SimpleNamespace(id="a->b"), "M0 0 L1 1", None)
    cv._half(SimpleNamespace(id="b->c"), "M1 1 L2 2", None)
    assert f'stroke="{scale.colour(12.0)}"' in cv.busy[0] and f'stroke="{scale.colour(3.0)}"' in cv.busy[1]
    assert scale.colour(12.0) != scale.colour(3.0) and "messages per link" in scale.legend()


def test_traffic_inside_one_host_is_not_nothing_sent():
    """A one-host run's bytes went over loopback only: the most loaded drawn link is none,
    and the page had said '(nothing sent)' beside the bytes (an analyst's review)."""
    topo = load_topology("fattree64x12")
    html = render(topo, [traffic(["node-3"], {("node-3", "node-3"): 6000})])
    assert "(inside the hosts only)" in html and "(nothing sent)" not in html
