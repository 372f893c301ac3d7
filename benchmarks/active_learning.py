#!/usr/bin/env python3
"""Active learning (ACCLAiM) against exhaustive ground truth and random sampling.

    .venv/bin/python benchmarks/active_learning.py [--collectives bcast] [--placement-only]

1. Ground truth: the exhaustive tuner on the `small` platform, nodes 1..8 x ppn 1..4,
   every power of two from 8 B to 64 KiB plus six non-power-of-two test sizes, all
   algorithms (campaign gt-small-<collective> in the store: measured once, resumable).
2. Test sets the learners never train on: a seeded 20 % of the power-of-two grid is
   held out of the candidate space; the six non-power-of-two sizes are never
   candidates (a random training size that hits one is dropped from the test set).
3. The active learner (variance selection) and the random-sampling baseline (same
   forest, same rule generation, uniform selection) run past convergence; after each
   iteration their decision tables are scored. Training cost = simulated benchmark
   seconds of the points they measured (from the records), as a fraction of what
   exhaustive search of the power-of-two grid costs.
4. Parallel collection on fattree64x12 and dragonfly: makespan of the simulated
   benchmark seconds scheduled on disjoint groups vs sequential, and the check that
   no two concurrent launches (really run, and scheduled) shared a group.
SimGrid timings are deterministic: every number here is reproducible bit for bit.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import sys
import time

from colltune.campaign import Campaign
from colltune.placement import shared_groups
from colltune.results import Results
from colltune.session import Session
from colltune.tuners import TuningSpace
from colltune.tuners.active import ActiveLearner, point_cost, tune_active
from colltune.tuners.active_eval import ground_truth, score
from colltune.tuners.exhaustive import ExhaustiveTuner

POW2 = [1 << e for e in range(3, 17)]                 # 8 B .. 64 KiB
TEST_SIZES = [12, 100, 700, 3000, 12000, 45000]
LAYOUTS = [(n, p) for n in range(1, 9) for p in range(1, 5)]


def measure_truth(session, store, coll: str, quiet: bool):
    backend = session.backend()
    provider = backend.provider()
    space = TuningSpace((coll,), tuple(LAYOUTS), tuple(POW2 + TEST_SIZES))
    tuner = ExhaustiveTuner(provider, space, ["ompi"])
    Campaign(f"gt-small-{coll}", backend, store, session.settings, not quiet).run(tuner.plan())
    res = Results.from_store(store, f"gt-small-{coll}")
    return ground_truth(res, coll), res


def tables_of(learner, coll):
    """The learner's table now (its active_rules setting) and, on the same model,
    ACCLAiM's single-midpoint rules' ("midpoint_"), scored once every run is over
    (score_curves)."""
    from colltune.decision import DecisionTable
    from colltune.tuners.active import model_entries
    st = learner.states[coll]
    out = {"": DecisionTable("active", {}, tuple(learner.entries(coll)))}
    if st.model.forest is not None and learner.settings.active_rules != "midpoint":
        out["midpoint_"] = DecisionTable("active", {}, tuple(model_entries(
            st.model, coll, st.grid, learner.layouts, st.measured, st.algorithms[0].provider, "midpoint")))
    return out


def common_tests(tests, trained):
    """The test sets less every point any of the compared learners trained on (a
    learner's random non-power-of-two size can hit a test size): every learner is
    scored on the same points. The sets used to be cut after each learner's run, so
    the active learner and the random ones were scored on different sets."""
    return {k: [p for p in v if p not in trained] for k, v in tests.items()}


def score_curves(curves, coll, truth, tests):
    """Scores every recorded table ("tables", removed) of every curve on `tests`, into
    test_<set> / test_midpoint_<set>."""
    for curve in curves:
        for c in curve:
            for prefix, table in c.pop("tables").items():
                c.update({f"test_{prefix}{k}": score(table, coll, truth, pts) for k, pts in tests.items()})


def run_learner(session, store, coll, truth, tests, candidates, select, seed, max_points):
    s = session.settings.values
    s["active_seed"], s["active_max_points"] = seed, max_points
    camp = Campaign(f"active-eval-{select}-{seed}-{coll}", session.backend(), store, session.settings, False)
    curve = []

    def on_iteration(learner, rec):
        curve.append({**rec, "tables": tables_of(learner, coll)})

    learner = ActiveLearner(camp, session.backend().provider(), [coll], LAYOUTS, POW2,
                            candidates={coll: candidates}, select=select, on_iteration=on_iteration,
                            keep_going=True, budget_s=1e9)
    out = learner.run()
    return learner, out, curve


def first_at_or_below(curve, key, level):
    """Index of the first iteration from which the slowdown stays <= level."""
    for i in range(len(curve)):
        if all(c[key]["avg_slowdown"] <= level for c in curve[i:]):
            return i
    return None


def fmt(sc):
    return (f"{sc['avg_slowdown']:.4f} opt {sc['optimal_share']:5.1%} worst {sc['worst_slowdown']:.3f}"
            + (f" failed {sc['failed_picks']}" if sc["failed_picks"] else ""))


def split() -> tuple[list, dict]:
    """The candidate points and the held-out test sets (seeded: every script
    scores on the same split): a fifth of the power-of-two grid, split into
    power-of-two and other node counts, and TEST_SIZES at every layout."""
    rng = random.Random(7)
    grid = [(n, p, m) for n, p in LAYOUTS for m in POW2]
    held = set(rng.sample(grid, len(grid) // 5))
    candidates = [g for g in grid if g not in held]
    tests = {"pow2": sorted(p for p in held if p[0] & (p[0] - 1) == 0),
             "pow2_sizes_nonpow2_nodes": sorted(p for p in held if p[0] & (p[0] - 1)),
             "nonpow2_sizes": [(n, p, m) for n, p in LAYOUTS for m in TEST_SIZES]}
    return candidates, tests


def learning(a, session, store, coll, report):
    truth, gt_results = measure_truth(session, store, coll, a.quiet)
    candidates, tests = split()
    exhaustive_s = sum(point_cost(r) for r in gt_results.algorithms().points.to_dict("records")
                       if int(r["msg_size"]) in POW2)
    runs = {}
    for select, seed in [("variance", 1)] + [("random", s) for s in range(1, a.random_seeds + 1)]:
        t0 = time.monotonic()
        learner, out, curve = run_learner(session, store, coll, truth, tests, candidates, select,
                                          seed, a.max_points)
        runs[(select, seed)] = (learner, out, curve, time.monotonic() - t0)
    tests = common_tests(tests, {p for r in runs.values() for p in r[0].states[coll].measured})
    score_curves([r[2] for r in runs.values()], coll, truth, tests)
    print(f"\n=== {coll}: small platform, {len(LAYOUTS)} layouts x {len(POW2)} power-of-two sizes; "
          f"{len(candidates)} candidate points, test sets: "
          + ", ".join(f"{k} {len(v)}" for k, v in tests.items()))
    exhaustive_launches = len(ExhaustiveTuner(session.backend().provider(),
                                              TuningSpace((coll,), tuple(LAYOUTS), tuple(POW2)), []).plan())
    print(f"exhaustive (power-of-two grid, all algorithms): {exhaustive_s * 1e3:.2f} ms simulated benchmark time, "
          f"{exhaustive_launches} launches (one per algorithm and layout, every size in it; more where a "
          f"crash relaunches the rest)")
    pow2_table = ExhaustiveTuner(session.backend().provider(), TuningSpace((coll,), tuple(LAYOUTS), tuple(POW2)), []).decide(
        gt_results.filter(msg_size=POW2), {})
    print("reference, the exhaustive table of every power-of-two point on the same test sets: "
          + "; ".join(f"{k} {fmt(score(pow2_table, coll, truth, v))}" for k, v in tests.items()))
    learner, out, curve, wall = runs[("variance", 1)]
    conv = learner.states[coll].converged_at
    at = curve[conv - 1] if conv else curve[-1]
    print(f"\nactive learner: converged at iteration {conv} ({at['points']} points, "
          f"cost {at['cost_s'] / exhaustive_s:.1%} of exhaustive's simulated benchmark seconds, "
          f"{at['launch_specs']} launches asked for against exhaustive's {exhaustive_launches}), ran to "
          f"{curve[-1]['points']} points ({curve[-1]['launch_specs']} launches asked for) in {wall:.0f} s wall "
          f"(reading the stored ground truth: not the wall time of a fresh run, benchmarks/active_cost.py)")
    print(f"{'':<28}{'at convergence':<52}{'at the end':<52}")
    for k in tests:
        print(f"  {k:<26}{fmt(at['test_' + k]):<52}{fmt(curve[-1]['test_' + k]):<52}")
    if "test_midpoint_pow2" in at:
        print(f"same models, ACCLAiM's single-midpoint rules (active_rules = midpoint; the table above: "
              f"{session.settings.active_rules}):")
        for k in tests:
            print(f"  {k:<26}{fmt(at['test_midpoint_' + k]):<52}{fmt(curve[-1]['test_midpoint_' + k]):<52}")
    lvl = first_at_or_below(curve, "test_pow2", 1.03)
    print(f"convergence ({session.settings.active_stop}) at iteration {conv}; pow2 test slowdown stays <= 1.03 from iteration "
          f"{lvl + 1 if lvl is not None else 'never'} -> the rule stops "
          + ("n/a" if conv is None or lvl is None else "after" if conv > lvl + 1 else
             "at the same time" if conv == lvl + 1 else "before") + " the slowdown reaches 1.03")
    print("\nlearning curve (cost = fraction of exhaustive benchmark seconds; slowdown on the pow2 / "
          "non-pow2-size test sets):")
    print(f"{'iter':>4} {'pts':>4} {'cost':>7} {'variance sum':>13} {'active pow2':>11} {'nonpow2':>8} | "
          + " ".join(f"{'random' + str(s) + ' cost':>12} {'pow2':>6}" for s in range(1, a.random_seeds + 1)))
    for i, c in enumerate(curve):
        cells = []
        for s in range(1, a.random_seeds + 1):
            rc = runs[("random", s)][2]
            r = rc[min(i, len(rc) - 1)]
            cells.append(f"{r['cost_s'] / exhaustive_s:>12.1%} {r['test_pow2']['avg_slowdown']:>6.3f}")
        print(f"{c['iteration']:>4} {c['points']:>4} {c['cost_s'] / exhaustive_s:>7.1%} {c['variance_sum']:>13.4f} "
              f"{c['test_pow2']['avg_slowdown']:>11.4f} {c['test_nonpow2_sizes']['avg_slowdown']:>8.4f} | "
              + " ".join(cells) + ("  <- converged" if c["iteration"] == conv else ""))
    report[coll] = {"exhaustive_s": exhaustive_s, "exhaustive_launches": exhaustive_launches,
                    "converged_at": conv, "test_sets": {k: len(v) for k, v in tests.items()},
                    "curves": {f"{k[0]}-{k[1]}": [{x: y for x, y in c.items() if x != "new_points"}
                                                  for c in v[2]] for k, v in runs.items()}}


def placement(a, platform, layouts, report):
    # a fresh store: every launch really runs (and is checked for shared groups)
    store_path = os.path.join(tempfile.mkdtemp(prefix="colltune-placement-"), "s.sqlite")
    session = Session({"platform": platform, "store": store_path, "jobs": 2, "min_reps": 2,
                       "active_batch": 4, "active_max_points": 12, "active_initial_points": 4})
    backend = session.backend()
    with session.store as store:
        out = tune_active(backend, store, session.settings, ["bcast"], layouts, [8, 64, 512, 4096],
                          campaign=f"placement-{platform}")
    groups = backend.host_groups()
    bad_real, bad_sched = shared_groups(out.real_holds), shared_groups(out.schedule)
    speed = out.sequential_s / out.makespan_s if out.makespan_s else math.nan
    multi = sum(len(h.groups) > 1 for h in out.schedule)
    print(f"{platform:<13} {len(groups):>6} {len(out.schedule):>8} {multi:>11} {out.sequential_s * 1e3:>13.3f} "
          f"{out.makespan_s * 1e3:>12.3f} {speed:>8.2f}x {len(out.real_holds):>9} "
          f"{len(bad_real) + len(bad_sched):>7}")
    report[f"placement-{platform}"] = {"sequential_s": out.sequential_s, "makespan_s": out.makespan_s,
                                       "launches": len(out.schedule), "shared": len(bad_real) + len(bad_sched)}
    return not bad_real and not bad_sched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="bcast")
    ap.add_argument("--store", default="benchmarks/results/active/active-eval.sqlite")
    ap.add_argument("--max-points", type=int, default=160, help="points per learner run")
    ap.add_argument("--random-seeds", type=int, default=2)
    ap.add_argument("--json", default="benchmarks/results/active/active-eval.json")
    ap.add_argument("--html", default="benchmarks/results/active/active-eval.html")
    ap.add_argument("--placement-only", action="store_true")
    ap.add_argument("--no-placement", action="store_true")
    ap.add_argument("--jobs", type=int, default=2, help="launches run concurrently")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args()
    report: dict = {}
    if not a.placement_only:
        session = Session({"platform": "small", "store": a.store, "jobs": a.jobs, "active_batch": 4})
        with session.store as store:
            for coll in a.collectives.split(","):
                learning(a, session, store, coll, report)
    ok = True
    if a.no_placement:
        return finish(a, report, ok)
    print("\nparallel collection (simulated benchmark seconds; SMPI simulates each launch alone, "
          "so the makespan is the greedy schedule of measured durations on disjoint groups):")
    print(f"{'platform':<13} {'groups':>6} {'launches':>8} {'multi-group':>11} {'sequential ms':>13} "
          f"{'makespan ms':>12} {'speedup':>9} {'real runs':>9} {'shared':>7}")
    ok = placement(a, "fattree64x12", [(n, 2) for n in (2, 3, 8, 16, 24)], report)
    ok &= placement(a, "dragonfly", [(n, 2) for n in (2, 3, 8, 16)], report)
    return finish(a, report, ok)


def finish(a, report, ok) -> int:
    with open(a.json, "w") as fh:
        json.dump(report, fh, indent=1, default=str)
    if not a.placement_only:
        from colltune.report.active import render_evaluation
        print(f"\nHTML: {render_evaluation(report, a.html)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
