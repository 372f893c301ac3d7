#!/usr/bin/env python3
"""colltune HAN bcast/allreduce vs SMPI's `ompi` and `mpich` selectors on a
bundled platform, with the distance to the bandwidth lower bound.

    .venv/bin/python benchmarks/han_vs_selectors.py [--platform fattree64x12] [--layout 16x12]
        [--sizes 8,1K,64K,1M,8M,64M] [--charge on|off] [--out F.jsonl] [--timeout 600]

Every point is one smpirun of colltune-taskbench --whole (1 warm-up + 1 timed
call; SMPI is deterministic; user buffers SMPI_SHARED_MALLOC'ed so 64 MiB fits
on hundreds of ranks; correctness is tests/test_hier_smpi.py's job): colltune HAN with a few settings, the library's
MPI_ collective under SMPI's `ompi` / `mpich` selectors, and the best SMPI flat
algorithms of the exhaustive 16x12 campaign (smpi:<name>). Records are appended to --out as JSON lines and
points already there are skipped: the run is resumable. A crash or timeout is
recorded as such, never as a time. Lower bounds (>= 1 MiB): LBnet = bcast m/B,
allreduce 2m(N-1)/N/B (B = the platform's link bandwidth = injection);
LBnode also counts what a node's cores can do (benchmarks/bounds.py: copy, and
the reduction where it is charged).
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
from colltune.proc import MemoryExhausted, run_group
from colltune.sizes import human_bytes, parse_list

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bounds import injection_bw, network_bound, node_bounds  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# a few reasonable HAN settings per collective (whole = one segment, binomial,
# for small messages; chain/4-nomial pipelines for large ones, chain32k with
# 1 MiB segments in 32 KiB pieces (shorter inner fill on long chains) and, for
# allreduce, a linear intra-node reduce (benchmarks/han_breakdown.py: the
# chain's sr was the slowest stage at 16x12, 153 us of a 242 us steady task);
# the library's own modules on both levels; for allreduce, colltune's flat ring
# and Rabenseifner across the leaders, imod=2)
HAN_SETTINGS = {
    "bcast": {
        "han-whole": "fs=0,ibs=0,ibalg=1,ss=0",
        "han-chain": "fs=524288,ibs=65536,ibalg=3,ss=65536",
        "han-chain32k": "fs=1048576,ibs=32768,ibalg=3,ss=65536",
        "han-4nomial": "fs=262144,ibs=65536,ibalg=4,ss=65536",
        "han-library": "imod=0,smod=0",
        # a double binary tree across the leaders: log depth at full link rate
        # (a chain's fill is nodes-1 hops of a whole segment)
        "han-dual": "fs=524288,ibs=65536,ibalg=6,ss=65536",
        "han-dual-d2": "fs=524288,ibs=65536,ibalg=6,ss=65536,ibdepth=2",
        "han-chain-d2": "fs=524288,ibs=65536,ibalg=3,ss=65536,ibdepth=2",
        "han-dual-d2-128k": "fs=131072,ibs=32768,ibalg=6,ss=32768,ibdepth=2",
        # the same with whole segments inside the node (ss=0: the linear sb sends
        # each child one message per segment instead of 64 KiB pieces one by one)
        "han-dual-ss0": "fs=524288,ibs=65536,ibalg=6,ss=0,ibdepth=2",
        "han-dual128k": "fs=131072,ibs=32768,ibalg=6,ss=0,ibdepth=2",
        "han-binary": "fs=524288,ibs=65536,ibalg=2,ss=65536",
    },
    "allreduce": {
        "han-whole": "fs=0,ibs=0,irs=0,ibalg=1,iralg=1,ss=0",
        "han-chain": "fs=524288,ibs=65536,irs=65536,ibalg=3,iralg=3,ss=65536",
        "han-chain32k": "fs=1048576,ibs=32768,irs=32768,ibalg=3,iralg=3,ss=65536,sralg=5",
        "han-4nomial": "fs=262144,ibs=65536,irs=65536,ibalg=4,iralg=4,ss=65536",
        "han-library": "imod=0,smod=0",
        # the leaders run colltune's flat ring / Rabenseifner allreduce instead of
        # HAN's ir + ib (imod=2): bandwidth-optimal across nodes, no N-hop fill
        "han-ring": "imod=2,iaalg=2,fs=1048576,ss=65536,sralg=5",
        "han-rsag": "imod=2,iaalg=3,fs=1048576,ss=65536,sralg=5",
        "han-rsag512k": "imod=2,iaalg=3,fs=524288,ss=65536,sralg=5",
        "han-rsag256k": "imod=2,iaalg=3,fs=262144,ss=65536,sralg=5",
        # two leaders' allreduces in flight (iadepth=2): one's rounds hide the other's latency
        "han-rsag512k-d2": "imod=2,iaalg=3,fs=524288,ss=65536,sralg=5,iadepth=2",
        "han-ring-d2": "imod=2,iaalg=2,fs=1048576,ss=65536,sralg=5,iadepth=2",
        # 256 KiB segments, two in flight, whole segments inside the node (ss=0)
        "han-rsag256k-d2": "imod=2,iaalg=3,fs=262144,ss=0,sralg=5,iadepth=2",
        "han-ring256k-d2": "imod=2,iaalg=2,fs=262144,ss=0,sralg=5,iadepth=2",
    },
}
# the best SMPI flat algorithms of the 16x12 exhaustive campaign
# (docs/results-fattree.md), forced with --cfg=smpi/<coll>:<name>
SMPI_BEST = {"bcast": ["mvapich2_knomial_intra_node", "SMP_binary", "scatter_LR_allgather"],
             "allreduce": ["mvapich2_rs", "lr"]}
SELECTORS = ["ompi", "mpich"]
# a point is killed (and recorded as such) when the machine's available memory
# falls below this: before the OOM killer picks a process, maybe another run's
MEMORY_FLOOR_MB = 1500


def run_point(exe, plat, hostfile, np_, coll, size, impl, params, timeout, env):
    """One implementation (han-*, a selector, smpi:<algorithm>) at one size."""
    cfg = []
    if impl in SELECTORS:
        cfg.append(f"--cfg=smpi/coll-selector:{impl}")
    elif impl.startswith("smpi:"):
        cfg.append(f"--cfg=smpi/{coll}:{impl[5:]}")
    return taskbench_point(exe, plat, hostfile, np_, coll, size,
                           "han" if impl.startswith("han") else "library", params, cfg, timeout, env)


def taskbench_point(exe, plat, hostfile, np_, coll, size, whole, params, cfg, timeout, env):
    """One whole call (`colltune-taskbench --whole WHOLE`) under smpirun with the
    extra SimGrid settings cfg: {status, seconds, ran}; a crash, timeout or
    memory kill is recorded as such, never given a time."""
    # SMPI folds a shared allocation onto one file of this many bytes mapped over
    # and over: 1 MiB (the default) made 768 ranks x 2 x 64 MiB need 98304
    # mappings, past vm.max_map_count (65530), and SMPI aborted
    block = max(1 << 20, 1 << (max(size, 1) - 1).bit_length())
    cfg = plat.smpirun_cfg_args() + ["--log=root.thres:critical",
                                     f"--cfg=smpi/shared-malloc-blocksize:{block}", *cfg]
    args = ["--coll", coll, "--bytes", str(size), "--reps", "1", "--shared", "--whole", whole]
    if params:
        args += ["--params", params]
    cmd = ["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", hostfile, *cfg, exe, *args]
    try:
        r = run_group(cmd, timeout, min_available_mb=MEMORY_FLOOR_MB, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    except MemoryExhausted as e:      # e.g. SMPI built-ins with real per-rank temporaries
        return {"status": "killed", "stderr": str(e)}
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not recs:
        return {"status": "crashed", "stderr": r.stderr[-500:]}
    return {"status": "ok", "seconds": recs[-1]["completion"], "ran": recs[-1]["ran"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="fattree64x12")
    ap.add_argument("--layout", default="16x12")
    ap.add_argument("--sizes", default="8,1K,64K,1M,8M,64M")
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--no-run", action="store_true", help="print what --out holds, measure nothing")
    ap.add_argument("--only", default=None,
                    help="comma-separated implementations to measure (e.g. han-chain,ompi); default all")
    ap.add_argument("--charge", choices=["on", "off"], default="on",
                    help="off: COLLTUNE_REDUCE_RATE=COLLTUNE_COPY_RATE=0, equal terms with SMPI's "
                         "built-ins, which charge no reduction or copy")
    a = ap.parse_args()
    plat = platforms.load(a.platform)
    nodes, ppn = (int(x) for x in a.layout.split("x"))
    out = Path(a.out or f"benchmarks/results/han_vs_selectors/han_{a.platform}_{a.layout}_charge-{a.charge}.jsonl")
    env = {**os.environ}
    if a.charge == "off":
        env.update(COLLTUNE_REDUCE_RATE="0", COLLTUNE_COPY_RATE="0")
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
    def impls(coll):
        return {**HAN_SETTINGS[coll], **{s: None for s in SELECTORS},
                **{f"smpi:{n}": None for n in SMPI_BEST[coll]}}

    with out.open("a") as f:
        for coll in a.collectives.split(","):
            for size in parse_list(a.sizes):
                for impl, params in impls(coll).items():
                    if (coll, size, impl) in done or (a.only and impl not in a.only.split(",")) or a.no_run:
                        continue
                    r = run_point(str(tmp / "colltune-taskbench"), plat, hostfile, nodes * ppn, coll,
                                  size, impl, params, a.timeout, env)
                    r.update(coll=coll, size=size, impl=impl, params=params, layout=a.layout,
                             platform=a.platform, charge=a.charge,
                             platform_sha256=plat.provenance.get("sha256"))
                    done[(coll, size, impl)] = r
                    f.write(json.dumps(r) + "\n")
                    f.flush()
    bw, loop = injection_bw(plat.xml_path)
    red = plat.charge_rates["reduction_bytes_per_s"]
    charged = a.charge == "on"
    print(f"{a.platform} {nodes}x{ppn} = {nodes * ppn} ranks, SimGrid SMPI (deterministic), one call after a "
          f"warm-up, time to completion in us; charging of colltune's reductions/copies: {a.charge} "
          f"(SMPI's built-ins charge nothing); shared (garbage) buffers")
    print(f"LBnet: bcast m/B, allreduce 2m(N-1)/N/B with B = {bw / 1e9:g} GB/s; LBnode = max(LBnet, copy"
          + (", reduction" if charged else "") + f") (benchmarks/bounds.py): copy m/(Rc+B/ppn), Rc = "
          f"{loop / 1e9:g} GB/s a core's copy rate (the hardware's bound, not SimGrid's)"
          + (f", reduction m(P-1)/P/R, R = {red / 1e9:g} GB/s (allreduce)" if charged else
             "; reductions are free here (charge off), so no reduction bound"))
    for coll in a.collectives.split(","):
        names = list(impls(coll))
        print(f"\n{coll}\n{'size':>8} " + " ".join(f"{i[:13]:>13}" for i in names)
              + "  ompi/HAN  bestflat/HAN  HAN/LBnet  HAN/LBnode")
        for size in parse_list(a.sizes):
            row = {i: done.get((coll, size, i), {}) for i in names}
            ok = {i: r["seconds"] for i, r in row.items() if r.get("status") == "ok"}
            cells = [f"{ok[i] * 1e6:13.1f}" if i in ok else f"{row[i].get('status', '-'):>13}" for i in names]
            han = min((t for i, t in ok.items() if i.startswith("han")), default=None)
            flat = min((t for i, t in ok.items() if i.startswith("smpi:")), default=None)
            lbnet = network_bound(bw, coll, size, nodes)
            lbnode = max(node_bounds(plat, coll, size, nodes, ppn, charged).values())

            def ratio(x, y):
                return f"{x / y:10.2f}" if x and y else f"{'-':>10}"
            big = size >= 1 << 20
            print(f"{human_bytes(size):>8} " + " ".join(cells) + ratio(ok.get("ompi"), han)
                  + "    " + ratio(flat, han) + " " + (ratio(han, lbnet) if big else f"{'-':>10}")
                  + "  " + (ratio(han, lbnode) if big else f"{'-':>10}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
