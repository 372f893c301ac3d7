#!/usr/bin/env python3
"""End-to-end self-test of colltune-bench under SimGrid SMPI (stdlib only).

    python3 native/bench/selftest.py [--keep DIR]

Builds the bench with smpicc into a scratch folder, runs it on a small platform
and checks: a warning-free build, every collective and scenario with results
checked, determinism, sizes and delays that cost more, sane overlap, detection of
an SMPI algorithm that returns wrong data, option errors (exit 2), --check only.
Ends with 'N passed, N failed'; exits 1 if any failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.dirname(HERE)
COLLS = ["bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "alltoall",
         "reduce_scatter_block", "barrier"]
PLATFORM = ("<?xml version='1.0'?><!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"
            "<platform version=\"4.1\"><cluster id=\"c\" prefix=\"node-\" radical=\"0-7\" suffix=\"\" "
            "speed=\"1Gf\" core=\"4\" bw=\"10GBps\" lat=\"1us\" loopback_bw=\"20GBps\" "
            "loopback_lat=\"0.1us\"/></platform>\n")

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


class Bench:
    def __init__(self, work):
        self.work = work
        self.exe = os.path.join(work, "colltune-bench")
        self.platform = os.path.join(work, "p.xml")
        with open(self.platform, "w") as f:
            f.write(PLATFORM)

    def hostfile(self, n):
        path = os.path.join(self.work, f"h{n}")
        with open(path, "w") as f:
            f.write("".join(f"node-{i // 4}\n" for i in range(n)))  # 4 ranks per node
        return path

    def run(self, np, args, cfg=()):
        """Returns (exit code, records, stderr text)."""
        out = os.path.join(self.work, "out.json")
        if os.path.exists(out):
            os.remove(out)
        cmd = ["smpirun", "-np", str(np), "-platform", self.platform, "-hostfile", self.hostfile(np),
               "--cfg=smpi/simulate-computation:no", *cfg, self.exe, *args, "--json", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        recs = []
        if os.path.exists(out):
            with open(out) as f:
                recs = [json.loads(line) for line in f if line.strip()]
        return p.returncode, recs, p.stderr


def measurements(recs):
    return [r for r in recs if r.get("type") == "measurement"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="build and run in this folder and keep it")
    opts = ap.parse_args()
    if not shutil.which("smpicc") or not shutil.which("smpirun"):
        print("smpicc/smpirun not found (install libsimgrid-dev)")
        print("0 passed, 1 failed")
        return 1
    work = opts.keep or tempfile.mkdtemp(prefix="colltune-bench-selftest-")
    os.makedirs(work, exist_ok=True)
    try:
        return run_all(work)
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)


def run_all(work):
    b = subprocess.run(["make", "-C", NATIVE, "bench", "MPICC=smpicc", f"OUT={work}", "-B"],
                       capture_output=True, text=True)
    check("build", b.returncode == 0 and os.path.exists(os.path.join(work, "colltune-bench")),
          b.stdout[-2000:] + b.stderr[-2000:])
    if b.returncode != 0:
        print(f"{results.count(True)} passed, {results.count(False)} failed")
        return 1
    check("build has no warnings", "warning" not in b.stderr, b.stderr[-2000:])
    bench = Bench(work)

    # every collective and scenario, results checked, 5 ranks on 2 nodes, root 3
    for coll in COLLS:
        for scen, extra in (("plain", []), ("delayed", ["--delays-us", "0,20"]),
                            ("overlap", ["--tcalc-us", "0,50"])):
            root = ["--root", "3"] if coll in ("bcast", "reduce", "gather", "scatter") else []
            rc, recs, err = bench.run(5, ["--coll", coll, "--scenario", scen, "--sizes", "0,1,7,1000,4096",
                                          "--check", "first", *root, *extra])
            ms = measurements(recs)
            ok = (rc == 0 and recs and recs[-1] == {"type": "done", "points": len(ms), "failed_checks": 0}
                  and all(m["valid"] is True and m["reps"] >= 5 for m in ms)
                  and all(m["ttc_median_s"] > 0 for m in ms if m["bytes"] > 0 or coll == "barrier"))
            check(f"{coll} {scen}", ok, f"rc={rc} {err[-500:]} {ms[:1]}")

    # the charged sum gives the same checked results, every reducing collective and datatype
    for coll in ("reduce", "allreduce", "reduce_scatter_block"):
        for dt in ("char", "int", "float", "double"):
            rc, recs, err = bench.run(5, ["--coll", coll, "--op", "charged-sum", "--dtype", dt,
                                          "--sizes", "0,8,1000,4096", "--check", "only"])
            ms = measurements(recs)
            check(f"{coll} charged-sum {dt}", rc == 0 and len(ms) == 4 and all(m["valid"] is True for m in ms),
                  f"rc={rc} {err[-500:]} {ms[:1]}")

    # determinism: two identical runs print identical files
    args = ["--coll", "allreduce", "--sizes", "4,1000,65536", "--procs", "3,6"]
    _, r1, _ = bench.run(6, args)
    _, r2, _ = bench.run(6, args)
    check("determinism", r1 == r2 and len(r1) == 8, f"{len(r1)} vs {len(r2)} records")

    # bigger messages and longer delays take longer
    _, recs, _ = bench.run(8, ["--coll", "bcast", "--sizes", "1,4096,65536,1048576"])
    t = [m["ttc_median_s"] for m in measurements(recs)]
    check("ttc grows with size", len(t) == 4 and t == sorted(t) and t[0] < t[-1], str(t))
    _, recs, _ = bench.run(8, ["--coll", "allreduce", "--scenario", "delayed", "--delays-us", "0,10,100",
                               "--sizes", "1000"])
    t = [m["ttc_median_s"] for m in measurements(recs)]
    check("ttc grows with delay", len(t) == 3 and t[0] < t[1] < t[2] and t[2] - t[0] > 90e-6, str(t))

    # overlap: within [0, 100], full when the computation hides the communication
    _, recs, _ = bench.run(8, ["--coll", "allreduce", "--scenario", "overlap", "--tcalc-us", "0,1000",
                               "--sizes", "65536"])
    o = [m["overlap_pct"] for m in measurements(recs)]
    check("overlap_pct sane", len(o) == 2 and 0 <= o[0] <= 5 and o[1] == 100, str(o))

    # wrong data from a real SMPI algorithm at a non-power-of-two size
    rc, recs, _ = bench.run(6, ["--coll", "allreduce", "--sizes", "4,1000", "--check", "first"],
                            cfg=["--cfg=smpi/allreduce:smp_rsag"])
    ms = measurements(recs)
    check("wrong result detected", rc == 3 and ms and all(m["valid"] is False and m["reps"] == 0
                                                           and m["check_error"].startswith("rank ")
                                                           for m in ms)
          and recs[-1]["failed_checks"] == 2, f"rc={rc} {ms}")

    # --check only: checked, not timed
    rc, recs, _ = bench.run(5, ["--coll", "alltoall", "--sizes", "7,1000", "--check", "only",
                                "--procs", "1,3,5"])
    ms = measurements(recs)
    check("check only", rc == 0 and [m["participants"] for m in ms] == [1, 1, 3, 3, 5, 5]
          and all(m["valid"] is True and m["reps"] == 0 and m["ttc_median_s"] is None for m in ms), str(ms[:1]))

    # a huge --max-reps: the series grow as they fill (it once overflowed an int and
    # measured no repetition, or would have allocated 16 GB up front)
    rc, recs, _ = bench.run(2, ["--coll", "bcast", "--sizes", "8", "--min-reps", "300",
                                "--max-reps", "2000000000", "--check", "none"])
    ms = measurements(recs)
    check("huge --max-reps", rc == 0 and len(ms) == 1 and ms[0]["reps"] >= 300
          and ms[0]["ttc_median_s"] is not None, str(ms[:1]))

    # option errors: exit 2 with a message naming the option
    for bad, word in ((["--coll", "nope"], "--coll"), (["--coll", "bcast", "--sizes", "1,x"], "--sizes"),
                      (["--coll", "bcast", "--sizes", "1", "--procs", "9"], "--procs"),
                      (["--coll", "bcast", "--sizes", "1", "--scenario", "delayed"], "--delays-us"),
                      (["--coll", "bcast", "--sizes", "1", "--hang-at-size", "-1"], "--hang-at-size"),
                      (["--coll", "allreduce", "--sizes", "8", "--op", "max"], "--op"),
                      (["--coll", "bcast", "--sizes", "8", "--op", "charged-sum"], "does not reduce")):
        rc, _, err = bench.run(4, bad)
        check(f"error {' '.join(bad)}", rc == 2 and word in err, f"rc={rc} {err[-300:]}")

    print(f"{results.count(True)} passed, {results.count(False)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
