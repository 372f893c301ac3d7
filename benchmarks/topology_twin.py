#!/usr/bin/env python3
"""How much of an inter-node algorithm's gap over LBnet is the topology's? The same
algorithms on a bundled platform and on its flat twin, side by side.

    .venv/bin/python benchmarks/topology_twin.py                 # resumable (two stores here)
    .venv/bin/python benchmarks/topology_twin.py --no-run        # reprint
    .venv/bin/python benchmarks/topology_twin.py --layouts 16x1 --sizes 8M

The twin keeps every per-node number of the platform (injection bandwidth and latency of
a node's link, loopback, cores, SMPI settings and charge rates) and replaces the network
behind the nodes by a non-blocking crossbar (a flat SimGrid cluster whose backbone has
1000 GB/s and no latency): a message between two nodes crosses the sender's link and the
receiver's, nothing else. So a call that takes longer on the platform than on its twin
loses that time to the links behind the injection links (their sharing between flows,
their extra hops), not to the algorithm's bytes or its per-piece costs, which are the
same on both.

Default: colltune's HAN bcast on one rank per node (the leaders alone, no intra-node
stage: best_of_both_links.py's `leaders` rows) with the two inter-node shapes the
dragonfly's tuner deploys at 8 and 64 MiB, the double binary tree
(han[ibalg=6,ibs=32768,ibdepth=2]) and the chain (han[ibalg=3]). `colltune bench`
(one warm-up, one timed call; SimGrid is deterministic), one store per platform in
benchmarks/results/topology_twin/; a failed point is reported as failed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from best_of_both_report import _times, lbnet  # noqa: E402
from colltune import platforms  # noqa: E402
from colltune.sizes import human_bytes, parse_list  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/topology_twin"
DEFAULT_ALGS = "han[ibalg=6,ibdepth=2,ibs=32768],han[ibalg=3]"
# the cluster attributes the twin keeps: what a node and its own link are
KEPT = ("speed", "core", "bw", "lat", "sharing_policy", "loopback_bw", "loopback_lat")


def write_twin(plat, where: Path) -> Path:
    """The flat twin of plat's <cluster> (XML + side JSON, loadable by colltune)."""
    src = next(ET.parse(plat.xml_path).getroot().iter("cluster"))
    attrs = {k: src.get(k) for k in KEPT if src.get(k)}
    name = f"{plat.name}-flat"
    nodes = len(plat.hosts)
    cluster = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    xml = where / f"{name}.xml"
    xml.write_text(f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- flat twin of {plat.name} (benchmarks/topology_twin.py): same nodes and node links,
     a non-blocking crossbar behind them -->
<platform version="4.1">
  <cluster id="{name}" prefix="node-" radical="0-{nodes - 1}" suffix="" {cluster}
           bb_bw="1000GBps" bb_lat="0us"/>
</platform>
""")
    side = json.loads(Path(plat.xml_path).with_suffix(".json").read_text())
    twin = {"name": name, "nodes": nodes, "cores_per_node": plat.cores_per_node,
            "description": f"flat twin of {plat.name}: its node links, a non-blocking crossbar behind them",
            "smpi_config": side["smpi_config"], "charge_rates": side["charge_rates"]}
    (where / f"{name}.json").write_text(json.dumps(twin, indent=1) + "\n")
    return xml


def bench(platform: str, store: Path, layouts: str, sizes: str, algs: str, timeout: float) -> None:
    cmd = [str(ROOT / ".venv/bin/colltune"), "bench", "--platform", platform, "--provider", "both",
           "--default-selector", "ompi", "--layouts", layouts, "--sizes", sizes, "--coll", "bcast",
           "--algorithms", algs, "--store", str(store), "--output-dir", str(store.parent / "tables"),
           "--campaign", "twin", "--warmup", "1", "--min-reps", "1", "--max-reps", "1", "--check", "none",
           "--timeout", str(timeout), "-q"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="dragonfly")
    ap.add_argument("--layouts", default="16x1,48x1,128x1", help="NODESxPPN list")
    ap.add_argument("--sizes", default="8M,64M")
    ap.add_argument("--algorithms", default=DEFAULT_ALGS, help="colltune bcast labels, comma-separated")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per launch")
    ap.add_argument("--no-run", action="store_true", help="reprint from the stores")
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    OUT.mkdir(parents=True, exist_ok=True)
    stores = {"platform": OUT / f"{a.platform}.sqlite", "twin": OUT / f"{a.platform}-flat.sqlite"}
    if not a.no_run:
        with tempfile.TemporaryDirectory(prefix="twin-") as tmp:
            twin = write_twin(plat, Path(tmp))
            bench(a.platform, stores["platform"], a.layouts, a.sizes, a.algorithms, a.timeout)
            bench(str(twin), stores["twin"], a.layouts, a.sizes, a.algorithms, a.timeout)
    times = {k: _times(str(v)) if v.exists() else {} for k, v in stores.items()}
    # the store's labels list the parameters sorted by name
    algs = [x.split("[")[0] + ("[" + ",".join(sorted(x[:-1].split("[")[1].split(","))) + "]" if "[" in x else "")
            for x in a.algorithms.replace("],", "]\n").split("\n") if x]
    lines = [f"bcast on {a.platform} and on its flat twin (same node links, non-blocking crossbar behind "
             "them), one rank per node, time to completion in us, LBnet = m/B",
             f"{'layout':<7} {'size':>7} {'algorithm':<36} {a.platform:>10} {'/LBnet':>7} {'flat twin':>10} "
             f"{'/LBnet':>7} {'platform/twin':>13}"]
    for lay in a.layouts.split(","):
        n, p = (int(x) for x in lay.split("x"))
        for m in parse_list(a.sizes):
            lb = lbnet(plat, "bcast", m, n)
            for alg in algs:
                t = {k: v.get(("bcast", n, p, m, "colltune", alg), (None, None, None)) for k, v in times.items()}
                cell = {k: f"{s * 1e6:10.1f} {s / lb:6.2f}x" if s else f"{(st or 'not run'):>10} {'-':>7}"
                        for k, (st, s, _) in t.items()}
                tp, tt = t["platform"][1], t["twin"][1]
                lines.append(f"{lay:<7} {human_bytes(m):>7} {alg:<36} {cell['platform']} {cell['twin']} "
                             + (f"{tp / tt:12.2f}x" if tp and tt else f"{'-':>13}"))
    text = "\n".join(lines)
    print(text)
    (OUT / f"{a.platform}.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
