#!/usr/bin/env python3
"""Online tuning on a synthetic application whose best arm differs by block (issue 16).

The program (written to the work folder, built by `colltune run`) calls bcast,
allreduce, reduce and allgather at one size per size class (8 B to 1 MiB + 8 per rank;
allgather up to 512 KiB) on MPI_COMM_WORLD and on two sub-communicators (the nodes
i % 3 == 0 and the others), ITER times, and prints a checksum of every result.
Platform `fattree64x12`, 3 ranks per node: at 6x3 the communicators are 6x3 = 18,
2x3 = 6 and 4x3 = 12 ranks; at 8x3 24, 3x3 = 9 and 5x3 = 15 (not powers of two).

1. learning: R runs of `colltune run --online` at 6x3 (COLLTUNE_ONLINE_BUDGET=24);
2. offline exhaustive best of every block, in the application (online_common.py):
   final choices equal to it (share of blocks) and average slowdown of the choices;
3. prediction: the first run at the unseen layout 8x3 with the state learnt at 6x3
   (`colltune online update --layout` gives its blocks priors from the forest) against a
   first run from uniform probabilities, both against the offline best at 8x3.

    .venv/bin/python benchmarks/online_synthetic.py [--runs 6]
Prints the numbers and writes benchmarks/results/online_synthetic/summary.log.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time

from online_common import (CACHE, COLLTUNE, block_name, checksum_lines, colltune_run, exhaustive,
                           fixed_state, last_samples, measured_only, run_fixed)

from colltune import mpi
from colltune.online import history, state
from colltune.online.arms import preset_arms

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "online_synthetic")
PLATFORM, PPN, ITER, BUDGET = "fattree64x12", 3, 30, "24"
ENV = {"COLLTUNE_ONLINE_BUDGET": BUDGET}

APP = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* one size per size class (bytes per rank) */
static const long sizes[] = {8, 128, 2048, 32768, 524288, 1048584};
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int ppn = atoi(argv[1]), iters = atoi(argv[2]), rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, (rank / ppn) % 3 == 0, rank, &sub);
    MPI_Comm comms[2] = {MPI_COMM_WORLD, sub};
    double *a = malloc(1048584), *b = malloc(1048584 * 24), check = 0;
    for (int it = 0; it < iters; it++)
        for (int c = 0; c < 2; c++) {
            int r, n;
            MPI_Comm_rank(comms[c], &r);
            MPI_Comm_size(comms[c], &n);
            for (int s = 0; s < 6; s++) {
                int cnt = (int)(sizes[s] / 8);
                for (int i = 0; i < cnt; i++) a[i] = r + i % 5 + it;
                MPI_Bcast(a, cnt, MPI_DOUBLE, it % n, comms[c]);
                check += a[cnt - 1];
                MPI_Allreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, comms[c]);
                check += b[cnt / 2];
                MPI_Reduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, comms[c]);
                if (r == 0) check += b[0];
                if (s < 5) {
                    MPI_Allgather(a, cnt, MPI_DOUBLE, b, cnt, MPI_DOUBLE, comms[c]);
                    check += b[(n - 1) * cnt];
                }
            }
        }
    double total;
    MPI_Reduce(&check, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("checksum %.6f\n", total);
    free(a), free(b);
    MPI_Comm_free(&sub);
    MPI_Finalize();
    return 0;
}
"""


