"""Shared by benchmarks/online_miniamr.py and online_synthetic.py: launching an SMPI
program under `colltune run` (online or not), and the in-application exhaustive
search the online choices are measured against.

Exhaustive best, in the application: for every preset index k, one run whose state
lists one arm per block (the k-th preset of the block's collective, `library` when the
collective has fewer) — every call of every block runs that arm and is timed with the
same cost definition as online mode. A block's offline best is the arm with the lowest
mean over those runs; one more run with each block fixed to its best gives the best
collective time. The exhaustive campaign's cost is the sum of the K runs' collective
times. SimGrid is deterministic: the same blocks are called in every run.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

from colltune.online import history, state  # noqa: E402
from colltune.online.state import Arm, Block, State  # noqa: E402
from colltune.online.update import samples_files  # noqa: E402

CACHE = os.path.join(ROOT, ".colltune-cache")
COLLTUNE = os.path.join(ROOT, ".venv", "bin", "colltune")
# the `library` arm is SMPI's collective selector of the job; the benchmarks run SMPI's
# `ompi` selector (a platform copy whose smpi_config sets it), and bench it under that name
LIBRARY_SELECTOR = "ompi"

# C for the synthetic programs (online_synthetic.py, online_delayed.py): every call starts
# at one instant of SMPI's global clock, as in the benchmark the choices are compared with
# (its synchronised start): the latest clock of all ranks plus 50 us, agreed by
# PMPI_Allreduce (the profiling interface: not a call the interposer samples); a rank
# sleeps (SMPI's nanosleep: simulated time) until then, plus `extra` seconds. An
# MPI_Barrier alone lets ranks leave microseconds apart, which reorders arms of
# few-microsecond calls (miniAMR is the in-application case with its own skew).
SYNC_START_C = r"""
#include <time.h>
static void sync_start(double extra) {
    double now = MPI_Wtime(), t;
    PMPI_Allreduce(&now, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double dt = t + 50e-6 - MPI_Wtime() + extra;
    struct timespec ts = {(time_t)dt, (long)((dt - (time_t)dt) * 1e9)};
    if (dt > 0) nanosleep(&ts, NULL);
}
"""


def ompi_platform(name: str, work: str) -> str:
    """A copy of bundled platform `name` whose jobs run SMPI's `ompi` selector (smpirun's
    own default, `default`, is its naive one); returns the XML path."""
    import json
    from colltune.platforms import DATA_DIR
    xml = os.path.join(work, f"{name}-ompi.xml")
    shutil.copy(DATA_DIR / f"{name}.xml", xml)
    with open(DATA_DIR / f"{name}.json") as fh:
        side = json.load(fh)
    side["name"] = f"{name}-ompi"
    side["smpi_config"] = {**side.get("smpi_config", {}), "smpi/coll-selector": LIBRARY_SELECTOR}
    with open(xml[:-4] + ".json", "w") as fh:
        json.dump(side, fh, indent=1)
    return xml


def platform_name(platform: str) -> str:
    """COLLTUNE_PLATFORM as `colltune run --online` sets it."""
    from colltune.online.job import platform_id
    return platform_id(platform)


def colltune_run(platform: str, layout: str, program: list[str], online: str | None = None,
                 env: dict | None = None, quiet: bool = True) -> str:
    """stdout of `colltune run` (sim backend); raises with the tail of stderr on failure."""
    cmd = [COLLTUNE, "run", "--backend", "sim", "--platform", platform, "--layout", layout,
           "--cache-dir", CACHE, *(["--online", online] if online else []), "-q", "--", *program]
    full = {**os.environ, **(env or {})}
    full.setdefault("COLLTUNE_STORE", os.path.join(CACHE, "online-bench.sqlite"))   # not the user's
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if not quiet:
        sys.stderr.write(proc.stderr)
    return proc.stdout


def fixed_state(template: State, choose) -> State:
    """A state with the template's blocks, each listing the one arm choose(block) with p 1."""
    out = State(template.fingerprint)
    for b in template.blocks.values():
        out.add(Block(b.collective, b.nodes, b.ppn, b.cls, 0, "measured", [Arm(choose(b), 1.0)]))
    return out


