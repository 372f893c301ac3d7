#!/usr/bin/env python3
"""miniAMR tuning its own collectives online, run after run (issue 16).

miniAMR (Mantevo reference version, ../shared/apps/miniAMR/ref, unmodified) is copied to
the build cache and built with smpicc and libcolltune.a (profile_miniamr.build_app, the
same input as there); 64 ranks on `fattree64x12` (layout 16x4, npx=npy=npz=4):

Every job runs SMPI's `ompi` selector for the library's own collectives (a copy of the
platform whose smpi_config sets it: smpirun's own default, `default`, is its naive one).

  1. library: one run without online mode (SMPI's `ompi` selector): miniAMR's time;
  2. online: R runs of `colltune run --online STATE` (the state updated between runs),
     COLLTUNE_ONLINE_BUDGET=--budget (default 32: miniAMR's short run makes ~200 calls in
     its busiest block, so the default budget of 200 would draw every call of every run);
     per run the time in intercepted collectives (from its samples file), the arms run,
     miniAMR's time and checksums (--report_diffusion prints them: unchanged whatever
     the arms);
  3. the offline best of the same blocks, two ways (benchmarks/online_common.py):
     `colltune bench --provider colltune` of every preset arm at the layouts and sizes
     miniAMR used (`library` = SMPI's `ompi`), and in the application: one run per
     preset arm index with every block fixed to it. One more run with each block fixed to
     its best arm gives the best collective time; the `library` arm's run is the library
     default measured with the online cost definition.

Printed (and written to benchmarks/results/online_miniamr/budget<B>/: summary.log,
results.json and the final state.txt): per run the collective time and its ratio to the library
default and to the offline best, miniAMR's time against the run without online mode, the
exploration spent (sum over runs of collective time above the best) against the cost of
the offline campaigns, and per block the final choice against each offline best.

    .venv/bin/python benchmarks/online_miniamr.py [--runs 8]     # ~6-8 min on 2 cores
SimGrid is deterministic: a re-run prints the same numbers.
"""
from __future__ import annotations

import os
import re
from collections import Counter

from online_common import (CACHE, Bench, bench_best, block_name, checksum_lines,
                           colltune_run, compare_choices, exhaustive, fixed_state, last_samples,
                           library_index, measured_only, ompi_platform, platform_name, run_fixed,
                           used_sizes)

from colltune import mpi
from colltune.online import history, state
from colltune.online.arms import preset_arms
from profile_miniamr import ARGS as PROFILE_ARGS, build_app   # the same build and input

BASE_PLATFORM, LAYOUT = "fattree64x12", "16x4"
ARGS = ["--npx", "4", "--npy", "4", "--npz", "4", *PROFILE_ARGS, "--report_diffusion"]
CHECKSUMS = r"^\d+ var \d+ sum \S+"
SUMMARY = r"^Summary: .*time (\S+) calc (\S+) comm (\S+) red (\S+) refine (\S+)"


def app_time(stdout: str) -> float:
    m = re.search(SUMMARY, stdout, re.M)
    return float(m.group(1)) if m else float("nan")


