#!/usr/bin/env python3
"""Active learner variants (model, stopping rule) on the evaluation of
benchmarks/active_learning.py, and the choice of the model without test data.

    PYTHONPATH=src .venv/bin/python -u benchmarks/active_models.py --collectives bcast,allreduce \
        --variants active_model=forest,active_model=extratrees

For every variant (comma-separated; each a '+'-joined list of setting=value) and
collective: the variance learner runs exactly as in benchmarks/active_learning.py
(seed 1, the same held-out split, past convergence to --max-points), and its table
at convergence and at the end is scored on the three test sets.

Model choice without test points (--cv): k-fold cross-validation *by point* on the
learner's own training data. The points the learner measured are split into k
folds; a model fitted on the other folds picks an algorithm at every point of the
held-out fold, and its slowdown there is measured from the training data itself
(t(pick) / t(best measured at that point)). The mean over all training points is
the CV slowdown: the decision quality the model would have on points like those it
was given, with no test point involved. Every model kind is cross-validated on every
variant's training data (at convergence and at the end).
SimGrid timings are deterministic: every number here is reproducible bit for bit.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import time

import numpy as np

from colltune.campaign import Campaign
from colltune.decision import DecisionTable
from colltune.session import Session
from colltune.tuners.active import ActiveLearner
from colltune.tuners.active_eval import score
from colltune.tuners.active_model import FEATURE_SETS, MODELS, CollectiveModel

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("active_learning", os.path.join(HERE, "active_learning.py"))
AL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AL)


# model configurations compared by cross-validation (features, regressor, per algorithm)
CV_MODELS = [(f, k, False) for f in FEATURE_SETS for k in MODELS]


def cv_slowdown(measured, labels, kind, trees, seed, folds, per_algorithm=False, features="acclaim"):
    """Mean slowdown of the model's pick at held-out training points (k folds by
    point), from the training data's own times; and the number of failed picks."""
    pts = sorted(measured)
    order = random.Random(seed).sample(pts, len(pts))
    slow, failed = [], 0
    for f in range(folds):
        held = order[f::folds]
        if not held:
            continue
        train = {p: measured[p] for p in pts if p not in set(held)}
        model = CollectiveModel(labels, trees, seed, kind, per_algorithm, features)
        try:
            model.fit(train)
        except ValueError:
            continue
        for p, pick in zip(held, model.best(np.array(held))):
            ok = {a: t for a, t in measured[p].items() if t}
            if not ok:
                continue
            if not measured[p].get(pick):
                failed += 1
                continue
            slow.append(measured[p][pick] / min(ok.values()))
    return (sum(slow) / len(slow) if slow else float("nan")), failed


def quick_score(model, coll, truth, tests, measured):
    """Average slowdown of the model's own choice at the test points (what the
    bisected table gives at every size: tests/test_active.py checks it), and its
    failed picks: as score() does, a pick that failed (or was never measured) at a
    point has no time and is counted apart, never silently dropped (a model picking
    failing algorithms would otherwise look better). {set: (average, failed)}."""
    out = {}
    for k, pts in tests.items():
        pts = [p for p in pts if p not in measured and p[0] * p[1] > 1]
        slow, failed = [], 0
        for p, pick in zip(pts, model.best(np.array(pts))):
            ok = [t for t in truth[p].values() if t]
            if not ok:
                continue
            if truth[p].get(pick):
                slow.append(truth[p][pick] / min(ok))
            else:
                failed += 1
        out[k] = (sum(slow) / len(slow) if slow else float("nan"), failed)
    return out


def fmt_quick(q):
    """'1.0123 / 1.0045 f2 / ...': the average, and the failed picks where there are any."""
    return " / ".join(f"{v:.4f}" + (f" f{f}" if f else "") for v, f in q.values())


def stop_at(curve, rule, threshold, patience, min_points=16):
    """Iteration index at which a stopping rule first holds, replayed on the curve
    (the learner's trajectory does not depend on its stopping rule: keep_going)."""
    calm = 0
    for i, c in enumerate(curve):
        if rule == "variance":
            if i and curve[i - 1]["variance_sum"] > 0:
                calm = calm + 1 if c["rel_change"] < threshold else 0
        elif c["table_change"] is not None:
            calm = calm + 1 if c["table_change"] < threshold else 0
        if calm >= patience and c["points"] >= min_points:
            return i
    return None