def run_fixed(st: State, run_dir: str, platform: str, layout: str, program: list[str],
              env: dict | None = None) -> tuple[dict, float, str]:
    """An online run on a fixed state (a fresh state dir: `run --online` leaves the state as
    written before the run, the run's samples file is read): ({block key: (arm, mean
    cost)}, collective time, stdout)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    state.save(st, os.path.join(run_dir, "state.txt"))
    out = colltune_run(platform, layout, program, online=os.path.abspath(run_dir), env=env)
    runs = samples_files(run_dir)
    if len(runs) != 1:
        raise RuntimeError(f"{run_dir}: expected one samples file, found {len(runs)}")
    means = {}
    for b in runs[0].data["blocks"]:
        measured = [a for a in b["arms"] if a.get("n")]
        if measured:
            means[history.block_key(b)] = (measured[0]["arm"], measured[0]["mean"])
    return means, history.run_time(runs[0]), out


def exhaustive(template: State, presets: dict, work: str, platform: str, layout: str,
               program: list[str], env: dict | None = None) -> dict:
    """{"per_arm": {block: {arm: mean}}, "best": {block: arm}, "cost_s": sum of the runs'
    collective times, "runs": [...]} from one run per preset index."""
    k_max = max(len(v) for v in presets.values())
    per_arm: dict = {}
    cost, runs = 0.0, []
    for k in range(k_max):
        def choose(b, k=k):
            arms = presets.get(b.collective) or ["library"]
            return arms[k] if k < len(arms) else "library"
        means, t, _ = run_fixed(fixed_state(template, choose), os.path.join(work, f"arm{k}"),
                                platform, layout, program, env)
        cost += t
        runs.append({"k": k, "coll_time_s": t})
        for key, (arm, mean) in means.items():
            per_arm.setdefault(key, {})[arm] = mean
        print(f"  exhaustive run {k + 1}/{k_max}: collective time {t * 1e3:.3f} ms", flush=True)
    best = {key: min(m, key=m.get) for key, m in per_arm.items()}
    return {"per_arm": per_arm, "best": best, "cost_s": cost, "runs": runs}


class Bench:
    """Command line (--runs, --work, --budget), a fresh work folder, the results folder
    (results/<name>/budget<B>/), and a log printed as it goes and written to
    summary.log there at the end."""

    def __init__(self, doc: str, name: str, runs: int, budget: int = 24):
        import argparse
        import time
        ap = argparse.ArgumentParser(description=doc.split("\n")[0])
        ap.add_argument("--runs", type=int, default=runs)
        ap.add_argument("--work", default=os.path.join(CACHE, f"{name}-work"))
        ap.add_argument("--budget", type=int, default=budget,
                        help="COLLTUNE_ONLINE_BUDGET: timed calls per (communicator, block) and run")
        self.args = ap.parse_args()
        self.work = self.args.work
        self.out = os.path.join(HERE, "results", name.replace("-", "_"), f"budget{self.args.budget}")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        os.makedirs(self.out, exist_ok=True)
        self.lines: list[str] = []
        self.t0 = time.time()

    def work_dir(self, name: str) -> str:
        path = os.path.join(self.work, name)
        os.makedirs(path, exist_ok=True)
        return path

    def say(self, s: str = "") -> None:
        print(s, flush=True)
        self.lines.append(s)

    def finish(self, data: dict, state_dir: str) -> None:
        import json
        import time
        self.say(f"wall time {time.time() - self.t0:.0f} s")
        with open(os.path.join(self.out, "summary.log"), "w") as fh:
            fh.write("\n".join(self.lines) + "\n")
        with open(os.path.join(self.out, "results.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        shutil.copy(os.path.join(state_dir, "state.txt"), os.path.join(self.out, "state.txt"))


def used_sizes(state_dir: str) -> dict:
    """{block key: {bytes: calls}} of the timed calls in every samples file of a state dir."""
    out: dict = {}
    for s in samples_files(state_dir):
        for coll, nodes, ppn, _size, nbytes, _arm, _cost, *_ in s.data.get("records", []):
            key = (coll, nodes, ppn, state.class_of(nbytes))
            out.setdefault(key, {}).setdefault(nbytes, 0)
            out[key][nbytes] += 1
    return out


def bench_best(sizes: dict, presets: dict, platform: str, work: str, scenario: tuple = ()) -> dict:
    """The offline benchmark (`colltune bench --provider colltune`, synchronised start, median
    of repetitions) of every preset arm at the layouts and sizes the blocks used; `library`
    is the job's SMPI selector (LIBRARY_SELECTOR); scenario: more `bench` arguments (e.g. the
    delayed scenario's). {block key: {arm: seconds per call, weighted by the calls at each
    size}}, and the campaign's simulated cost (tuners/active.point_cost)."""
    from colltune.online.arms import arm_label
    from colltune.results import Results
    from colltune.store import Store
    db = os.path.join(work, "bench.sqlite")
    label = {}
    for coll in sorted({k[0] for k in sizes}):
        arms = presets[coll]
        label.update({(coll, LIBRARY_SELECTOR if a == "library" else arm_label(a)): a for a in arms})
        blocks = [k for k in sizes if k[0] == coll]
        cmd = [COLLTUNE, "bench", "--backend", "sim", "--platform", platform, "--provider", "colltune",
               "--coll", coll, "--algorithms", ",".join(LIBRARY_SELECTOR if a == "library" else arm_label(a)
                                                        for a in arms),
               "--layouts", ",".join(sorted({f"{k[1]}x{k[2]}" for k in blocks})),
               "--sizes", ",".join(str(b) for b in sorted({b for k in blocks for b in sizes[k]})),
               "--campaign", "offline", "--store", db, "--cache-dir", CACHE, "-q", *scenario]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        print(f"  offline bench of {coll}: {len(arms)} arms at {len(blocks)} blocks", flush=True)
    from colltune.tuners.active import point_cost
    with Store(db) as store:
        pts = Results.from_store(store, "offline").ok().points
        cost = sum(point_cost(r) for r in store.query_points("offline"))
    t = {(r.collective, int(r.nodes), int(r.ppn), int(r.msg_size), r.algorithm): float(r.ttc_median_s)
         for r in pts.itertuples()}
    out: dict = {}
    for key, by_size in sizes.items():
        calls = sum(by_size.values())
        for (coll, lab), arm in label.items():
            if coll != key[0]:
                continue
            ts = [t.get((coll, key[1], key[2], b, lab)) for b in by_size]
            if all(x is not None for x in ts):
                out.setdefault(key, {})[arm] = sum(x * c for x, c in zip(ts, by_size.values())) / calls
    return out, cost


