#!/usr/bin/env python3
"""Where the active learner loses on non-power-of-two message sizes.

    PYTHONPATH=src .venv/bin/python benchmarks/active_nonpow2.py --collectives bcast,allreduce

Needs the ground truth of benchmarks/active_learning.py in the store (campaigns
gt-small-<collective>; the same command measures it if missing). Runs the variance
learner exactly as that benchmark does (seed 1, 120 points, the same held-out
split), keeps the training data it had at convergence and at the end, and then
lists, for every non-power-of-two test point (sizes 12 ... 45000 B at every layout):

- the algorithm the learner's table picks there and its measured slowdown;
- the measured best there, and the measured best at the powers of two A < m < C;
- what the learner's table picks at A and at C (its error there is a *layout*
  error, not a non-power-of-two one);
- the class of the loss:
    layout     the table's pick at A or C is not the measured best there, and the
               pick at m is one of those wrong picks;
    interval   the table is right at A and C but picks the wrong one of the two (or a
               third algorithm) in between: rule generation / break placement;
    unseen     the best at m is neither A's nor C's best and the table picks one of
               those: no power-of-two data can show it (the reference exhaustive
               power-of-two table has the same loss there);
- the summed excess slowdown (sum of slowdown - 1) per class, per size and per
  layout kind (power-of-two / non-power-of-two node count).

The learner's training data is written to --replay (a pickle), so rule-generation
variants can be compared on exactly the same models without re-running it.
SimGrid timings are deterministic: every number is reproducible bit for bit.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import sys
from collections import defaultdict

from colltune.decision import DecisionTable
from colltune.session import Session
from colltune.tuners import TuningSpace
from colltune.tuners.active_eval import score
from colltune.tuners.exhaustive import ExhaustiveTuner

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("active_learning", os.path.join(HERE, "active_learning.py"))
AL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AL)


def best_of(times):
    ok = {a: t for a, t in times.items() if t is not None}
    if not ok or min(ok.values()) <= 0:
        return None, None
    a = min(ok, key=ok.get)
    return a, ok[a]


def around(m):
    a = 1 << (m.bit_length() - 1)
    return a, 2 * a


def classify(table, coll, truth, pts):
    rows = []
    for n, p, m in pts:
        times = truth[(n, p, m)]
        best, tb = best_of(times)
        if best is None:
            continue
        pick = table.lookup(coll, n, p, m).algorithm
        t = times.get(pick)
        a, c = around(m)
        ba, _ = best_of(truth.get((n, p, a), {}))
        bc, _ = best_of(truth.get((n, p, c), {})) if (n, p, c) in truth else (None, None)
        pa = table.lookup(coll, n, p, a).algorithm
        pc = table.lookup(coll, n, p, c).algorithm
        slow = None if t is None else t / tb
        # ties are real on SMPI: an algorithm is "a best" when it is within 1e-9
        okA = truth.get((n, p, a), {}).get(pa) is not None and ba is not None and \
            truth[(n, p, a)][pa] <= truth[(n, p, a)][ba] * (1 + 1e-9)
        okC = bc is None or (truth.get((n, p, c), {}).get(pc) is not None and
                             truth[(n, p, c)][pc] <= truth[(n, p, c)][bc] * (1 + 1e-9))
        if slow is not None and slow <= 1 + 1e-9:
            kind = "optimal"
        elif best not in (ba, bc) and pick in (ba, bc):
            kind = "unseen"
        elif (not okA and pick == pa) or (not okC and pick == pc):
            kind = "layout"
        else:
            kind = "interval"
        rows.append({"pt": (n, p, m), "pick": pick, "slow": slow, "best": best, "A": a, "C": c,
                     "bestA": ba, "bestC": bc, "pickA": pa, "pickC": pc, "okA": okA, "okC": okC,
                     "kind": kind})
    return rows


def summarize(rows, label, worst=15):
    by = defaultdict(float)
    cnt = defaultdict(int)
    failed = sum(r["slow"] is None for r in rows)
    for r in rows:
        if r["slow"] is None:
            continue
        x = r["slow"] - 1
        by[r["kind"]] += x
        cnt[r["kind"]] += 1
        by["size %d" % r["pt"][2]] += x
        by["nodes " + ("pow2" if r["pt"][0] & (r["pt"][0] - 1) == 0 else "non-pow2")] += x
    n = sum(r["slow"] is not None for r in rows)
    tot = sum(r["slow"] - 1 for r in rows if r["slow"] is not None)
    print(f"\n--- {label}: {n} points, avg slowdown {1 + tot / n:.4f}"
          + (f", {failed} failed picks" if failed else ""))
    print("  excess (sum of slowdown-1) by class: " + ", ".join(
        f"{k} {by[k]:.3f} ({cnt[k]} pts, {by[k] / n:+.4f} on the average)"
        for k in ("layout", "interval", "unseen") if k in by))
    print("  by size: " + ", ".join(f"{k[5:]} {by[k] / n:+.4f}" for k in sorted(by, key=lambda s: (len(s), s))
                                     if k.startswith("size")))
    print("  by node count: " + ", ".join(f"{k[6:]} {by[k] / n:+.4f}" for k in by if k.startswith("nodes")))
    if not worst:
        return
    print(f"  worst {worst}:")
    print(f"  {'n':>2} {'p':>2} {'size':>6} {'slow':>6}  {'class':<9} {'pick':<24} {'best':<24} "
          f"{'A':>6} {'best A':<24} {'pick A':<24} {'C':>6} {'best C':<24} {'pick C':<24}")
    for r in sorted(rows, key=lambda r: -(r["slow"] or 99))[:worst]:
        n, p, m = r["pt"]
        print(f"  {n:>2} {p:>2} {m:>6} {r['slow'] or float('nan'):>6.3f}  {r['kind']:<9} {r['pick']:<24} "
              f"{r['best']:<24} {r['A']:>6} {str(r['bestA']):<24} {r['pickA']:<24} {r['C']:>6} "
              f"{str(r['bestC']):<24} {r['pickC']:<24}")


def table_at(entry, coll, snap, rules="bisect"):
    """The learner's table refitted on a snapshot's data (same seed and rows: the same
    forest), with the algorithms the learner had stopped trusting by then
    (active_exclude_wrong: it had seen them return wrong data)."""
    from colltune.tuners.active import model_entries
    from colltune.tuners.active_model import CollectiveModel
    if "untrusted" not in snap:
        raise SystemExit("the replay was saved before the learner's untrusted algorithms were recorded: "
                         "run again without --from-replay")
    measured = snap["measured"]
    model = CollectiveModel(entry["labels"], entry["trees"], entry["seed"], entry.get("kind", "forest"),
                            entry.get("per_algorithm", False), entry.get("features", "acclaim"))
    model.fit(measured)
    model.untrusted = set(snap["untrusted"])
    return DecisionTable("active", {}, tuple(model_entries(model, coll, entry["candidates"], AL.LAYOUTS,
                                                           measured, entry["provider"], *variant(rules))))


def variant(rules):
    """"midpoint" (ACCLAiM), "bisect" (to the byte), "bisect:d" (d levels)."""
    name, _, depth = rules.partition(":")
    return name, int(depth) if depth else None


def learn(session, store, coll, max_points):
    from colltune.campaign import Campaign
    from colltune.tuners.active import ActiveLearner
    truth, gt_results = AL.measure_truth(session, store, coll, True)
    candidates, tests = AL.split()
    snaps = []

    def keep(learner, rec):
        st = learner.states[coll]
        snaps.append({"iteration": rec["iteration"], "converged": rec["converged"],
                      "measured": {k: dict(v) for k, v in st.measured.items()},
                      "untrusted": sorted(st.model.untrusted)})

    s = session.settings.values
    s["active_seed"], s["active_max_points"] = 1, max_points
    camp = Campaign(f"active-eval-variance-1-{coll}", session.backend(), store, session.settings, False)
    learner = ActiveLearner(camp, session.backend().provider(), [coll], AL.LAYOUTS, AL.POW2,
                            candidates={coll: candidates}, on_iteration=keep,
                            keep_going=True, budget_s=1e9)
    learner.run()
    st = learner.states[coll]
    tests["nonpow2_sizes"] = [p for p in tests["nonpow2_sizes"] if p not in st.measured]
    pow2_table = ExhaustiveTuner(session.backend().provider(), TuningSpace((coll,), tuple(AL.LAYOUTS), tuple(AL.POW2)), []).decide(
        gt_results.filter(msg_size=AL.POW2), {})
    return {"snaps": snaps, "converged_at": st.converged_at, "tests": tests, "truth": truth,
            "candidates": candidates, "labels": st.model.algorithms, "trees": st.model.trees,
            "seed": st.model.seed, "kind": st.model.kind, "per_algorithm": st.model.per_algorithm,
            "features": st.model.features, "provider": st.algorithms[0].provider,
            "pow2_table": pow2_table.to_dict()}


def analyse(coll, entry, worst, variants=("midpoint", "bisect")):
    truth, tests, conv, snaps = entry["truth"], entry["tests"], entry["converged_at"], entry["snaps"]
    print(f"\n===== {coll}: converged at iteration {conv}; non-pow2 test points {len(tests['nonpow2_sizes'])}")
    pow2_table = DecisionTable.from_dict(entry["pow2_table"])
    summarize(classify(pow2_table, coll, truth, tests["nonpow2_sizes"]),
              "reference: exhaustive table of every power-of-two point", worst)
    for label, snap in (("learner at convergence", snaps[conv - 1] if conv else snaps[-1]),
                        ("learner at the end", snaps[-1])):
        for v in variants:
            table = table_at(entry, coll, snap, v)
            summarize(classify(table, coll, truth, tests["nonpow2_sizes"]), f"{label}, rules {v}",
                      worst if v == variants[0] else 0)
            print("  (all sets: " + ", ".join(
                f"{k} {score(table, coll, truth, v)['avg_slowdown']:.4f}" for k, v in tests.items()) + ")")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="bcast")
    ap.add_argument("--store", default="benchmarks/results/active/active-eval.sqlite")
    ap.add_argument("--max-points", type=int, default=120)
    ap.add_argument("--replay", default="benchmarks/results/active/active-nonpow2-replay.pkl")
    ap.add_argument("--from-replay", action="store_true", help="analyse the saved learner data only")
    ap.add_argument("--worst", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--rules", default="midpoint,bisect",
                    help="rule generations to compare: midpoint (ACCLAiM), bisect (to the byte), bisect:D (D levels)")
    a = ap.parse_args()
    replay = {}
    if os.path.exists(a.replay):
        with open(a.replay, "rb") as fh:
            replay = pickle.load(fh)
    colls = a.collectives.split(",")
    if not a.from_replay:
        session = Session({"platform": "small", "store": a.store, "jobs": a.jobs, "active_batch": 4})
        with session.store as store:
            for coll in colls:
                replay[coll] = learn(session, store, coll, a.max_points)
                with open(a.replay, "wb") as fh:
                    pickle.dump(replay, fh)
    for coll in colls:
        analyse(coll, replay[coll], a.worst, tuple(a.rules.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
