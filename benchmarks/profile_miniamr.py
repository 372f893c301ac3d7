#!/usr/bin/env python3
"""miniAMR's traffic on the simulated fat-tree and dragonfly, profiled as a user would.

miniAMR (Mantevo 1.7.0 reference version, ../shared/apps/miniAMR, unmodified) is
copied to the build cache, built with smpicc and libcolltune.a, and run with
`colltune run --profile` at 64 ranks on `fattree64x12` (64 nodes x 1: every leaf) and at 128
ranks on `dragonfly` (32 nodes x 4, the hosts spread over the three groups), then

  - with its collectives left to SMPI (the library: the `ompi` selector), and
  - on the fat-tree also with colltune's algorithms through a rules file (HAN
    allreduce/bcast), drawn beside the library's profile on one colour scale (their allreduce traffic);

`colltune profile export` writes the versioned JSON + CSV files and `colltune profile
report` the HTML page of each case into benchmarks/results/profile_miniamr/, and
`colltune profile whatif` compares the job's placement with a compact and a spread
one. The summary (traffic per kind and its visibility, the most loaded link,
hop-bytes, miniAMR's checksums and time) is printed and written to summary.log.

    .venv/bin/python benchmarks/profile_miniamr.py            # runs (about 2-4 min on 2 cores)
    .venv/bin/python benchmarks/profile_miniamr.py --no-run   # reprints summary.log's numbers
                                                              # from the committed traffic.json files
SimGrid timings and traffic are deterministic: a re-run gives the same numbers.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

from colltune import mpi  # noqa: E402
from colltune.providers.colltune import libcolltune, link_args  # noqa: E402

CACHE = os.path.join(ROOT, ".colltune-cache")
APP = os.path.join(ROOT, "..", "shared", "apps", "miniAMR", "ref")
OUT = os.path.join(HERE, "results", "profile_miniamr")
COLLTUNE = os.path.join(ROOT, ".venv", "bin", "colltune")

# The README's 16-rank run (shared/apps/README.md) scaled to P = npx*npy*npz ranks.
ARGS = ("--num_refine 3 --max_blocks 2000 --num_vars 2 --init_x 1 --init_y 1 --init_z 1 "
        "--nx 8 --ny 8 --nz 8 --num_objects 2 "
        "--object 2 0 -1.10 -1.10 -1.10 0.030 0.030 0.030 1.5 1.5 1.5 0.0 0.0 0.0 "
        "--object 2 0 0.5 0.5 1.76 0.0 0.0 -0.025 0.75 0.75 0.75 0.0 0.0 0.0 "
        "--num_tsteps 10 --checksum_freq 4 --stages_per_ts 16").split()
HAN_RULES = "colltune-rules 1\nallreduce nodes=2.. -> han\nbcast nodes=2.. -> han\n"

# name: (platform, layout, npx npy npz, placement, rules)
CASES = {
    "fattree-library": ("fattree64x12", "64x1", (4, 4, 4), None, None),
    "fattree-colltune": ("fattree64x12", "64x1", (4, 4, 4), None, HAN_RULES),
    "dragonfly-library": ("dragonfly", "32x4", (8, 4, 4), "spread", None),
}
COMPARE = [("fattree-library", "fattree-colltune", "allreduce")]   # (a, b, collective kind drawn)


def build_app() -> str:
    """miniAMR.x built with smpicc and libcolltune.a, cached by libcolltune's path."""
    impl = mpi.find("smpi")
    lib = libcolltune(impl, CACHE)
    key = hashlib.sha256(str(lib).encode()).hexdigest()[:12]
    out = os.path.join(CACHE, "apps", f"miniamr-smpi-{key}")
    exe = os.path.join(out, "miniAMR.x")
    if not os.path.exists(exe):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(APP, out)
        flags = " ".join(link_args(lib))
        subprocess.run(["make", "-s", "-C", out, "-j2", "CC=smpicc", "LD=smpicc", f"LDLIBS={flags}"],
                       check=True, env=impl.run_env(), stdout=subprocess.DEVNULL)
    return exe


