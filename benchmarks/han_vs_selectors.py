#!/usr/bin/env python3
"""colltune HAN bcast/allreduce vs SMPI's `ompi` and `mpich` selectors on a
bundled platform, with the distance to the bandwidth lower bound.

    .venv/bin/python benchmarks/han_vs_selectors.py [--layout 16x12] [--sizes 8,1K,64K,1M,8M]
        [--out results/han_16x12.jsonl] [--timeout 600]

Every point is one smpirun of colltune-taskbench --whole (1 warm-up + 1 timed
call; SMPI is deterministic). Records are appended to --out as JSON lines and
points already there are skipped: the run is resumable. A crash or timeout is
recorded as such, never as a time. Lower bounds (>= 1 MiB): bcast m/B,
allreduce 2m(N-1)/N/B, B = the platform's link bandwidth (injection).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune import platforms
from colltune.sizes import human_bytes, parse_list

REPO = Path(__file__).resolve().parents[1]
HAN_SETTINGS = {
    "han-chain": "fs=1048576,ibs=131072,ibalg=3,iralg=3,irs=131072,salg=5",
    "han-binomial": "fs=524288,ibs=65536,ibalg=1,iralg=1,salg=5",
    "han-library": "imod=0,smod=0",
}
SELECTORS = ["ompi", "mpich"]


def injection_bw(xml: str) -> float:
    """The cluster's per-link bandwidth (`bw="12.5GBps"`) in bytes/s."""
    import re
    import xml.etree.ElementTree as ET
    c = next(ET.parse(xml).getroot().iter("cluster"))
    m = re.fullmatch(r"([\d.]+)([GMk]?)Bps", c.get("bw", ""))
    if not m:
        raise SystemExit(f"{xml}: cannot read cluster bw={c.get('bw')!r}")
    return float(m[1]) * {"G": 1e9, "M": 1e6, "k": 1e3, "": 1}[m[2]]


def run_point(exe, plat, hostfile, np_, coll, size, impl, params, timeout):
    cfg = plat.smpirun_cfg_args() + ["--log=root.thres:critical"]
    if impl in SELECTORS:
        cfg.append(f"--cfg=smpi/coll-selector:{impl}")
    args = ["--coll", coll, "--bytes", str(size), "--reps", "1", "--whole",
            "library" if impl in SELECTORS else "han"]
    if params:
        args += ["--params", params]
    cmd = ["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", hostfile, *cfg, exe, *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not recs:
        return {"status": "crashed", "stderr": r.stderr[-500:]}
    return {"status": "ok", "seconds": recs[-1]["completion"], "ran": recs[-1]["ran"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="fattree64x12")
    ap.add_argument("--layout", default="16x12")
    ap.add_argument("--sizes", default="8,1K,64K,1M,8M")
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    nodes, ppn = (int(x) for x in a.layout.split("x"))
    out = Path(a.out or f"results/han_{a.platform}_{a.layout}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done[(r["coll"], r["size"], r["impl"])] = r
    tmp = Path(tempfile.mkdtemp(prefix="han-bench-"))
    b = subprocess.run(["make", "-s", "-C", str(REPO / "native"), "taskbench", "MPICC=smpicc", f"OUT={tmp}"],
                       capture_output=True, text=True)
    if b.returncode:
        print(b.stderr, file=sys.stderr)
        return 1
    hostfile = plat.write_hostfile(nodes, ppn, tmp / "hosts")
    impls = {**HAN_SETTINGS, **{s: None for s in SELECTORS}}
    with out.open("a") as f:
        for coll in a.collectives.split(","):
            for size in parse_list(a.sizes):
                for impl, params in impls.items():
                    if (coll, size, impl) in done:
                        continue
                    r = run_point(str(tmp / "colltune-taskbench"), plat, hostfile, nodes * ppn, coll,
                                  size, impl, params, a.timeout)
                    r.update(coll=coll, size=size, impl=impl, params=params, layout=a.layout,
                             platform=a.platform)
                    done[(coll, size, impl)] = r
                    f.write(json.dumps(r) + "\n")
                    f.flush()
    bw = injection_bw(plat.xml_path)
    print(f"{a.platform} {a.layout}: time (us); ratio = T(ompi)/T(best HAN); LB = bandwidth lower bound")
    for coll in a.collectives.split(","):
        print(f"\n{coll}\n{'size':>8} " + " ".join(f"{i:>13}" for i in impls) + "   vs ompi   HAN/LB")
        for size in parse_list(a.sizes):
            row = [done.get((coll, size, i), {}) for i in impls]
            cells = [f"{r['seconds'] * 1e6:13.1f}" if r.get("status") == "ok" else f"{r.get('status', '-'):>13}"
                     for r in row]
            han = [r["seconds"] for i, r in zip(impls, row) if i in HAN_SETTINGS and r.get("status") == "ok"]
            om = done.get((coll, size, "ompi"), {})
            ratio = f"{om['seconds'] / min(han):8.2f}x" if han and om.get("status") == "ok" else "       -"
            n = nodes
            lb = size / bw if coll == "bcast" else 2 * size * (n - 1) / n / bw
            dist = f"{min(han) / lb:8.2f}" if han and size >= 1 << 20 else "       -"
            print(f"{human_bytes(size):>8} " + " ".join(cells) + f" {ratio} {dist}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
