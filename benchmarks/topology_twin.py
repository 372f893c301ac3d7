#!/usr/bin/env python3
"""How much of an inter-node algorithm's gap over LBnet is the topology's? The same
algorithms on a bundled platform and on its twins, side by side.

    .venv/bin/python benchmarks/topology_twin.py                 # resumable (a store per platform and twin)
    .venv/bin/python benchmarks/topology_twin.py --no-run        # reprint
    .venv/bin/python benchmarks/topology_twin.py --layouts 16x1 --sizes 8M
    .venv/bin/python benchmarks/topology_twin.py --coll allreduce --layouts 16x12 --algorithms ring \
        --variants platform,nocross --tag allreduce      # report dragonfly-allreduce.txt

The twin keeps every per-node number of the platform (injection bandwidth and latency of
a node's link, loopback, cores, SMPI settings and charge rates) and replaces the network
behind the nodes by a non-blocking crossbar (a flat SimGrid cluster whose backbone has
1000 GB/s and no latency): a message between two nodes crosses the sender's link and the
receiver's, nothing else. So a call that takes longer on the platform than on its twin
loses that time to the links behind the injection links (their sharing between flows,
their extra hops), not to the algorithm's bytes or its per-piece costs, which are the
same on both. On a dragonfly a second twin, *spread*, keeps the whole network but puts
one node per router (the last field of topo_parameters is 1): what it saves is what the
nodes of one router lose by sharing that router's links to the others. A second table
runs the platform and its flat twin with SimGrid's network/crosstraffic off (the model of
TCP acknowledgements the bundled platforms keep on; docs/platforms.md).

Default: colltune's HAN bcast on one rank per node (the leaders alone, no intra-node
stage: best_of_both_links.py's `leaders` rows) with the two inter-node shapes the
dragonfly's tuner deploys at 8 and 64 MiB, the double binary tree
(han[ibalg=6,ibs=32768,ibdepth=2]) and the chain (han[ibalg=3]). `colltune bench`
(results checked first, one warm-up, one timed call; SimGrid is deterministic), one store per platform and twin in
benchmarks/results/topology_twin/; a failed point is reported as failed.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from best_of_both_report import _times, lbnet  # noqa: E402
from colltune import platforms  # noqa: E402
from colltune.commands import _split as split_labels  # noqa: E402  (the CLI's own --algorithms list)
from colltune.exporters.colltune_rules import split_label  # noqa: E402
from colltune.providers.base import Algorithm  # noqa: E402
from colltune.sizes import human_bytes, parse_list  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/topology_twin"
DEFAULT_ALGS = "han[ibalg=6,ibdepth=2,ibs=32768],han[ibalg=3]"
SELECTORS = ("ompi", "mpich")   # SMPI's default selectors, by name in --algorithms
NOCROSS = "nocross"
VARIANTS = ("platform", "flat", "spread", NOCROSS, "flat-" + NOCROSS)
# the cluster attributes the twin keeps: what a node and its own link are
KEPT = ("speed", "core", "bw", "lat", "sharing_policy", "loopback_bw", "loopback_lat")


def write_platform(where: Path, name: str, xml_text: str, side: dict) -> Path:
    """A platform colltune can load: NAME.xml and its side file NAME.json in `where`."""
    (where / f"{name}.json").write_text(json.dumps({**side, "name": name}, indent=1) + "\n")
    xml = where / f"{name}.xml"
    xml.write_text(xml_text)
    return xml


def edit_cluster(xml_text: str, name: str, *subs: tuple[str, str]) -> str:
    """xml_text with its <cluster> element renamed to `name` and each (pattern, value) of
    subs applied once inside it (the comment above the element quotes the values too)."""
    head, cluster = xml_text.split("<cluster", 1)
    for pattern, value in ((r'id="[^"]*"', f'id="{name}"'), *subs):
        cluster = re.sub(pattern, value, cluster, count=1)
    return head + "<cluster" + cluster


def write_twin(plat, where: Path) -> Path:
    """The flat twin of plat's <cluster> (XML + side JSON, loadable by colltune)."""
    src = next(ET.parse(plat.xml_path).getroot().iter("cluster"))
    attrs = {k: src.get(k) for k in KEPT if src.get(k)}
    name = f"{plat.name}-flat"
    nodes = len(plat.hosts)
    cluster = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    side = json.loads(Path(plat.xml_path).with_suffix(".json").read_text())
    return write_platform(where, name, f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- flat twin of {plat.name} (benchmarks/topology_twin.py): same nodes and node links,
     a non-blocking crossbar behind them -->
<platform version="4.1">
  <cluster id="{name}" prefix="node-" radical="0-{nodes - 1}" suffix="" {cluster}
           bb_bw="1000GBps" bb_lat="0us"/>
</platform>
""", {"nodes": nodes, "cores_per_node": plat.cores_per_node,
        "description": f"flat twin of {plat.name}: its node links, a non-blocking crossbar behind them",
        "smpi_config": side["smpi_config"], "charge_rates": side["charge_rates"]})


def write_spread(plat, where: Path) -> Path | None:
    """A dragonfly's spread twin: the same network with one node per router (the last
    field of topo_parameters), so no two nodes share a router's links; None for other
    topologies."""
    src = Path(plat.xml_path).read_text()
    side = json.loads(Path(plat.xml_path).with_suffix(".json").read_text())
    topo = side.get("topology", {})
    if topo.get("kind") != "DRAGONFLY":
        return None
    fields = topo["topo_parameters"].split(";")
    routers = 1
    for f in fields[:3]:
        routers *= int(f.split(",")[0])
    new = ";".join(fields[:3] + ["1"])
    name = f"{plat.name}-spread"
    xml = edit_cluster(src, name, (r'radical="0-\d+"', f'radical="0-{routers - 1}"'),
                       (r'topo_parameters="[^"]*"', f'topo_parameters="{new}"'))
    return write_platform(where, name, xml,
                          {**side, "nodes": routers, "topology": {**topo, "topo_parameters": new}})


def bench(platform: str, store: Path, coll: str, layouts: str, sizes: str, algs: str, timeout: float,
          tmp: Path) -> None:
    """One `colltune bench` campaign ('twin'); every point's result data checked first."""
    cmd = [str(ROOT / ".venv/bin/colltune"), "bench", "--platform", platform, "--provider", "both",
           "--default-selector", "ompi", "--layouts", layouts, "--sizes", sizes, "--coll", coll,
           "--algorithms", algs, "--store", str(store), "--output-dir", str(tmp / "tables"),
           "--campaign", "twin", "--warmup", "1", "--min-reps", "1", "--max-reps", "1", "--check", "first",
           "--timeout", str(timeout), "-q"]
    rc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode
    if rc not in (0, 1):        # 1: a point failed, recorded in the store and reported as failed
        raise SystemExit(f"colltune bench on {platform} exited {rc}")