def compare_choices(final: State, per_arm: dict) -> tuple[int, float, list[str]]:
    """(blocks whose final choice is the best of per_arm, average slowdown of the choices,
    one line per block)."""
    same, slow, rows = 0, [], []
    for key, m in sorted(per_arm.items()):
        if key not in final.blocks or not m:
            continue
        best, choice = min(m, key=m.get), final.blocks[key].best().arm
        if choice not in m:
            continue
        same += choice == best
        slow.append(m[choice] / m[best])
        rows.append(f"  {block_name(key):34s} online {choice:26s} offline {best:26s} {slow[-1]:.3f}")
    return same, (sum(slow) / len(slow) if slow else float("nan")), rows


def library_index(presets: dict) -> int:
    """The preset index of `library` (the same in every collective's list)."""
    ks = {arms.index("library") for arms in presets.values()}
    if len(ks) != 1:
        raise RuntimeError(f"`library` is not at one index of every preset list: {presets}")
    return ks.pop()


def measured_only(st: State) -> State:
    """The state's measured blocks (priors left out)."""
    out = State(st.fingerprint)
    for b in st.blocks.values():
        if b.source == "measured":
            out.add(b)
    return out


def last_samples(state_dir: str):
    return samples_files(state_dir)[-1]


def block_name(key: tuple) -> str:
    return f"{key[0]} {key[1]}x{key[2]} b{state.class_text(key[3])}"


def checksum_lines(stdout: str, pattern: str) -> list[str]:
    return re.findall(pattern, stdout, re.M)