def run(session, store, coll, variant, max_points, candidates, truth=None, tests=None):
    s = session.settings.values
    s["active_seed"], s["active_max_points"] = 1, max_points
    for k, v in variant.items():
        s[k] = type(s[k])(v) if not isinstance(s[k], bool) else v in ("1", "true")
    snaps = []

    def keep(learner, rec):
        st = learner.states[coll]
        snaps.append({"iteration": rec["iteration"], "points": rec["points"], "cost_s": rec["cost_s"],
                      "variance_sum": rec["variance_sum"], "rel_change": rec["rel_change"],
                      "table_change": rec["table_change"],
                      "quick": quick_score(st.model, coll, truth, tests, st.measured),
                      "measured": {k: dict(v) for k, v in st.measured.items()},
                      "untrusted": sorted(st.model.untrusted)})

    camp = Campaign(f"active-eval-variance-1-{coll}", session.backend(), store, session.settings, False)
    learner = ActiveLearner(camp, session.backend().provider(), [coll], AL.LAYOUTS, AL.POW2,
                            candidates={coll: candidates}, on_iteration=keep, keep_going=True, budget_s=1e9)
    t0 = time.monotonic()
    learner.run()
    return learner, snaps, time.monotonic() - t0


def model_at(learner, coll, snap):
    """The learner's model at a snapshot (refitted with its own settings on the data
    it had then: the forest the learner had at that iteration), with the algorithms
    it had stopped trusting by then (active_exclude_wrong: wrong data seen)."""
    st, s = learner.states[coll], learner.settings
    model = CollectiveModel(st.model.algorithms, s.active_trees, s.active_seed, s.active_model,
                            s.active_per_algorithm, s.active_features)
    model.fit(snap["measured"])
    model.untrusted = set(snap["untrusted"])
    return model


def table_of(learner, coll, snap):
    """The learner's table at a snapshot (model_at)."""
    from colltune.tuners.active import model_entries
    st, s = learner.states[coll], learner.settings
    return DecisionTable("active", {}, tuple(model_entries(model_at(learner, coll, snap), coll, st.grid,
                                                           AL.LAYOUTS, snap["measured"],
                                                           st.algorithms[0].provider, s.active_rules)))


def pooled_slowdown(model, measured, pool):
    """Mean slowdown of the model's picks at the pooled training points of other
    runs that this run did not measure, from those runs' own measurements; the
    number of points with a time, and the failed picks (counted apart, as score()
    does)."""
    pts = [p for p in sorted(pool) if p not in measured]
    slow, failed = [], 0
    for p, pick in zip(pts, model.best(np.array(pts))):
        ok = {a: t for a, t in pool[p].items() if t}
        if not ok:
            continue
        if pool[p].get(pick):
            slow.append(pool[p][pick] / min(ok.values()))
        else:
            failed += 1
    return (sum(slow) / len(slow) if slow else float("nan")), len(slow), failed


def cross(coll, runs, at_points):
    """Every variant's model, at equal training points, scored on the points the
    other variants measured (their union, less its own): no test point involved."""
    pool = {}
    for _, _, snaps in runs:
        pool.update(snaps[-1]["measured"])
    print(f"\n--- {coll}: each variant's model at equal points, on the {len(pool)} points any variant "
          "measured (less its own), slowdown from those measurements")
    for name, learner, snaps in runs:
        cells = []
        for k in at_points:
            snap = next((c for c in snaps if c["points"] >= k), snaps[-1])
            v, n, failed = pooled_slowdown(model_at(learner, coll, snap), snap["measured"], pool)
            cells.append(f"{snap['points']:>4} pts {v:.4f} ({n}{f', {failed} failed' if failed else ''})")
        print(f"  {name:<70} " + "  ".join(cells))