def run_case(name: str, exe: str, work: str) -> dict:
    platform, layout, (px, py, pz), placement, rules = CASES[name]
    prof = os.path.join(work, name)
    cmd = [COLLTUNE, "run", "--platform", platform, "--layout", layout, "--profile", prof, "-q"]
    if placement:
        cmd += ["--hosts", placement]
    if rules:
        path = os.path.join(work, f"{name}.rules")
        with open(path, "w") as fh:
            fh.write(rules)
        cmd += ["--rules", path]
    cmd += ["--", exe, "--npx", str(px), "--npy", str(py), "--npz", str(pz), *ARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    log = proc.stdout + proc.stderr
    with open(os.path.join(OUT, f"{name}.log"), "w") as fh:
        fh.write("$ " + " ".join(cmd).replace(ROOT, ".") + "\n" + log)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: miniAMR failed (exit {proc.returncode}); see {name}.log")
    exp = os.path.join(OUT, name)
    shutil.rmtree(exp, ignore_errors=True)
    subprocess.run([COLLTUNE, "profile", "export", prof, "--topology", platform, "-o", exp, "-q"],
                   check=True)
    report = [COLLTUNE, "profile", "report", prof, "--topology", platform,
              "-o", os.path.join(OUT, f"{name}.html"), "-q", "--label", name]
    subprocess.run(report, check=True)
    whatif = {}
    for place in ("compact", "spread"):
        w = subprocess.run([COLLTUNE, "profile", "whatif", prof, "--topology", platform,
                            "--place", place, "-q"], capture_output=True, text=True, check=True)
        whatif[place] = w.stdout.strip()
    with open(os.path.join(OUT, f"{name}.whatif.txt"), "w") as fh:
        for place, text in whatif.items():
            fh.write(f"== --place {place}\n{text}\n")
    return {"prof": prof, "log": log}


def compare(a: str, b: str, kind: str, work: str) -> None:
    platform = CASES[a][0]
    subprocess.run([COLLTUNE, "profile", "report", os.path.join(work, a), "--compare",
                    os.path.join(work, b), "--label", a, "--label", b, "--topology", platform,
                    "--kind", kind, "-o", os.path.join(OUT, f"{a}-vs-{b}-{kind}.html"), "-q"],
                   check=True)


def ns_per_counted_send() -> float:
    """The largest 'profiled' cost per send of benchmarks/profile_overhead.py's committed log."""
    path = os.path.join(HERE, "results", "profile_overhead", "overhead.log")
    costs = [float(ln.split()[6]) for ln in open(path) if " profiled " in ln]
    return max(costs)


def counting_cost(run: dict, summ: list[str]) -> list[str]:
    """What counting costs this run: the busiest rank's counted sends x the measured ns per
    send, against miniAMR's own (simulated) total and communication times."""
    per_rank: dict[int, int] = {}
    for kind, unit in run.items():
        if kind == "all":
            continue
        for src, _dst, _b, msgs in unit["ranks"]:
            if unit["visibility"] == "exact" or "colltune" in unit.get("sources", []):
                per_rank[src] = per_rank.get(src, 0) + msgs
    if not per_rank or not summ:
        return []
    ns = ns_per_counted_send()
    worst = max(per_rank.values())
    fields = dict(re.findall(r"(\w+) ([0-9.]+)", summ[0]))
    total, mpi_s = float(fields["time"]), float(fields["comm"]) + float(fields["red"])
    cost = worst * ns * 1e-9
    return [f"  counting: {sum(per_rank.values()):,d} sends counted, busiest rank {worst:,d}; at "
            f"{ns:.1f} ns per counted send (benchmarks/results/profile_overhead, real MPI) that rank "
            f"pays {cost * 1e6:.1f} us = {100 * cost / total:.2f} % of miniAMR's simulated run "
            f"time ({total * 1e3:.2f} ms), {100 * cost / mpi_s:.2f} % of its comm + red time"]


def summary(name: str) -> list[str]:
    with open(os.path.join(OUT, name, "traffic.json")) as fh:
        doc = json.load(fh)
    platform, layout = CASES[name][:2]
    run = doc["traffic"]["run"]
    lines = [f"== {name}: {platform} {layout} ({doc['size']} ranks), missing ranks: "
             f"{doc['missing'] or 'none'}"]
    for kind in sorted(run, key=lambda k: -run[k]["bytes"]):
        u = run[kind]
        top = u.get("most_loaded") or {}
        lines.append(f"  {kind:<12} {u['visibility']:<12} {u['bytes']:>14,d} B {u['messages']:>10,d} msgs"
                     f"  hop-bytes {u.get('hop_bytes', 0):>16,d}  most loaded: "
                     f"{top.get('id', '-')} {top.get('bytes', 0):,d} B")
    for note in doc["notes"]:
        lines.append(f"  note: {note}")
    log = open(os.path.join(OUT, f"{name}.log")).read()
    checks = re.findall(r"^.*difference too large.*$", log, re.M)
    summ = re.findall(r"^Summary:.*$", log, re.M)
    lines += [f"  miniAMR: {s}" for s in summ]
    lines += counting_cost(run, summ)
    lines.append(f"  miniAMR checksum failures (\"difference too large\"): {len(checks)}")
    whatif = os.path.join(OUT, f"{name}.whatif.txt")
    if os.path.exists(whatif):
        lines += ["  " + ln for ln in open(whatif).read().splitlines()]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-run", action="store_true", help="reprint from the committed files")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    os.makedirs(OUT, exist_ok=True)
    if not args.no_run:
        exe = build_app()
        work = tempfile.mkdtemp(prefix="colltune-miniamr-")
        try:
            for name in cases:
                print(f"running {name} ...", file=sys.stderr, flush=True)
                run_case(name, exe, work)
            for a, b, kind in COMPARE:
                if a in cases and b in cases:
                    compare(a, b, kind, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    text = []
    for name in cases:
        text += summary(name)
    print("\n".join(text))
    if not args.no_run or args.cases == ",".join(CASES):
        with open(os.path.join(OUT, "summary.log"), "w") as fh:
            fh.write("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