def without_crosstraffic(xml: Path, where: Path) -> Path:
    """A copy of the platform (XML + side JSON) with network/crosstraffic off."""
    name = f"{xml.stem}-{NOCROSS}"
    side = json.loads(xml.with_suffix(".json").read_text())
    return write_platform(where, name, edit_cluster(xml.read_text(), name),
                          {**side, "smpi_config": {**side["smpi_config"], "network/crosstraffic": "0"}})


def provider_alg(label: str) -> tuple[str, str]:
    """The store's (provider, algorithm) of an --algorithms entry."""
    return ("smpi", label) if label in SELECTORS else ("colltune", label)


def measured(times, variant, coll, lay, m, alg) -> tuple:
    """(status, seconds) of one point in one variant's store; (None, None) if not there."""
    n, p = (int(x) for x in lay.split("x"))
    return times[variant].get((coll, n, p, m, *provider_alg(alg)), (None, None, None))[:2]


def versus(coll, times, variants, points) -> list[str]:
    """T(selector)/T(algorithm) per point, one column per variant: whether a ratio measured
    on the platform holds without crosstraffic; [] when no selector was asked for."""
    sels = [s for s in SELECTORS if any(alg == s for _, _, alg in points)]
    if not sels:
        return []
    out = [f"T(selector) / T(algorithm), {' / '.join(variants)}",
           f"{'layout':<7} {'size':>7} {'algorithm':<36}" + "".join(f" {s + ' / it':>20}" for s in sels)]
    for lay, m, alg in points:
        if alg in SELECTORS:
            continue
        cells = []
        for s in sels:
            r = []
            for k in variants:
                ts, ta = measured(times, k, coll, lay, m, s)[1], measured(times, k, coll, lay, m, alg)[1]
                r.append(ts / ta if ts and ta else None)
            cells.append(" / ".join(f"{x:.2f}x" if x else "-" for x in r))
        out.append(f"{lay:<7} {human_bytes(m):>7} {alg:<36}" + "".join(f" {c:>20}" for c in cells))
    return out


