#!/usr/bin/env python3
"""Why a relay loses bandwidth on the bundled dragonfly: its two routes' lengths.

    .venv/bin/python benchmarks/relay_routes.py            # seconds; writes results/relay_routes/dragonfly.txt
    .venv/bin/python benchmarks/relay_routes.py --sizes 8M,64M --ps 4096 --w 8

Every pipelined bcast (chain_flow, tree_flow, the HAN trees) has relays: nodes that
receive the message while they send it on. Three ranks on three nodes, rank 1 the relay
(benchmarks/relay_routes.c, compiled with smpicc): `pair` sends m bytes into the relay
while it sends m other bytes out; `chain` passes m bytes through it in pieces, as
bcast/chain_flow does. Per host triple, the number of links of the route in (rank 0 to 1)
and out (rank 1 to 2), from SimGrid's routes (colltune.profile): 2 inside a router, 3
between two routers of a chassis. Each time is over m/B, B the node link's bandwidth
(LBnet of a bcast).

What it shows: with network/crosstraffic on (SimGrid's model of TCP acknowledgements, kept
by the bundled platforms: docs/platforms.md) each flow also loads its reverse route, so a
relay's incoming and outgoing flows share both of its node links, and SimGrid shares a
link among flows in inverse proportion to their routes' latency (its sharing penalty):
routes of equal length, 1.05x; a 3-link route out of a relay fed over 2 links runs at
about two thirds of the rate in until the incoming flow ends. With crosstraffic off
the relay's in and out flows meet on no link and both run at B. A chain in node order
on the dragonfly crosses a router every 4 nodes (2, 2, 2, 3 links), so its relays at
router boundaries have unequal routes.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune import platforms
from colltune.profile import load_topology
from colltune.sizes import human_bytes, parse_list

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks/relay_routes.c"
OUT = ROOT / "benchmarks/results/relay_routes"
TRIPLES = ("node-0,node-1,node-2", "node-2,node-3,node-4", "node-3,node-4,node-5",
           "node-0,node-4,node-8")
VARIANTS = {"on": [], "off": ["--cfg=network/crosstraffic:0"]}
LINE = re.compile(r"pair_in_us (\S+) pair_out_us (\S+) chain_us (\S+)")


def build(work: Path) -> Path:
    smpicc = shutil.which("smpicc")
    if not smpicc:
        sys.exit("relay_routes: smpicc not found; install SimGrid (make setup installs simgrid "
                 "and libsimgrid-dev)")
    exe = work / "relay_routes"
    subprocess.run([smpicc, "-O2", "-o", str(exe), str(SOURCE)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return exe


def run(exe: Path, plat, hosts: list[str], extra: list[str], m: int, ps: int, w: int,
        work: Path) -> tuple[float, float, float]:
    hf = plat.write_hostfile(3, 1, work / "hostfile", hosts=hosts)
    cmd = ["smpirun", "-np", "3", "-platform", plat.xml_path, "-hostfile", hf,
           *plat.smpirun_cfg_args(), *extra, "--log=root.thres:critical",
           str(exe), str(m), str(ps), str(w)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    got = LINE.search(p.stdout)
    if p.returncode or not got:
        raise RuntimeError(f"relay_routes {hosts} {extra}: exit {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return tuple(float(x) for x in got.groups())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="dragonfly")
    ap.add_argument("--sizes", default="8M", help="message sizes m (default 8M)")
    ap.add_argument("--ps", type=int, default=4096, help="chain piece bytes (chain_flow's default)")
    ap.add_argument("--w", type=int, default=8, help="chain receives posted (chain_flow's preset)")
    a = ap.parse_args(argv)
    plat = platforms.load(a.platform)
    topo = load_topology(plat)
    lines = [f"{a.platform}: relay between two node links; pair = m in and m out at once, chain = "
             f"m through the relay in {a.ps} B pieces, {a.w} receives posted (MPI_Isend)",
             "time / LBnet, LBnet = m / B (B = the node link's bandwidth); links in / out: "
             "links of the routes rank 0 -> 1 and 1 -> 2", "",
             f"{'size':>7} {'hosts':24} {'links':>5} {'crosstraffic':>12} {'pair in':>9} "
             f"{'pair out':>9} {'chain':>9} {'in/LB':>6} {'out/LB':>6} {'chain/LB':>8}"]
    with tempfile.TemporaryDirectory(prefix="relay-routes-") as d:
        work = Path(d)
        exe = build(work)
        for m in parse_list(a.sizes):
            for triple in TRIPLES:
                hosts = triple.split(",")
                route_in, route_out = (topo.route(hosts[i], hosts[i + 1]) for i in (0, 1))
                lbnet = m / min(route_in[0].bandwidth, route_out[0].bandwidth) * 1e6
                for name, extra in VARIANTS.items():
                    tin, tout, tchain = run(exe, plat, hosts, extra, m, a.ps, a.w, work)
                    lines.append(f"{human_bytes(m):>7} {triple:24} {len(route_in):>2}/{len(route_out):<2} "
                                 f"{name:>12} {tin:9.1f} {tout:9.1f} {tchain:9.1f} "
                                 f"{tin / lbnet:5.2f}x {tout / lbnet:5.2f}x {tchain / lbnet:7.2f}x")
                    print(lines[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{a.platform}.txt").write_text("\n".join(lines) + "\n")
    print(f"written {OUT / (a.platform + '.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
