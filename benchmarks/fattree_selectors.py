#!/usr/bin/env python3
"""Best SMPI algorithm vs the `ompi` and `mpich` selectors on the 64 x 12 fat-tree.

    .venv/bin/python benchmarks/fattree_selectors.py [--sizes 8..4M] [--jobs 2]

SimGrid is deterministic, so 2 timed repetitions after the discarded warm-up
are enough (they are identical); every point's result is checked once first.

Runs (or resumes) an exhaustive campaign of bcast and allreduce on the bundled
`fattree64x12` platform, all 768 ranks, then prints per message size the best
algorithm and the time ratios T(selector)/T(best), measured side by side in the
same campaign (SimGrid timings are deterministic), and the wall time spent.
"""
from __future__ import annotations

import argparse
import sys
import time

from colltune.cli import build_parser
from colltune.commands import run_tuning
from colltune.results import Results
from colltune.compare import compare_to_baselines, format_summary, summarize
from colltune.session import Session
from colltune.store import Store
from colltune.sizes import human_bytes, parse_list


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # powers of 4 from 8 B plus 4 MiB: the 8 B .. 4 MiB range at half the cost of every power of 2
    ap.add_argument("--sizes", default="8,32,128,512,2K,8K,32K,128K,512K,2M,4M")
    ap.add_argument("--layout", default="64x12")
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--store", default="benchmarks/results/fattree_selectors/fattree64x12.sqlite")
    ap.add_argument("--campaign", default="fattree64x12")
    ap.add_argument("--no-run", action="store_true",
                    help="print what the store holds so far, measure nothing")
    a = ap.parse_args()
    nodes, ppn = (int(x) for x in a.layout.split("x"))
    cli = {"platform": "fattree64x12", "jobs": a.jobs, "timeout": a.timeout, "store": a.store,
           "min_reps": 2, "check_memory_mb": 6200.0}
    session = Session(cli)
    args = build_parser().parse_args(["tune"])
    start = time.monotonic()
    if a.no_run:
        with Store(a.store, readonly=True) as store:      # a reprint changes nothing
            results = Results.from_store(store, a.campaign)
        baselines, summary = ["ompi", "mpich"], None
    else:
        table, results, summary, baselines = run_tuning(
            session, args, a.collectives.split(","), [(nodes, ppn)], parse_list(a.sizes), a.campaign)
    wall = time.monotonic() - start
    cmp = compare_to_baselines(results, baselines)
    print(f"\nfattree64x12, {nodes} nodes x {ppn} ppn = {nodes * ppn} ranks, SimGrid SMPI "
          f"(deterministic), median time to completion")
    for coll, g in cmp.groupby("collective"):
        print(f"\n{coll}")
        print(f"{'size':>10} {'best algorithm':<26} {'best us':>10} "
              + " ".join(f"{'vs ' + b:>10} {b + ' picks':<22}" for b in baselines))
        for r in g.sort_values("msg_size").itertuples():
            row = f"{human_bytes(int(r.msg_size)):>10} {r.best_algorithm:<26} {r.best_s * 1e6:>10.1f} "
            for b in baselines:
                sp = getattr(r, f"{b}_speedup")
                choice = getattr(r, f"{b}_choice")
                row += f"{sp:>9.2f}x {choice[:22]:<22} " if sp == sp else f"{choice:>12} {'':<20} "
            print(row)
    print("\n" + format_summary(summarize(cmp, baselines)))
    fails = results.failures()
    if len(fails):
        print(f"\nfailed points (excluded): {fails.groupby(['algorithm', 'status']).size().to_dict()}")
    spent = results.runs["wall_s"].sum() if len(results.runs) else 0.0
    print(f"\nwall time of all launches in the store: {spent:.0f} s (sum over launches, "
          f"{len(results.runs)} launches, up to {a.jobs} at a time)")
    if summary is not None:
        print(f"wall time of this command: {wall:.0f} s ({summary.launches} launches now, "
              f"{summary.skipped_points} points reused from {a.store})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