def capacity(session, store, coll):
    """Diagnosis (uses the test sets): every model configuration fitted on *all*
    candidate points (the 80 % of the power-of-two grid not held out), scored on the
    test sets: what the model could do with every point measured."""
    candidates, tests = AL.split()
    truth, _ = AL.measure_truth(session, store, coll, True)
    labels = sorted({a for v in truth.values() for a in v})
    train = {p: truth[p] for p in candidates if p[0] * p[1] > 1}
    print(f"\n--- {coll}: models fitted on all {len(train)} candidate points (diagnosis on the test sets)")
    for feats in FEATURE_SETS:
        for kind in MODELS:
            for per in (False, True):
                m = CollectiveModel(labels, 64, 1, kind, per, feats)
                m.fit(train)
                q = quick_score(m, coll, truth, tests, {})
                print(f"  features {feats:<8} {kind:<11}{' per algorithm' if per else '':<14} "
                      + "  ".join(f"{k} {v:.4f}" + (f" failed {f}" if f else "") for k, (v, f) in q.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--variants", default="active_model=forest,active_model=extratrees")
    ap.add_argument("--store", default="benchmarks/results/active/active-eval.sqlite")
    ap.add_argument("--max-points", type=int, default=120)
    ap.add_argument("--cv", action="store_true", help="cross-validate every model kind on the training data")
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--cross", default="", help="points (comma-separated) at which every variant's model "
                    "is scored on the other variants' training points")
    ap.add_argument("--capacity", action="store_true", help="only the all-candidates diagnosis")
    a = ap.parse_args()
    if a.capacity:
        session = Session({"platform": "small", "store": a.store, "jobs": a.jobs})
        with session.store as store:
            for coll in a.collectives.split(","):
                capacity(session, store, coll)
        return 0
    variants = [dict(kv.split("=", 1) for kv in v.split("+")) for v in a.variants.split(",")]
    candidates, tests0 = AL.split()
    for coll in a.collectives.split(","):
        runs, done = [], []
        for variant in variants:
            session = Session({"platform": "small", "store": a.store, "jobs": a.jobs, "active_batch": 4})
            with session.store as store:
                truth, gt = AL.measure_truth(session, store, coll, True)
                learner, snaps, wall = run(session, store, coll, variant, a.max_points, candidates,
                                           truth, tests0)
            done.append((variant, learner, snaps, wall))
        # every variant's tables are scored on the same sets: less every point any
        # variant trained on (a random non-pow2 training size can hit a test size)
        tests = AL.common_tests(tests0, {p for _, lr, _, _ in done for p in lr.states[coll].measured})
        exhaustive_s = sum(AL.point_cost(r) for r in gt.algorithms().points.to_dict("records")
                           if int(r["msg_size"]) in AL.POW2)
        print(f"\n{coll}: tables scored on " + ", ".join(f"{k} {len(v)}" for k, v in tests.items())
              + " test points (the learning curves' quick scores: less each run's own training points)")
        for variant, learner, snaps, wall in done:
            st = learner.states[coll]
            conv = st.converged_at
            name = "+".join(f"{k}={v}" for k, v in variant.items())
            runs.append((name, learner, snaps))
            print(f"\n=== {coll}, {name}: converged at iteration {conv}, {wall:.0f} s wall")
            print(f"  {'iter':>4} {'pts':>4} {'cost':>6} {'var sum':>8} {'rel':>6} {'change':>7}  pow2   np2nodes np2sizes")
            for c in snaps:
                q = c["quick"]
                print(f"  {c['iteration']:>4} {c['points']:>4} {c['cost_s'] / exhaustive_s:>6.1%} "
                      f"{c['variance_sum']:>8.3f} {c['rel_change'] or 0:>6.3f} {c['table_change'] or 0:>7.4f}  "
                      + fmt_quick(q))
            for rule, th in (("variance", 0.05), ("stable", 0.01), ("stable", 0.005), ("stable", 0.002),
                             ("stable", 0.001)):
                i = stop_at(snaps, rule, th, learner.settings.active_patience)
                q = snaps[i]["quick"] if i is not None else None
                print(f"  stop {rule} {th}: " + ("never" if i is None else
                      f"iteration {i + 1}, {snaps[i]['points']} pts, cost {snaps[i]['cost_s'] / exhaustive_s:.1%}: "
                      + fmt_quick(q)))
            for label, snap in (("at convergence", snaps[conv - 1] if conv else None), ("at the end", snaps[-1])):
                if snap is None:
                    print(f"  {label:<15} (never)")
                    continue
                table = table_of(learner, coll, snap)
                sc = {k: score(table, coll, truth, v) for k, v in tests.items()}
                print(f"  {label:<15} {snap['points']:>4} pts cost {snap['cost_s'] / exhaustive_s:6.1%}  "
                      + "  ".join(f"{k} {v['avg_slowdown']:.4f}"
                                  + (f" failed {v['failed_picks']}" if v["failed_picks"] else "")
                                  for k, v in sc.items()))
                if a.cv:
                    for feats, kind, per in CV_MODELS:
                        cv, failed = cv_slowdown(snap["measured"], st.model.algorithms, kind,
                                                 learner.settings.active_trees, 1, a.folds, per, feats)
                        print(f"  {'':<15} {a.folds}-fold CV on its training data: features {feats:<8} "
                              f"{kind:<11}{' per algorithm' if per else '':<14} {cv:.4f}"
                              + (f" failed {failed}" if failed else ""))
            sys.stdout.flush()
        if a.cross:
            cross(coll, runs, [int(k) for k in a.cross.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
