#!/usr/bin/env python3
"""What the active tuner costs next to exhaustive search, in every currency: launches,
wall seconds, timeouts, and the simulated benchmark seconds that "% of exhaustive"
(docs/active.md) compares.

    PYTHONPATH=src .venv/bin/python -u benchmarks/active_cost.py \
        [--collectives bcast,allreduce] [--nodes 4] [--ppn 2] [--max-size 4096] [--jobs 2]

Each tuner runs on a fresh store (nothing is reused): exhaustive search (one launch
per algorithm and layout, covering every size) and the active learner (default
settings, one run per --seeds value, to its own stop) on the `small` platform, nodes 1..N x
ppn 1..P, powers of two from 8 B to --max-size. Simulated seconds are deterministic;
launches depend only on the runs (deterministic too); wall seconds depend on the
machine and its load (the shared 2-core machine: compare them within one run).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from colltune.campaign import Campaign
from colltune.results import Results
from colltune.session import Session
from colltune.tuners import TuningSpace
from colltune.tuners.active import point_cost, timed_out, tune_active
from colltune.tuners.exhaustive import ExhaustiveTuner


def exhaustive(coll, layouts, sizes, jobs):
    path = os.path.join(tempfile.mkdtemp(prefix="colltune-cost-"), "s.sqlite")
    session = Session({"platform": "small", "store": path, "jobs": jobs})
    with session.store as store:
        backend = session.backend()
        tuner = ExhaustiveTuner(backend.provider(), TuningSpace((coll,), tuple(layouts), tuple(sizes)), [])
        t0 = time.monotonic()
        summary = Campaign(f"exhaustive-{coll}", backend, store, session.settings, False).run(tuner.plan())
        wall = time.monotonic() - t0
        rows = Results.from_store(store, f"exhaustive-{coll}").algorithms().points.to_dict("records")
    multi = [r for r in rows if int(r["nodes"]) * int(r["ppn"]) > 1]
    return {"launches": summary.launches, "wall_s": wall, "points": len({(r["nodes"], r["ppn"], r["msg_size"])
                                                                       for r in multi}),
            "benchmark_s": sum(point_cost(r) for r in rows), "timeouts": sum(timed_out(r) for r in rows),
            "timeout_s": sum(timed_out(r) for r in rows) * float(session.settings.timeout)}


def active(coll, layouts, sizes, jobs, seed):
    path = os.path.join(tempfile.mkdtemp(prefix="colltune-cost-"), "s.sqlite")
    session = Session({"platform": "small", "store": path, "jobs": jobs, "active_seed": seed})
    with session.store as store:
        out = tune_active(session.backend(), store, session.settings, [coll], layouts, sizes,
                          campaign=f"active-{coll}")
    c = out.cost
    return {"launches": c["launches"], "launch_specs": c["launch_specs"][coll], "wall_s": c["wall_s"],
            "points": out.history[-1]["points"] if out.history else 0, "benchmark_s": c["benchmark_s"][coll],
            "timeouts": c["timeouts"][coll], "timeout_s": c["timeout_charged_s"][coll],
            "stop": out.stops[coll], "launch_wall_s": c["launch_wall_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--ppn", type=int, default=2)
    ap.add_argument("--max-size", type=int, default=4096)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seeds", default="1,2,3", help="active_seed of each active run")
    a = ap.parse_args()
    layouts = [(n, p) for n in range(1, a.nodes + 1) for p in range(1, a.ppn + 1)]
    sizes = [1 << e for e in range(3, a.max_size.bit_length()) if 1 << e <= a.max_size]
    print(f"small platform, nodes 1..{a.nodes} x ppn 1..{a.ppn}, {sizes[0]}..{sizes[-1]} B "
          f"({len(sizes)} sizes), fresh store per tuner, jobs {a.jobs}")
    print(f"{'collective':<10} {'tuner':<10} {'points':>6} {'launches':>8} {'wall s':>7} "
          f"{'sim. bench ms':>13} {'timeouts':>8}   ratios active / exhaustive")
    for coll in a.collectives.split(","):
        ex = exhaustive(coll, layouts, sizes, a.jobs)
        runs = [("exhaustive", ex, None)] + [(f"active s{seed}", active(coll, layouts, sizes, a.jobs, int(seed)), ex)
                                             for seed in a.seeds.split(",")]
        for name, r, ref in runs:
            print(f"{coll:<10} {name:<10} {r['points']:>6} {r['launches']:>8} {r['wall_s']:>7.1f} "
                  f"{r['benchmark_s'] * 1e3:>13.3f} {r['timeouts']:>8}"
                  + (f"   sim. seconds {r['benchmark_s'] / ref['benchmark_s']:.0%} ('% of exhaustive'), "
                     f"launches {r['launches'] / ref['launches']:.2f}x, wall {r['wall_s'] / ref['wall_s']:.2f}x "
                     f"({r['launch_wall_s']:.1f} s launching; stop: {r['stop']})" if ref else ""))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