def table(plat, coll, times, base, twins, points) -> list[str]:
    """base's time and LBnet ratio per point, then each twin's and base/twin."""
    if base not in times:
        return [f"({base}: not run)"]
    label = plat.name if base == "platform" else f"{plat.name}-{base}"
    out = [f"{'layout':<7} {'size':>7} {'algorithm':<36} {label[:18]:>18} {'/LBnet':>7}"
           + "".join(f" {k + ' twin':>18} {'/LBnet':>7} {'ratio':>7}" for k in twins)]
    for lay, m, alg in points:
        lb = lbnet(plat, coll, m, int(lay.split("x")[0]))
        t = {k: measured(times, k, coll, lay, m, alg) for k in [base, *twins]}
        cell = {k: f"{sec * 1e6:18.1f} {sec / lb:6.2f}x" if sec else f"{(st or 'not run'):>18} {'-':>7}"
                for k, (st, sec) in t.items()}
        tb = t[base][1]
        out.append(f"{lay:<7} {human_bytes(m):>7} {alg:<36} {cell[base]}" + "".join(
            f" {cell[k]} " + (f"{tb / t[k][1]:6.2f}x" if tb and t[k][1] else f"{'-':>7}") for k in twins))
    return out + [f"ratio: {label}'s time / the twin's"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="dragonfly")
    ap.add_argument("--layouts", default="16x1,48x1,128x1", help="NODESxPPN list")
    ap.add_argument("--sizes", default="8M,64M")
    ap.add_argument("--coll", default="bcast", choices=("bcast", "allreduce"))
    ap.add_argument("--algorithms", default=DEFAULT_ALGS,
                    help="colltune labels of --coll or SMPI's selectors ompi / mpich, comma-separated "
                         "(default: bcast's two shapes)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per launch")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"which of {','.join(VARIANTS)} to run and print")
    ap.add_argument("--tag", default="", help="report file PLATFORM-TAG.txt instead of PLATFORM.txt")
    ap.add_argument("--no-run", action="store_true", help="reprint from the stores")
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    OUT.mkdir(parents=True, exist_ok=True)
    chosen = a.variants.split(",")
    if set(chosen) - set(VARIANTS):
        ap.error(f"--variants: unknown {sorted(set(chosen) - set(VARIANTS))}; known: {','.join(VARIANTS)}")
    stores = {k: OUT / f"{a.platform}{'' if k == 'platform' else '-' + k}.sqlite" for k in chosen}
    if not a.no_run:
        with tempfile.TemporaryDirectory(prefix="twin-") as tmp:
            where = Path(tmp)
            flat = write_twin(plat, where)
            twins = {"platform": a.platform, "flat": flat, "spread": write_spread(plat, where),
                     NOCROSS: without_crosstraffic(Path(plat.xml_path), where),
                     "flat-" + NOCROSS: without_crosstraffic(flat, where)}
            for k, xml in twins.items():
                if xml and k in stores:
                    bench(str(xml), stores[k], a.coll, a.layouts, a.sizes, a.algorithms, a.timeout, where)
    times = {k: _times(str(v)) for k, v in stores.items() if v.exists()}
    # the store's labels, as the provider makes them (parameters sorted by name)
    algs = [base if base in SELECTORS else Algorithm("colltune", a.coll, base, params=tuple(sorted(params.items()))).label
            for base, params in map(split_label, split_labels(a.algorithms))]
    points = [(lay, m, alg) for lay in a.layouts.split(",") for m in parse_list(a.sizes) for alg in algs]
    lines = [f"{a.coll} on {a.platform} and on its twins, time to completion in us, "
             "LBnet = bcast m/B, allreduce 2m(N-1)/N/B (colltune's reductions charged); flat: the same node links, a non-blocking crossbar behind them; spread "
             "(dragonfly): the same network with one node per router",
             *table(plat, a.coll, times, "platform", [k for k in ("flat", "spread") if k in times], points), "",
             f"the same without SimGrid's crosstraffic (network/crosstraffic:0: a transfer no longer also "
             f"loads its reverse route, SimGrid's model of TCP acknowledgements), {a.platform} and its flat twin",
             *table(plat, a.coll, times, NOCROSS, [k for k in ("flat-" + NOCROSS,) if k in times], points), "",
             f"{a.platform} with crosstraffic on and off",
             *table(plat, a.coll, times, "platform", [k for k in (NOCROSS,) if k in times], points)]
    both = [k for k in ("platform", NOCROSS) if k in times]
    if both and (ratios := versus(a.coll, times, both, points)):
        lines += ["", *ratios]
    text = "\n".join(lines)
    print(text)
    (OUT / f"{a.platform}{'-' + a.tag if a.tag else ''}.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
