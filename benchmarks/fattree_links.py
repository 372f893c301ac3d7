#!/usr/bin/env python3
"""Does a bundled platform carry a traffic pattern at full link rate?

    .venv/bin/python benchmarks/fattree_links.py [--platform fattree64x12] [--xml OTHER.xml]

Runs benchmarks/flows.c under smpirun: n senders on hosts S, n receivers on hosts
D, sender i -> receiver i, all at once, one rank per host; prints each pattern's
slowest-flow bandwidth against the link bandwidth. Patterns (fat-tree of 16-node
leaves): inside a leaf; shifts across leaves (i -> i+32, leaf 0 -> leaf 2, and
all 64 nodes i -> i+32); even nodes only; a seeded random permutation. D-mod-k
routing makes shifts non-blocking, not arbitrary permutations. This is how the
2:1 blocking of SimGrid's parallel-cable fat-tree was found (platform comment).
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune import platforms
from colltune.proc import run_group

HERE = Path(__file__).resolve().parent


def patterns(nodes: int) -> dict[str, tuple[list[int], list[int]]]:
    rnd = random.Random(3)
    perm = list(range(nodes))
    rnd.shuffle(perm)
    half = nodes // 2
    return {
        "inside a leaf (0-7 -> 8-15)": (list(range(8)), list(range(8, 16))),
        "shift, leaf 0 -> leaf 2 (i -> i+32)": (list(range(16)), list(range(32, 48))),
        "shift, all nodes (i -> i+32)": (list(range(half)), list(range(half, nodes))),
        "even nodes, leaf 0 -> leaf 2": (list(range(0, 16, 2)), list(range(32, 48, 2))),
        "random permutation (seed 3)": (perm[:half], perm[half:]),
    }


def build(tmp: Path) -> str:
    exe = tmp / "flows"
    r = subprocess.run(["smpicc", "-O2", str(HERE / "flows.c"), "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"smpicc benchmarks/flows.c failed:\n{r.stderr}")
    return str(exe)


def run_flows(plat, xml: str, exe: str, src: list[int], dst: list[int], tmp: Path,
              nbytes: int = 8 << 20, timeout: float = 300) -> dict:
    hosts = tmp / "hosts"
    hosts.write_text("".join(f"{plat.hosts[i]}\n" for i in src + dst))
    cmd = ["smpirun", "-np", str(len(src) + len(dst)), "-platform", xml, "-hostfile", str(hosts),
           *plat.smpirun_cfg_args(), "--log=root.thres:critical", exe, str(nbytes)]
    r = run_group(cmd, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode or not recs:
        raise RuntimeError(f"flows failed ({r.returncode}): {r.stderr[-500:]}")
    return recs[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="fattree64x12")
    ap.add_argument("--xml", help="another platform file with the same hosts (e.g. a variant)")
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    xml = a.xml or plat.xml_path
    tmp = Path(tempfile.mkdtemp(prefix="fattree-links-"))
    exe = build(tmp)
    from bounds import injection_bw   # noqa: E402 (benchmarks/ on sys.path)
    bw, _ = injection_bw(xml)
    print(f"{a.platform} ({xml}): link {bw / 1e9:g} GB/s; 8 MiB per flow, slowest flow")
    for name, (src, dst) in patterns(plat.nodes).items():
        r = run_flows(plat, xml, exe, src, dst, tmp)
        print(f"  {name:40s} {r['flows']:3d} flows {r['gbytes_per_s']:7.2f} GB/s "
              f"({r['gbytes_per_s'] * 1e9 / bw:5.2f} of the link)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