def layouts(nodes: int) -> list[tuple[int, int]]:
    """The (nodes, ppn) of the program's communicators at NODESx3."""
    lead = len([i for i in range(nodes) if i % 3 == 0])
    return [(nodes, PPN), (lead, PPN), (nodes - lead, PPN)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--work", default=os.path.join(CACHE, "online-synthetic-work"))
    args = ap.parse_args()
    t0 = time.time()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    os.makedirs(OUT, exist_ok=True)
    src = os.path.join(args.work, "synthetic.c")
    with open(src, "w") as fh:
        fh.write(APP)
    prog = [src, str(PPN), str(ITER)]
    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    presets, _ = preset_arms(mpi.find("smpi"), CACHE, PLATFORM)
    ref = checksum_lines(colltune_run(PLATFORM, "6x3", prog), r"^checksum .*")
    learn = os.path.join(args.work, "learn")
    times = []
    for r in range(args.runs):
        out = colltune_run(PLATFORM, "6x3", prog, online=learn, env=ENV)
        assert checksum_lines(out, r"^checksum .*") == ref, "checksum changed under online mode"
        times.append(history.run_time(last_samples(learn)))
        print(f"  learning run {r + 1}: collective time {times[-1] * 1e3:.3f} ms", flush=True)
    final = measured_only(state.load(os.path.join(learn, "state.txt")))
    say(f"synthetic program, {PLATFORM}, learning at 6x3 ({args.runs} runs, budget {BUDGET}, "
        f"{ITER} iterations): {len(final.blocks)} blocks; checksums unchanged in every run")
    say("collective time per run (ms): " + " ".join(f"{t * 1e3:.3f}" for t in times))

    ex = exhaustive(final, presets, os.path.join(args.work, "ex6"), PLATFORM, "6x3", prog, ENV)
    same, slow, rows = 0, [], []
    for key, best in sorted(ex["best"].items()):
        choice = final.blocks[key].best().arm
        m = ex["per_arm"][key]
        same += choice == best
        slow.append(m[choice] / m[best])
        rows.append(f"  {block_name(key):34s} online {choice:28s} offline {best:28s} {slow[-1]:.3f}")
    say(f"final choices equal to the offline best: {same}/{len(ex['best'])} blocks "
        f"({same / len(ex['best']):.1%}); average slowdown of the choices {sum(slow) / len(slow):.4f}")
    lines.extend(rows)

    # prediction at the unseen layout 8x3
    prior_dir, uniform_dir = os.path.join(args.work, "prior"), os.path.join(args.work, "uniform")
    shutil.copytree(learn, prior_dir)
    subprocess.run([COLLTUNE, "online", "update", prior_dir, "--cache-dir", CACHE,
                    *[a for n, p in layouts(8) for a in ("--layout", f"{n}x{p}")]], check=True,
                   capture_output=True)
    colltune_run(PLATFORM, "8x3", prog, online=prior_dir, env=ENV)
    t_prior = history.run_time(last_samples(prior_dir))
    colltune_run(PLATFORM, "8x3", prog, online=uniform_dir, env=ENV)
    t_uniform = history.run_time(last_samples(uniform_dir))
    template = measured_only(state.load(os.path.join(uniform_dir, "state.txt")))
    ex8 = exhaustive(template, presets, os.path.join(args.work, "ex8"), PLATFORM, "8x3", prog, ENV)
    _, t_best, _ = run_fixed(fixed_state(template, lambda b: ex8["best"].get(b.key, "library")),
                             os.path.join(args.work, "best8"), PLATFORM, "8x3", prog, ENV)
    say(f"prediction, first run at the unseen layout 8x3: with priors learnt at 6x3 "
        f"{t_prior * 1e3:.3f} ms ({t_prior / t_best:.3f}x the offline best), from uniform "
        f"{t_uniform * 1e3:.3f} ms ({t_uniform / t_best:.3f}x), offline best {t_best * 1e3:.3f} ms; "
        f"excess over the best, prior / uniform: {(t_prior - t_best) / (t_uniform - t_best):.3f}")
    say(f"wall time {time.time() - t0:.0f} s")
    with open(os.path.join(OUT, "summary.log"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "results.json"), "w") as fh:
        json.dump({"learning_coll_s": times, "same": same, "blocks": len(ex["best"]),
                   "avg_slowdown": sum(slow) / len(slow), "t_prior_s": t_prior,
                   "t_uniform_s": t_uniform, "t_best_s": t_best,
                   "exhaustive_6x3": {block_name(k): v for k, v in ex["per_arm"].items()}},
                  fh, indent=1)
    shutil.copy(os.path.join(learn, "state.txt"), os.path.join(OUT, "state.txt"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