def main() -> int:
    bench = Bench(__doc__, "online-miniamr", 8, budget=32)
    args, say = bench.args, bench.say
    platform = ompi_platform(BASE_PLATFORM, bench.work)
    env = {"COLLTUNE_ONLINE_BUDGET": str(args.budget)}
    exe = build_app()
    prog = [exe, *ARGS]

    say(f"miniAMR under online mode: {platform_name(platform)} layout {LAYOUT} (64 ranks), {args.runs} runs, "
        f"budget {args.budget} timed calls per (communicator, block) and run")
    lib_out = colltune_run(platform, LAYOUT, prog)
    ref_sums = checksum_lines(lib_out, CHECKSUMS)
    t_lib_app = app_time(lib_out)
    say(f"library run (no online mode, SMPI's ompi selector): miniAMR time {t_lib_app:.6f} s, "
        f"{len(ref_sums)} checksum lines")

    sdir = os.path.join(bench.work, "state")
    online = []
    for r in range(args.runs):
        out = colltune_run(platform, LAYOUT, prog, online=sdir, env=env)
        st = state.load(os.path.join(sdir, "state.txt"))
        online.append({"run": r + 1, "coll_time_s": history.run_time(last_samples(sdir)),
                       "app_time_s": app_time(out),
                       "checksums_equal": checksum_lines(out, CHECKSUMS) == ref_sums,
                       "arms": {block_name(k): b.best().arm for k, b in st.blocks.items()
                                if b.source == "measured"}})
        print(f"  online run {r + 1}: collective time {online[-1]['coll_time_s'] * 1e3:.3f} ms",
              flush=True)

    final = state.load(os.path.join(sdir, "state.txt"))
    presets, _ = preset_arms(mpi.find("smpi"), CACHE, platform_name(platform))
    measured = measured_only(final)
    offline, bench_cost = bench_best(used_sizes(sdir), presets, platform, bench.work_dir("bench"))
    ex = exhaustive(measured, presets, bench.work, platform, LAYOUT, prog, env)
    t_lib = ex["runs"][library_index(presets)]["coll_time_s"]
    best = {"in-app": ex["best"], "bench": {k: min(m, key=m.get) for k, m in offline.items()}}
    t_best, app_best = {}, {}
    for name, choice in best.items():
        _, t_best[name], out = run_fixed(fixed_state(measured, lambda b: choice.get(b.key, "library")),
                                         bench.work_dir(f"best-{name}"), platform, LAYOUT, prog, env)
        app_best[name] = app_time(out)
    say(f"{len(measured.blocks)} blocks. Collective time (online cost definition, every block "
        f"fixed to one arm): library arm {t_lib * 1e3:.3f} ms; offline best from colltune bench "
        f"{t_best['bench'] * 1e3:.3f} ms (miniAMR {app_best['bench']:.6f} s); in-application "
        f"exhaustive best {t_best['in-app'] * 1e3:.3f} ms (miniAMR {app_best['in-app']:.6f} s)")
    ref = min(t_best.values())
    say("")
    say(f"{'run':>3} {'coll ms':>9} {'/library':>8} {'/best':>7} {'app s':>9} {'app/lib':>7} "
        f"{'sums':>5}  blocks per chosen arm")
    spent = 0.0
    for o in online:
        spent += max(0.0, o["coll_time_s"] - ref)
        counts = Counter(o["arms"].values())
        say(f"{o['run']:>3} {o['coll_time_s'] * 1e3:9.3f} {o['coll_time_s'] / t_lib:8.3f} "
            f"{o['coll_time_s'] / ref:7.3f} {o['app_time_s']:9.6f} {o['app_time_s'] / t_lib_app:7.3f} "
            f"{'same' if o['checksums_equal'] else 'DIFF':>5}  "
            + ", ".join(f"{a} {n}" for a, n in counts.most_common()))
    say("(/best: against the better of the two offline bests; app/lib: miniAMR's time against the "
        "run without online mode)")
    for name, per_arm in (("colltune bench", offline), ("in-application exhaustive", ex["per_arm"])):
        same, slow, rows = compare_choices(final, per_arm)
        say(f"final choices vs the {name} best: {same}/{len(rows)} blocks, average slowdown {slow:.3f}")
        bench.lines.extend(rows)
    say(f"exploration spent over {args.runs} runs (collective time above the best): "
        f"{spent * 1e3:.3f} ms; offline exhaustive campaigns: colltune bench {bench_cost * 1e3:.3f} ms "
        f"simulated, in-application {ex['cost_s'] * 1e3:.3f} ms")
    bench.finish({"online": online, "library_app_s": t_lib_app, "library_coll_s": t_lib,
                  "best_coll_s": t_best, "best_app_s": app_best, "bench_cost_s": bench_cost,
                  "bench": {block_name(k): v for k, v in offline.items()},
                  "exhaustive": {"cost_s": ex["cost_s"], "runs": ex["runs"],
                                 "per_arm": {block_name(k): v for k, v in ex["per_arm"].items()}}},
                 sdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
