#!/usr/bin/env python3
"""What libcolltune costs per call when it passes calls through.

The same loop program (interposer_loop.c: CALLS small MPI_Allreduce or
MPI_Bcast of one int, best of BLOCKS blocks) runs side by side, round after
round, in these variants:

  plain          no interposer
  preloaded      libcolltune, no COLLTUNE_* variable: one load + one branch per call
  other-coll     a rules file with rules for another collective only: same path
  to-library     rules for this collective that send small calls to the library:
                 the full decision (cached topology attribute, datatype check,
                 rule match) and then PMPI_
  colltune-alg   rules that run colltune's own algorithm (not overhead: for scale)

on real Open MPI and MPICH at 1 and 2 ranks (LD_PRELOAD) and on SMPI (linked
in; there the simulated time is unchanged by construction and the real time
is what the simulation costs). Prints ns/call per variant, the ratio to
plain and the difference, medians over rounds.

    .venv/bin/python benchmarks/interposer_overhead.py [--rounds 5] [--calls 200000]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

from colltune import mpi, platforms  # noqa: E402
from colltune.providers.colltune import libcolltune, link_args, preload_args  # noqa: E402
from colltune.subcommands.run import compile_app  # noqa: E402

CACHE = os.path.join(os.path.dirname(HERE), ".colltune-cache")
SRC = os.path.join(HERE, "interposer_loop.c")
RULES = {"other-coll": "colltune-rules 1\nreduce -> binomial\n",
         "to-library": "colltune-rules 1\n{coll} bytes=1m.. -> {alg}\n{coll} -> library\n",
         "colltune-alg": "colltune-rules 1\n{coll} -> {alg}\n"}
ALG = {"allreduce": "recursive_doubling", "bcast": "binomial"}
VARIANTS = ("plain", "preloaded", "other-coll", "to-library", "colltune-alg")


def launches(name: str, ranks: int, tmp: str):
    """{variant: (argv, env)} for one MPI and rank count."""
    impl = mpi.find(name)
    lib = libcolltune(impl, CACHE)
    env = impl.run_env()
    if name == "smpi":
        plain = compile_app(impl, SRC, CACHE, [])
        linked = compile_app(impl, SRC, CACHE, link_args(lib))
        plat = platforms.load("small")
        hosts = plat.write_hostfile(1, ranks, os.path.join(tmp, f"hosts{ranks}"))
        base = [impl.launcher, "-np", str(ranks), "-platform", plat.xml_path, "-hostfile", hosts,
                *plat.smpirun_cfg_args(), "--log=root.thres:critical"]
        cmd = {"plain": base + [str(plain)]}
        cmd.update({v: base + [str(linked)] for v in VARIANTS[1:]})
    else:
        app = compile_app(impl, SRC, CACHE, [])
        base = [impl.launcher, "-n", str(ranks)]
        cmd = {"plain": base + [str(app)]}
        cmd.update({v: [impl.launcher, *preload_args(impl, lib), "-n", str(ranks), str(app)]
                    for v in VARIANTS[1:]})
    return cmd, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--colls", default="allreduce,bcast")
    ap.add_argument("--mpis", default="openmpi:1,openmpi:2:20000,mpich:1,mpich:2:20000,smpi:2:5000",
                    help="MPI:RANKS[:CALLS] list (CALLS overrides --calls there)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for item in args.mpis.split(","):
            name, ranks, *more = item.split(":")
            calls = int(more[0]) if more else args.calls
            cmd, env = launches(name, int(ranks), tmp)
            for coll in args.colls.split(","):
                res: dict[str, list[dict]] = {v: [] for v in VARIANTS}
                for _ in range(args.rounds):             # variants side by side, each round
                    for v in VARIANTS:
                        e = dict(env)
                        if v in RULES:
                            path = os.path.join(tmp, f"{v}.rules")
                            with open(path, "w") as fh:
                                fh.write(RULES[v].format(coll=coll, alg=ALG[coll]))
                            e["COLLTUNE_RULES"] = path
                        out = subprocess.run(cmd[v] + [coll, str(calls), str(args.blocks)],
                                             capture_output=True, text=True, env=e, timeout=600)
                        line = [x for x in out.stdout.splitlines() if x.startswith("{")]
                        if out.returncode or not line:
                            sys.exit(f"{name} {v} failed: {out.stdout[-500:]}{out.stderr[-1500:]}")
                        res[v].append(json.loads(line[0]))
                base = statistics.median(r["real_ns"] for r in res["plain"])
                for v in VARIANTS:
                    real = statistics.median(r["real_ns"] for r in res[v])
                    wt = statistics.median(r["wtime_ns"] for r in res[v])
                    rows.append((f"{name} x{ranks}", coll, v, real, real / base, real - base, wt,
                                 calls))
    print(f"# {args.rounds} rounds, best of {args.blocks} blocks of CALLS calls; medians over "
          f"rounds; SMPI: 'real' is the simulator's wall time per call, Wtime the simulated one")
    print(f"{'mpi':<12} {'coll':<10} {'calls':>7} {'variant':<13} {'real ns/call':>12} {'ratio':>7} "
          f"{'diff ns':>8} {'Wtime ns/call':>14}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:<10} {r[7]:>7} {r[2]:<13} {r[3]:>12.1f} {r[4]:>7.3f} {r[5]:>8.1f} "
              f"{r[6]:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
