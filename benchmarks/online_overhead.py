#!/usr/bin/env python3
"""What libcolltune's online mode (docs/online-native.md) costs per call in bookkeeping.

The pass-through benchmark's loop (interposer_loop.c: CALLS MPI_Allreduce or MPI_Bcast of
one int, best of BLOCKS blocks) runs side by side, round after round, on real Open MPI and
MPICH (LD_PRELOAD) in these variants, all of which end in the library's own collective:

  to-library      a rules file sending the call to the library (the interposer's full
                  decision, then PMPI_): the baseline
  online-sampled  online mode, a state whose block gives the arm `library` p = 1, a budget
                  larger than the run: every call is drawn, timed and stored
  online-after    the same state with the library measured (n = 10) and budget 0: every
                  call is past its budget and runs the block's best arm

The bookkeeping per call is the variant's ns/call minus to-library's (medians over rounds).
Targets (issue 16): <= 100 ns per sampled call, <= 10 ns per call after the budget.

    .venv/bin/python benchmarks/online_overhead.py [--rounds 5] [--calls 20000]
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

from colltune import mpi  # noqa: E402
from colltune.providers.colltune import libcolltune, preload_args, rules_tool_command  # noqa: E402
from colltune.subcommands.run import compile_app  # noqa: E402

CACHE = os.path.join(os.path.dirname(HERE), ".colltune-cache")
SRC = os.path.join(HERE, "interposer_loop.c")
VARIANTS = ("to-library", "online-sampled", "online-after")
BUDGET_SAMPLED = 100000            # the largest COLLTUNE_ONLINE_BUDGET; (blocks + 1) x calls must fit


def state_text(impl, tmp: str, ranks: int, measured: bool) -> str:
    """A state for both collectives' smallest block at 1 node x ranks: the library, p = 1."""
    tool = subprocess.run(rules_tool_command(impl, CACHE, tmp) + ["online-arms"], capture_output=True,
                          text=True, check=True, timeout=120, cwd=tmp)
    fp = json.loads(tool.stdout)["fingerprint"]
    stats = " n=10 mean=1e-06 m2=0" if measured else " n=0"
    lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 0"]
    for coll in ("allreduce", "bcast"):
        lines += [f"block {coll} nodes=1 ppn={ranks} bytes=0..16 calls=0 source=prior",
                  f"arm library p=1{stats}"]
    return "\n".join(lines) + "\n"


def launches(name: str, ranks: int, tmp: str):
    """{variant: (argv, env)} for one MPI and rank count."""
    impl = mpi.find(name)
    lib = libcolltune(impl, CACHE)
    app = compile_app(impl, SRC, CACHE, [])
    argv = [impl.launcher, *preload_args(impl, lib), "-n", str(ranks), str(app)]
    base = impl.run_env()
    rules = os.path.join(tmp, "to-library.rules")
    with open(rules, "w") as fh:
        fh.write("colltune-rules 1\nallreduce -> library\nbcast -> library\n")
    out = {"to-library": (argv, {**base, "COLLTUNE_RULES": rules})}
    for v, measured, budget in (("online-sampled", False, BUDGET_SAMPLED), ("online-after", True, 0)):
        d = os.path.join(tmp, f"{name}-{ranks}-{v}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "state.txt"), "w") as fh:
            fh.write(state_text(impl, tmp, ranks, measured))
        out[v] = (argv, {**base, "COLLTUNE_ONLINE": d, "COLLTUNE_ONLINE_BUDGET": str(budget)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--colls", default="allreduce,bcast")
    ap.add_argument("--mpis", default="openmpi:1,openmpi:2,mpich:1,mpich:2", help="MPI:RANKS list")
    args = ap.parse_args()
    if (args.blocks + 1) * args.calls > BUDGET_SAMPLED:
        sys.exit(f"(blocks + 1) x calls must be <= {BUDGET_SAMPLED}: every call of online-sampled is sampled")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for item in args.mpis.split(","):
            name, ranks = item.split(":")
            runs = launches(name, int(ranks), tmp)
            for coll in args.colls.split(","):
                res: dict[str, list[float]] = {v: [] for v in VARIANTS}
                for _ in range(args.rounds):             # variants side by side, each round
                    for v in VARIANTS:
                        argv, env = runs[v]
                        out = subprocess.run(argv + [coll, str(args.calls), str(args.blocks)],
                                             capture_output=True, text=True, env=env, timeout=600)
                        line = [x for x in out.stdout.splitlines() if x.startswith("{")]
                        if out.returncode or not line or "warning" in out.stderr:
                            sys.exit(f"{name} {v} failed: {out.stdout[-500:]}{out.stderr[-1500:]}")
                        res[v].append(json.loads(line[0])["real_ns"])
                base = statistics.median(res["to-library"])
                for v in VARIANTS:
                    real = statistics.median(res[v])
                    rows.append((f"{name} x{ranks}", coll, v, real, real - base,
                                 min(res[v]) - min(res["to-library"])))
    print(f"# {args.rounds} rounds, best of {args.blocks} blocks of {args.calls} calls; medians over "
          f"rounds; bookkeeping = variant - to-library (median, and best against best)")
    print(f"{'mpi':<12} {'coll':<10} {'variant':<15} {'ns/call':>9} {'bookkeeping ns':>15} {'best-best':>10}")
    for r in rows:
        print(f"{r[0]:<12} {r[1]:<10} {r[2]:<15} {r[3]:>9.1f} {r[4]:>15.1f} {r[5]:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
