#!/usr/bin/env python3
"""Does online mode's cost of a call rank the arms as the offline benchmark does when one
participant arrives late? (issue 16: the delayed-participant scenario)

Online mode times a call from the last arrival to the last completion (max end - max
start over the ranks, docs/online-native.md); `colltune bench --scenario delayed` times
max end - min start with the last rank starting `delay` late. When the late rank is the
last arrival the two differ by the delay itself, the same for every arm, so they should
rank the arms alike; a cost that included the delay, or only some ranks' waits, would
not be that constant. This script checks it on SMPI:

1. a program (written to the work folder) calls bcast, allreduce, reduce and allgather
   on MPI_COMM_WORLD at four sizes (four size classes), ITER times each; every call
   starts at one instant of the simulated clock (as in online_synthetic.py), and the
   last rank sleeps DELAY (simulated) before calling;
2. for every delay, one run per preset arm with every block fixed to that arm
   (online_common.exhaustive): each arm's online cost per block;
3. `colltune bench --scenario delayed --delayed-rank last --delays-us DELAY` of the same
   arms at the same layout and sizes;
4. per delay and block: the arm each ranks best, whether the whole order is the same,
   the bench's time of online's best arm over the bench's best (regret), Kendall's tau
   between the two orders, and online cost + delay against the bench's
   time (1.000 when the costs differ by exactly the delay). Online costs here are the
   median of the calls' costs, the bench's statistic; the agreement of the means (what
   the learner uses, the first call's communicator setup included) is printed too.

    .venv/bin/python benchmarks/online_delayed.py [--delays-us 10,100,1000] [--layout 8x4]
Writes benchmarks/results/online_delayed/summary.log and results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time

from online_common import (CACHE, HERE, SYNC_START_C, bench_best, block_name, colltune_run, exhaustive,
                           measured_only, ompi_platform, platform_name, used_sizes)

from colltune import mpi
from colltune.online import state
from colltune.online.arms import preset_arms
from colltune.online.update import samples_files

BASE_PLATFORM, ITER = "fattree64x12", 40   # calls per block and run: a first call that builds state (HAN) is 1/40 of its mean
SIZES = (8, 2048, 32768, 1048584)        # bytes per rank, one per size class

APP = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static const long sizes[] = {8, 2048, 32768, 1048584};
/*SYNC_START*/
/* every call starts at one instant, the last rank DELAY later */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int iters = atoi(argv[1]), rank, n;
    double delay = atof(argv[2]) * 1e-6, check = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int late = rank == n - 1;
    double *a = malloc(1048584), *b = malloc((size_t)1048584 * n);
    for (int it = 0; it < iters; it++)
        for (int s = 0; s < 4; s++) {
            int cnt = (int)(sizes[s] / 8);
            for (int i = 0; i < cnt; i++) a[i] = rank + i % 7 + it;
            sync_start(late ? delay : 0);
            MPI_Bcast(a, cnt, MPI_DOUBLE, 0, MPI_COMM_WORLD), check += a[cnt - 1];
            sync_start(late ? delay : 0);
            MPI_Allreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), check += b[cnt / 2];
            sync_start(late ? delay : 0);
            MPI_Reduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) check += b[0];
            sync_start(late ? delay : 0);
            MPI_Allgather(a, cnt, MPI_DOUBLE, b, cnt, MPI_DOUBLE, MPI_COMM_WORLD), check += b[cnt - 1];
        }
    double total;
    PMPI_Reduce(&check, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("checksum %.6f\n", total);
    free(a), free(b);
    MPI_Finalize();
    return 0;
}
"""


def medians(ex_dir: str, runs: int) -> dict:
    """{block key: {arm: median cost}} over the records (one per sampled call) of the
    fixed-arm runs arm0..arm<runs-1> of online_common.exhaustive: the statistic the bench
    reports (median after a warm-up), so a first call that built HAN's communicators is
    one outlier here, where the runs' means carry 1/ITER of it."""
    import statistics
    by: dict = {}
    for k in range(runs):
        for s in samples_files(os.path.join(ex_dir, f"arm{k}")):
            for coll, nodes, ppn, _size, nbytes, arm, cost, *_ in s.data.get("records", []):
                by.setdefault((coll, nodes, ppn, state.class_of(nbytes)), {}).setdefault(arm, []).append(cost)
    return {key: {arm: statistics.median(c) for arm, c in arms.items()} for key, arms in by.items()}


