#!/usr/bin/env python3
"""Online tuning on a synthetic application whose best arm differs by block (issue 16).

The program (written to the work folder, built by `colltune run`) calls bcast,
allreduce, reduce and allgather at one size per size class (8 B to 1 MiB + 8 per rank;
allgather up to 512 KiB) on MPI_COMM_WORLD and on two sub-communicators (the nodes
i % 3 == 0 and the others), ITER times, and prints a checksum of every result. Every call
starts at one instant of the simulated clock (sync_start) and one communicator runs at a
time: what is compared is the learner against the synchronised offline benchmark, not the
arms' tolerance of arrival skew or of a neighbour's traffic (miniAMR is the
in-application case). With an MPI_Barrier before each call instead, 61/69 final choices
were the benchmark's best and 67/69 the in-application best: the ranks leave a barrier
microseconds apart, which reorders the arms of few-microsecond calls.
Platform `fattree64x12` with SMPI's `ompi` selector for the `library` arm (online_common.
ompi_platform), 3 ranks per node: at 6x3 the communicators are 6x3 = 18,
2x3 = 6 and 4x3 = 12 ranks; at 8x3 24, 3x3 = 9 and 5x3 = 15 (not powers of two).

1. learning: R runs of `colltune run --online` at 6x3 (COLLTUNE_ONLINE_BUDGET=24);
2. offline exhaustive best of every block, in the application (online_common.py):
   final choices equal to it (share of blocks) and average slowdown of the choices;
3. prediction: the first run at the unseen layout 8x3 with the state learnt at 6x3
   (`colltune online update --layout` gives its blocks priors from the forest) against a
   first run from uniform probabilities, both against the offline best at 8x3.

    .venv/bin/python benchmarks/online_synthetic.py [--runs 6]
Prints the numbers and writes benchmarks/results/online_synthetic/budget<B>/ (summary.log,
results.json, the learnt state.txt).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from online_common import (CACHE, COLLTUNE, SYNC_START_C, Bench, bench_best, block_name, checksum_lines,
                           colltune_run, compare_choices, exhaustive, fixed_state, last_samples,
                           measured_only, ompi_platform, platform_name, run_fixed, used_sizes)

from colltune import mpi
from colltune.online import history, state
from colltune.online.arms import preset_arms

BASE_PLATFORM, PPN, ITER = "fattree64x12", 3, 30

APP = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* one size per size class (bytes per rank) */
static const long sizes[] = {8, 128, 2048, 32768, 524288, 1048584};
/*SYNC_START*/
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int ppn = atoi(argv[1]), iters = atoi(argv[2]), rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int color = (rank / ppn) % 3 == 0;
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &sub);
    double *a = malloc(1048584), *b = malloc(1048584 * 24), check = 0;
    for (int it = 0; it < iters; it++)
        for (int phase = 0; phase < 3; phase++) {     /* world, then each sub-communicator alone */
            MPI_Comm comm = phase == 0 ? MPI_COMM_WORLD : sub;
            int mine = phase == 0 || color == (phase == 1), r, n;
            MPI_Comm_rank(comm, &r);
            MPI_Comm_size(comm, &n);
            for (int s = 0; s < 6; s++) {
                int cnt = (int)(sizes[s] / 8);
                for (int i = 0; i < cnt; i++) a[i] = r + i % 5 + it;
                sync_start(0);
                if (mine) MPI_Bcast(a, cnt, MPI_DOUBLE, 0, comm), check += a[cnt - 1];
                sync_start(0);
                if (mine) MPI_Allreduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, comm), check += b[cnt / 2];
                sync_start(0);
                if (mine) {
                    MPI_Reduce(a, b, cnt, MPI_DOUBLE, MPI_SUM, 0, comm);
                    if (r == 0) check += b[0];
                }
                sync_start(0);
                if (mine && s < 5)
                    MPI_Allgather(a, cnt, MPI_DOUBLE, b, cnt, MPI_DOUBLE, comm), check += b[(n - 1) * cnt];
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
    bench = Bench(__doc__, "online-synthetic", 6)
    args, say, lines = bench.args, bench.say, bench.lines
    platform = ompi_platform(BASE_PLATFORM, bench.work)
    env = {"COLLTUNE_ONLINE_BUDGET": str(args.budget)}
    src = os.path.join(bench.work, "synthetic.c")
    with open(src, "w") as fh:
        fh.write(APP.replace("/*SYNC_START*/", SYNC_START_C))
    prog = [src, str(PPN), str(ITER)]

    presets, _ = preset_arms(mpi.find("smpi"), CACHE, platform_name(platform))
    ref = checksum_lines(colltune_run(platform, "6x3", prog), r"^checksum .*")
    learn = os.path.join(bench.work, "learn")
    times = []
    for r in range(args.runs):
        out = colltune_run(platform, "6x3", prog, online=learn, env=env)
        assert checksum_lines(out, r"^checksum .*") == ref, "checksum changed under online mode"
        times.append(history.run_time(last_samples(learn)))
        print(f"  learning run {r + 1}: collective time {times[-1] * 1e3:.3f} ms", flush=True)
    final = measured_only(state.load(os.path.join(learn, "state.txt")))
    say(f"synthetic program, {platform_name(platform)}, learning at 6x3 ({args.runs} runs, budget {args.budget}, "
        f"{ITER} iterations): {len(final.blocks)} blocks; checksums unchanged in every run")
    say("collective time per run (ms): " + " ".join(f"{t * 1e3:.3f}" for t in times))

    offline, _ = bench_best(used_sizes(learn), presets, platform, bench.work_dir("bench6"))
    same, slow, rows = compare_choices(final, offline)
    say(f"final choices vs the offline benchmark's best (colltune bench, same layouts and sizes): "
        f"{same}/{len(rows)} blocks ({same / len(rows):.1%}); average slowdown {slow:.4f}")
    lines.extend(rows)
    ex = exhaustive(final, presets, os.path.join(bench.work, "ex6"), platform, "6x3", prog, env)
    same_app, slow_app, _ = compare_choices(final, ex["per_arm"])
    say(f"final choices vs the in-application exhaustive best (one run per arm, online cost): "
        f"{same_app}/{len(ex['per_arm'])} blocks; average slowdown {slow_app:.4f}")

    # prediction at the unseen layout 8x3
    prior_dir, uniform_dir = os.path.join(bench.work, "prior"), os.path.join(bench.work, "uniform")
    shutil.copytree(learn, prior_dir)
    subprocess.run([COLLTUNE, "online", "update", prior_dir, "--cache-dir", CACHE,
                    *[a for n, p in layouts(8) for a in ("--layout", f"{n}x{p}")]], check=True,
                   capture_output=True)
    colltune_run(platform, "8x3", prog, online=prior_dir, env=env)
    t_prior = history.run_time(last_samples(prior_dir))
    colltune_run(platform, "8x3", prog, online=uniform_dir, env=env)
    t_uniform = history.run_time(last_samples(uniform_dir))
    template = measured_only(state.load(os.path.join(uniform_dir, "state.txt")))
    bench8, _ = bench_best(used_sizes(uniform_dir), presets, platform, bench.work_dir("bench8"))
    best8 = {k: min(m, key=m.get) for k, m in bench8.items()}
    _, t_best, _ = run_fixed(fixed_state(template, lambda b: best8.get(b.key, "library")),
                             os.path.join(bench.work, "best8"), platform, "8x3", prog, env)
    say(f"prediction, first run at the unseen layout 8x3: with priors learnt at 6x3 "
        f"{t_prior * 1e3:.3f} ms ({t_prior / t_best:.3f}x the offline best), from uniform "
        f"{t_uniform * 1e3:.3f} ms ({t_uniform / t_best:.3f}x), offline best {t_best * 1e3:.3f} ms; "
        f"excess over the best, prior / uniform: {(t_prior - t_best) / (t_uniform - t_best):.3f}")
    bench.finish({"learning_coll_s": times, "same": same, "blocks": len(rows),
                  "avg_slowdown": slow, "same_in_app": same_app, "avg_slowdown_in_app": slow_app,
                  "t_prior_s": t_prior,
                  "t_uniform_s": t_uniform, "t_best_s": t_best,
                  "bench_6x3": {block_name(k): v for k, v in offline.items()},
                  "exhaustive_6x3": {block_name(k): v for k, v in ex["per_arm"].items()}}, learn)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
