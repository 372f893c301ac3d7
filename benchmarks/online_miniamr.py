#!/usr/bin/env python3
"""miniAMR tuning its own collectives online, run after run (issue 16).

miniAMR (Mantevo reference version, ../shared/apps/miniAMR/ref, unmodified) is copied to
the build cache and built with smpicc and libcolltune.a; 64 ranks on `fattree64x12`
(layout 16x4, npx=npy=npz=4):

  1. library: one run without online mode (SMPI's default `ompi` selector): miniAMR's time;
  2. online: R runs of `colltune run --online STATE` (the state updated between runs);
     per run the time in intercepted collectives (from its samples file), the arms run,
     miniAMR's time and checksums (--report_diffusion prints them: unchanged whatever
     the arms);
  3. offline exhaustive best for the same blocks, in the application
     (benchmarks/online_common.py): one run per preset arm index, then one run with
     every block fixed to its best arm; the `library` arm's run is the library default
     with the same cost definition.

Printed (and written to benchmarks/results/online_miniamr/summary.log): per run the
collective time and its ratio to the library default and to the offline best, the
exploration spent (sum over runs of time above the best) against the exhaustive
campaign's cost, and the share of blocks whose final choice is the offline best.

    .venv/bin/python benchmarks/online_miniamr.py [--runs 8]     # ~6-8 min on 2 cores
SimGrid is deterministic: a re-run prints the same numbers.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import time

from online_common import (CACHE, ROOT, block_name, checksum_lines, colltune_run, exhaustive,
                           fixed_state, last_samples, library_index, measured_only, run_fixed)

from colltune import mpi
from colltune.online import history, state
from colltune.online.arms import preset_arms
from colltune.providers.colltune import libcolltune, link_args

APP = os.path.join(ROOT, "..", "shared", "apps", "miniAMR", "ref")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "online_miniamr")
PLATFORM, LAYOUT = "fattree64x12", "16x4"
ARGS = ("--npx 4 --npy 4 --npz 4 --num_refine 3 --max_blocks 2000 --num_vars 2 "
        "--init_x 1 --init_y 1 --init_z 1 --nx 8 --ny 8 --nz 8 --num_objects 2 "
        "--object 2 0 -1.10 -1.10 -1.10 0.030 0.030 0.030 1.5 1.5 1.5 0.0 0.0 0.0 "
        "--object 2 0 0.5 0.5 1.76 0.0 0.0 -0.025 0.75 0.75 0.75 0.0 0.0 0.0 "
        "--num_tsteps 10 --checksum_freq 4 --stages_per_ts 16 --report_diffusion").split()
CHECKSUMS = r"^\d+ var \d+ sum \S+"
SUMMARY = r"^Summary: .*time (\S+) calc (\S+) comm (\S+) red (\S+) refine (\S+)"


def build_app() -> str:
    """miniAMR.x with libcolltune.a, in the cache (keyed by libcolltune's build)."""
    impl = mpi.find("smpi")
    lib = libcolltune(impl, CACHE)
    key = hashlib.sha256(str(lib).encode()).hexdigest()[:12]
    out = os.path.join(CACHE, "apps", f"miniamr-online-{key}")
    exe = os.path.join(out, "miniAMR.x")
    if not os.path.exists(exe):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(APP, out)
        subprocess.run(["make", "-s", "-C", out, "-j2", "CC=smpicc", "LD=smpicc",
                        f"LDLIBS={' '.join(link_args(lib))} -lm"], check=True,
                       env=impl.run_env(), stdout=subprocess.DEVNULL)
    return exe


def app_time(stdout: str) -> float:
    m = re.search(SUMMARY, stdout, re.M)
    return float(m.group(1)) if m else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--work", default=os.path.join(CACHE, "online-miniamr-work"))
    args = ap.parse_args()
    t_start = time.time()
    exe = build_app()
    prog = [exe, *ARGS]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    os.makedirs(OUT, exist_ok=True)
    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"miniAMR under online mode: {PLATFORM} layout {LAYOUT} (64 ranks), {args.runs} runs")
    lib_out = colltune_run(PLATFORM, LAYOUT, prog)
    ref_sums = checksum_lines(lib_out, CHECKSUMS)
    t_lib_app = app_time(lib_out)
    say(f"library run (no online mode, SMPI's default selector): miniAMR time {t_lib_app:.6f} s, "
        f"{len(ref_sums)} checksum lines")

    sdir = os.path.join(args.work, "state")
    online = []
    for r in range(args.runs):
        out = colltune_run(PLATFORM, LAYOUT, prog, online=sdir)
        s = last_samples(sdir)
        st = state.load(os.path.join(sdir, "state.txt"))
        online.append({"run": r + 1, "coll_time_s": history.run_time(s), "app_time_s": app_time(out),
                       "checksums_equal": checksum_lines(out, CHECKSUMS) == ref_sums,
                       "arms": {block_name(k): b.best().arm for k, b in st.blocks.items()
                                if b.source == "measured"},
                       "sampled": {block_name(history.block_key(b)): {a["arm"]: a["n"] for a in b["arms"] if a["n"]}
                                   for b in s.data["blocks"]}})
        print(f"  online run {r + 1}: collective time {online[-1]['coll_time_s'] * 1e3:.3f} ms",
              flush=True)

    final = state.load(os.path.join(sdir, "state.txt"))
    presets, _ = preset_arms(mpi.find("smpi"), CACHE, PLATFORM)
    measured = measured_only(final)
    ex = exhaustive(measured, presets, args.work, PLATFORM, LAYOUT, prog)
    t_lib = ex["runs"][library_index(presets)]["coll_time_s"]
    _, t_best, best_out = run_fixed(fixed_state(measured, lambda b: ex["best"].get(b.key, "library")),
                                    os.path.join(args.work, "best"), PLATFORM, LAYOUT, prog)
    say(f"blocks: {len(measured.blocks)}; offline exhaustive: {len(ex['runs'])} runs, "
        f"collective time of the library arm {t_lib * 1e3:.3f} ms, of the per-block best "
        f"{t_best * 1e3:.3f} ms (miniAMR time {app_time(best_out):.6f} s)")
    say("")
    say(f"{'run':>3} {'coll ms':>9} {'/library':>8} {'/best':>7} {'app s':>9} {'app/lib':>7} "
        f"{'sums':>5}  arms (final choice per block)")
    spent = 0.0
    for o in online:
        spent += max(0.0, o["coll_time_s"] - t_best)
        arms = ", ".join(f"{k}:{v}" for k, v in sorted(o["arms"].items()))
        say(f"{o['run']:>3} {o['coll_time_s'] * 1e3:9.3f} {o['coll_time_s'] / t_lib:8.3f} "
            f"{o['coll_time_s'] / t_best:7.3f} {o['app_time_s']:9.6f} {o['app_time_s'] / t_lib_app:7.3f} "
            f"{'same' if o['checksums_equal'] else 'DIFF':>5}  {arms}")
    same = sum(final.blocks[k].best().arm == a for k, a in ex["best"].items() if k in final.blocks)
    say("")
    say(f"final choices equal to the offline best: {same}/{len(ex['best'])} blocks")
    say(f"exploration spent over {args.runs} runs (collective time above the best): "
        f"{spent * 1e3:.3f} ms; offline exhaustive campaign: {ex['cost_s'] * 1e3:.3f} ms "
        f"(ratio {spent / ex['cost_s']:.3f})")
    say(f"wall time {time.time() - t_start:.0f} s")
    with open(os.path.join(OUT, "summary.log"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "runs.json"), "w") as fh:
        json.dump({"online": online, "library_app_s": t_lib_app, "library_coll_s": t_lib,
                   "best_coll_s": t_best, "exhaustive": {
                       "cost_s": ex["cost_s"], "runs": ex["runs"],
                       "best": {block_name(k): v for k, v in ex["best"].items()},
                       "per_arm": {block_name(k): v for k, v in ex["per_arm"].items()}}},
                  fh, indent=1)
    shutil.copy(os.path.join(sdir, "state.txt"), os.path.join(OUT, "state.txt"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
