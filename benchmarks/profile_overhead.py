#!/usr/bin/env python3
"""What traffic counting (COLLTUNE_PROFILE, docs/profile-counting.md) costs per counted send.

profile_send_loop.c (one rank: MPI_Irecv from self, MPI_Send of one int to self,
MPI_Wait; best of BLOCKS blocks of CALLS) runs side by side, round after round, as

  plain       no interposer
  preloaded   libcolltune, no COLLTUNE_* variable: the send wrapper's one branch
  profiled    COLLTUNE_PROFILE set: each send is counted (type size, world rank, counter)
  no-room     COLLTUNE_PROFILE set with COLLTUNE_PROFILE_MAX_MB=0: no room for the
              counters, the whole counting path runs and the send lands in `dropped`

on MPI_COMM_WORLD and on a duplicate of it (the cached communicator -> world
translation), on real Open MPI and MPICH (LD_PRELOAD). Prints ns per iteration,
the ratio to plain and the difference (= the cost of counting one send), medians
over rounds, and the rank file's memory_bytes.

    .venv/bin/python benchmarks/profile_overhead.py [--rounds 5] [--calls 200000]
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
from colltune.providers.colltune import libcolltune, preload_args  # noqa: E402
from colltune.subcommands.run import compile_app  # noqa: E402

CACHE = os.path.join(os.path.dirname(HERE), ".colltune-cache")
SRC = os.path.join(HERE, "profile_send_loop.c")
VARIANTS = ("plain", "preloaded", "profiled", "no-room")


def run_variant(impl, app, lib, variant: str, comm: str, calls: int, blocks: int, tmp: str) -> dict:
    env = impl.run_env()
    cmd = [impl.launcher, "-n", "1", str(app), comm, str(calls), str(blocks)]
    if variant != "plain":
        cmd[1:1] = preload_args(impl, lib)
    out_dir = os.path.join(tmp, f"{impl.name}-{variant}-{comm}")
    if variant in ("profiled", "no-room"):
        env["COLLTUNE_PROFILE"] = out_dir
    if variant == "no-room":
        env["COLLTUNE_PROFILE_MAX_MB"] = "0"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode or not line:
        sys.exit(f"{impl.name} {variant} failed: {proc.stdout[-500:]}{proc.stderr[-1500:]}")
    res = json.loads(line[0])
    rank_file = os.path.join(out_dir, "rank-0.json")
    if variant == "profiled":
        doc = json.load(open(rank_file))
        (c,) = doc["counts"]
        assert c["peers"][0][2] == (blocks + 1) * calls, c        # every send counted
        res["memory_bytes"] = doc["memory_bytes"]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--mpis", default="openmpi,mpich")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.mpis.split(","):
            impl = mpi.find(name)
            app, lib = compile_app(impl, SRC, CACHE, []), libcolltune(impl, CACHE)
            for comm in ("world", "dup"):
                res: dict[str, list[dict]] = {v: [] for v in VARIANTS}
                for _ in range(args.rounds):            # variants side by side, each round
                    for v in VARIANTS:
                        res[v].append(run_variant(impl, app, lib, v, comm, args.calls, args.blocks, tmp))
                base = statistics.median(r["real_ns"] for r in res["plain"])
                for v in VARIANTS:
                    real = statistics.median(r["real_ns"] for r in res[v])
                    mem = res[v][0].get("memory_bytes", "")
                    rows.append((f"{name} x1", comm, v, real, real / base, real - base, mem))
    print(f"# {args.rounds} rounds, best of {args.blocks} blocks of {args.calls} iterations "
          f"(Irecv + Send + Wait to self); medians over rounds; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'mpi':<11} {'comm':<6} {'variant':<10} {'ns/iter':>9} {'ratio':>7} {'diff ns':>8} "
          f"{'memory_bytes':>12}")
    for r in rows:
        print(f"{r[0]:<11} {r[1]:<6} {r[2]:<10} {r[3]:>9.1f} {r[4]:>7.3f} {r[5]:>8.1f} {r[6]:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