def kendall_tau(a: list[str], b: list[str]) -> float:
    """Kendall's tau between two orders of the same items (1: the same order)."""
    pos = {x: i for i, x in enumerate(b)}
    pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
    concordant = sum(1 if pos[a[i]] < pos[a[j]] else -1 for i, j in pairs)
    return concordant / len(pairs) if pairs else 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays-us", default="10,100,1000")
    ap.add_argument("--layout", default="8x4")
    ap.add_argument("--work", default=os.path.join(CACHE, "online-delayed-work"))
    a = ap.parse_args()
    t0, lines = time.time(), []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    out_dir = os.path.join(HERE, "results", "online_delayed")
    os.makedirs(out_dir, exist_ok=True)
    platform = ompi_platform(BASE_PLATFORM, a.work)
    src = os.path.join(a.work, "delayed.c")
    with open(src, "w") as fh:
        fh.write(APP.replace("/*SYNC_START*/", SYNC_START_C))
    presets, _ = preset_arms(mpi.find("smpi"), CACHE, platform_name(platform))
    delays = [float(x) for x in a.delays_us.split(",")]
    say(f"online cost vs `colltune bench --scenario delayed` (last rank late), {platform_name(platform)} "
        f"{a.layout}, bcast/allreduce/reduce/allgather at {', '.join(map(str, SIZES))} B per rank, "
        f"{ITER} calls each per run, every preset arm")
    say(f"{'delay':>7} {'block':34s} {'best online':22s} {'best bench':22s} {'regret':>6} {'order':5s} {'tau':>6} "
        f"{'(online+delay)/bench per arm':>30}")
    data, agree_best, agree_order, agree_mean, taus, regret, n_blocks = {}, 0, 0, 0, [], [], 0
    for d in delays:
        prog = [src, str(ITER), str(d)]
        learn = os.path.join(a.work, f"template-{d:g}")
        colltune_run(platform, a.layout, prog, online=learn, env={"COLLTUNE_ONLINE_BUDGET": "1"})
        template = measured_only(state.load(os.path.join(learn, "state.txt")))
        ex_dir = os.path.join(a.work, f"ex-{d:g}")
        ex = exhaustive(template, presets, ex_dir, platform, a.layout, prog)
        online = medians(ex_dir, len(ex["runs"]))
        bench, _ = bench_best(used_sizes(learn), presets, platform, os.path.join(a.work, f"bench-{d:g}"),
                              ("--scenario", "delayed", "--delayed-rank", "last", "--delays-us", f"{d:g}"))
        for key in sorted(online):
            on, be, mean = online[key], bench.get(key, {}), ex["per_arm"].get(key, {})
            arms = [x for x in on if x in be]
            if len(arms) < 2:
                continue
            o_order, b_order = sorted(arms, key=on.get), sorted(arms, key=be.get)
            by_mean = sorted([x for x in arms if x in mean], key=mean.get)
            agree_mean += by_mean[:1] == b_order[:1]
            tau = kendall_tau(o_order, b_order)
            ratio = [(on[x] + d * 1e-6) / be[x] for x in arms]
            n_blocks += 1
            agree_best += o_order[0] == b_order[0]
            agree_order += o_order == b_order
            taus.append(tau)
            regret.append(be[o_order[0]] / be[b_order[0]])
            say(f"{d:5g}us {block_name(key):34s} {o_order[0]:22s} {b_order[0]:22s} {regret[-1]:6.4f} "
                f"{'same' if o_order == b_order else 'diff':5s} {tau:6.3f} "
                f"{min(ratio):14.3f} .. {max(ratio):.3f}")
            data[f"{d:g}us {block_name(key)}"] = {"online_median_s": on, "online_mean_s": mean,
                                                  "bench_s": be, "tau": tau}
    say(f"blocks: {n_blocks}; online medians: the same best arm in {agree_best}, the same order of "
        f"all arms in {agree_order}; Kendall's tau mean {sum(taus) / len(taus):.3f}, min {min(taus):.3f}; "
        f"the bench's time of online's best over the bench's best (regret): mean {sum(regret) / len(regret):.4f}, "
        f"max {max(regret):.4f}")
    say(f"online means (what the learner uses: a first call that builds HAN's communicators, "
        f"which waits for the late rank, counts 1/{ITER}): the same best arm in {agree_mean}")
    say(f"wall time {time.time() - t0:.0f} s")
    with open(os.path.join(out_dir, "summary.log"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "results.json"), "w") as fh:
        json.dump(data, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
