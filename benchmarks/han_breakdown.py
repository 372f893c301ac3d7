#!/usr/bin/env python3
"""Where the time of one HAN call goes, on a bundled SimGrid platform.

    .venv/bin/python benchmarks/han_breakdown.py [--platform fattree64x12] [--layout 16x12]
        [--coll allreduce] [--bytes 8M] [--setting han-chain] [--charge off]

smpiruns of colltune-taskbench with the same HAN parameters
(han_vs_selectors.HAN_SETTINGS): (1) each stage of segment 0 alone, one launch
each (allreduce sr(0), ir(0), ib(0), sb(0); bcast ib(0), sb(0)): what one
segment costs at each level, as an effective bandwidth;
(2) the whole call's task sequence (fill, steady, drain) timed task by task;
(3) the whole call. It prints, from these measurements, the chain

  LBnet          the network bound of han_vs_selectors (m/B; 2m(N-1)/N/B)
  design bound   u x the bytes one leader's NIC carries per segment / B: bcast
                 one segment, allreduce two (an ir piece and an ib piece cross
                 every leader's link each way): what HAN's structure allows
  u x steady     u x the measured steady task (all stages of a segment overlapped)
  whole call     time to completion

and the factors between them: the structure (design/LBnet), the stages'
efficiency per segment (u x steady / design: per-piece overheads, inner
pipeline fill), the segment pipeline's fill and drain (whole / u x steady).
SMPI is deterministic; one warm-up and one timed repetition each.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune import platforms
from colltune.proc import run_group
from colltune.sizes import human_bytes, parse_value
from colltune.taskmodel.model import STAGES, pipeline_tasks, segments, stages as stages_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bounds import injection_bw, network_bound  # noqa: E402
from han_vs_selectors import HAN_SETTINGS, REPO  # noqa: E402


def taskbench(exe, plat, hostfile, np_, args, timeout, env) -> list[dict]:
    cmd = ["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", hostfile,
           *plat.smpirun_cfg_args(), "--log=root.thres:critical", exe, *args]
    r = run_group(cmd, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not recs:
        raise SystemExit(f"taskbench failed ({r.returncode}): {' '.join(args)}\n{r.stderr[-800:]}")
    return recs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="fattree64x12")
    ap.add_argument("--layout", default="16x12")
    ap.add_argument("--coll", default="allreduce", choices=sorted(STAGES))
    ap.add_argument("--bytes", default="8M")
    ap.add_argument("--setting", default="han-chain")
    ap.add_argument("--params", default=None, help="explicit HAN parameters (overrides --setting)")
    ap.add_argument("--charge", choices=["on", "off"], default="off")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    nodes, ppn = (int(x) for x in a.layout.split("x"))
    size = parse_value(a.bytes, "--bytes")
    params = a.params or HAN_SETTINGS[a.coll].get(a.setting)
    if params is None:
        raise SystemExit(f"--setting {a.setting!r}: not one of {sorted(HAN_SETTINGS[a.coll])}")
    kv = dict(x.split("=") for x in params.split(","))
    fs = kv.get("fs")
    if fs is None:
        raise SystemExit(f"{params!r}: a breakdown needs an explicit fs")
    env = {**os.environ}
    if a.charge == "off":
        env.update(COLLTUNE_REDUCE_RATE="0", COLLTUNE_COPY_RATE="0")
    tmp = Path(tempfile.mkdtemp(prefix="han-breakdown-"))
    b = subprocess.run(["make", "-s", "-C", str(REPO / "native"), "taskbench", "MPICC=smpicc", f"OUT={tmp}"],
                       capture_output=True, text=True)
    if b.returncode:
        raise SystemExit(b.stderr)
    exe, hostfile = str(tmp / "colltune-taskbench"), plat.write_hostfile(nodes, ppn, tmp / "hosts")
    common = ["--coll", a.coll, "--bytes", str(size), "--params", params, "--reps", "1", "--shared"]

    def run(extra):
        return taskbench(exe, plat, hostfile, nodes * ppn, common + extra, a.timeout, env)

    u = segments(size, int(fs))
    seg_bytes = min(size, int(fs)) if int(fs) > 0 else size
    stages = stages_of(a.coll, kv)
    # one launch per stage: in one sequence a non-leader's sb(0) would include
    # waiting for its leader's ir(0) and ib(0)
    alone = {f"{s}(0)": run(["--tasks", f"{s}(0)"])[-1]["max_all"] for s in stages}
    bw, loop = injection_bw(plat.xml_path)
    # printed before the long launches: at hundreds of ranks the task sequence
    # (a barrier per task) can take longer than --timeout
    print(f"{a.platform} {a.layout} = {nodes * ppn} ranks, {a.coll} {human_bytes(size)}, HAN {params}; "
          f"u = {u} segments of {human_bytes(seg_bytes)}; charge {a.charge}; B = {bw / 1e9:g} GB/s, "
          f"loopback {loop / 1e9:g} GB/s")
    print(f"\none segment, each stage alone (slowest rank):\n{'stage':>6} {'us':>10} {'GB/s':>8}  level")
    for s in stages:
        t = alone[f"{s}(0)"]
        rate = seg_bytes / t / 1e9 if t > 0 else float("inf")
        print(f"{s:>6} {t * 1e6:10.1f} {rate:8.2f}  {'inter-node' if s.startswith('i') else 'intra-node'}")
    sys.stdout.flush()
    whole = run(["--whole", "han"])[-1]["completion"]
    print(f"whole call {whole * 1e6:.1f} us", flush=True)
    tasks = run(["--tasks", ";".join(pipeline_tasks(a.coll, u, kv))])

    lbnet = network_bound(bw, a.coll, size, nodes)
    # bytes one leader's NIC carries per segment: bcast one segment; allreduce an
    # ir piece and an ib piece, or (imod=2) a flat allreduce's 2(N-1)/N segments
    per_seg = seg_bytes / bw if a.coll == "bcast" else 2 * seg_bytes / bw * (
        (nodes - 1) / nodes if "ib" not in stages else 1)
    design = u * per_seg
    steady = [r["max_all"] for r in tasks[len(stages) - 1:len(tasks) - (len(stages) - 1)]]
    if not steady:
        raise SystemExit(f"u = {u} segments: no steady task (need u >= {len(stages)}); lower fs")
    mean_steady = sum(steady) / len(steady)
    print(f"steady task ({'+'.join(reversed(stages))}): {len(steady)} tasks, first {steady[0] * 1e6:.1f} us, "
          f"last {steady[-1] * 1e6:.1f} us, mean {mean_steady * 1e6:.1f} us; NIC wire time per segment "
          f"{per_seg * 1e6:.1f} us")
    print(f"\n{'':16}{'us':>10} {'x LBnet':>8}")
    chain = (("LBnet", lbnet), ("design bound", design), ("u x steady", u * mean_steady), ("whole call", whole))
    for name, t in chain:
        print(f"{name:<16}{t * 1e6:10.1f} {t / lbnet:8.2f}")
    print(f"\nwhole/LBnet {whole / lbnet:.2f} = structure {design / lbnet:.2f} x stages "
          f"{u * mean_steady / design:.2f} x fill+drain {whole / (u * mean_steady):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
