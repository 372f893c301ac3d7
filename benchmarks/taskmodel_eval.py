#!/usr/bin/env python3
"""Evaluate the HAN task cost model (docs/taskmodel.md) against measured whole
HAN calls on a bundled SimGrid platform.

    .venv/bin/python benchmarks/taskmodel_eval.py [--platform small] [--validate 8x4]
        [--layouts 3x4,6x3] [--sizes 300000,3000000] [--colls bcast,allreduce]
        [--cost rank|leader] [--heuristics] [--store benchmarks/results/taskmodel/taskmodel_eval.sqlite] [--json OUT]

(a) model validation (paper Fig. 4/7): predicted vs measured time of a 4 MiB
    call for every configuration of the space at --validate; error per
    configuration; is the predicted best the measured best?
(b) accuracy vs exhaustive search of the same space on the grid layouts x sizes:
    slowdown = T(measured, predicted best) / T(measured best); mean, share optimal, worst.
(c) tuning cost on that grid in simulated benchmark seconds (warm-up + timed
    call / task each): task pipelines the model needed vs whole calls of every
    configuration at every point (exhaustive).

Everything measured goes into --store (tables taskmodel_pipelines,
taskmodel_whole) and is reused: the run is resumable and a re-run measures
nothing. A failed whole call (crash, timeout, wrong result) is printed and
left out of "best"; it never gets a time. SMPI timings are deterministic.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

from colltune import config
from colltune.backends.sim import SimBackend
from colltune.errors import BackendError
from colltune.sizes import parse_list
from colltune.store import Store
from colltune.taskmodel.costs import TaskCosts
from colltune.taskmodel.runner import TaskRunner
from colltune.taskmodel.model import depth, segments
from colltune.taskmodel.heuristics import ALL, PRUNING, candidates, pruned_by
from colltune.taskmodel.search import (SPACES, best_predicted, configurations, measure_whole,
                                       predict_config)


def layout(s: str) -> tuple[int, int]:
    n, p = s.lower().split("x")
    return int(n), int(p)


def label(c: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in c.items() if k != "iralg")


def whole_or_none(costs, coll, n, p, conf, m, failures):
    try:
        return measure_whole(costs, coll, n, p, conf, m)
    except BackendError as exc:
        failures.append(f"{coll} {n}x{p} {m} {label(conf)}: {str(exc).splitlines()[0]}")
        return None


class NotStored(Exception):
    """--stored-only: a measurement the store does not have yet."""


class StoredOnlyRunner:
    """Stands in for TaskRunner with --stored-only: measures nothing."""

    def launch(self, *a, **k):
        raise NotStored


def validate(costs, colls, n, p, m, failures, space="han") -> dict:
    out = {}
    for coll in colls:
        rows, missing = [], 0
        for conf in configurations(coll, space):
            try:
                pred = predict_config(costs, coll, n, p, conf, m)
                w = whole_or_none(costs, coll, n, p, conf, m, failures)
            except NotStored:
                missing += 1
                continue
            rows.append({"config": label(conf), "params": conf, "predicted_s": pred,
                         "measured_s": w and w["completion_s"],
                         "error": w and pred / w["completion_s"] - 1})
        if missing:
            print(f"\n(a) {coll} {n}x{p}, {m} B: PARTIAL (--stored-only): {len(rows)} of "
                  f"{len(rows) + missing} configurations measured so far; 'best' below is "
                  f"among those only")
        if not rows:
            continue
        ok = [r for r in rows if r["measured_s"]]
        pb = min(rows, key=lambda r: r["predicted_s"])
        mb = min(ok, key=lambda r: r["measured_s"]) if ok else None
        print(f"\n(a) {coll} {n}x{p}, {m} B: predicted vs measured whole HAN call")
        print(f"{'configuration':44s} {'predicted':>11s} {'measured':>11s} {'error':>7s}")
        for r in sorted(rows, key=lambda r: r["measured_s"] or 1e9):
            meas = f"{r['measured_s']:.4e}" if r["measured_s"] else "FAILED"
            err = f"{100 * r['error']:+.1f}%" if r["measured_s"] else ""
            print(f"{r['config']:44s} {r['predicted_s']:11.4e} {meas:>11s} {err:>7s}")
        errs = [abs(r["error"]) for r in ok]
        # a predicted best whose whole call failed (crash, timeout, wrong result) has no
        # slowdown: recorded as a failure (NaN slowdown), never scored (it had crashed here)
        failed_pick = not pb["measured_s"]
        slowdown = math.nan if failed_pick or mb is None else pb["measured_s"] / mb["measured_s"]
        if failed_pick:
            failures.append(f"predicted best failed: {coll} {n}x{p} {m} {pb['config']} (validation)")
        print((f"mean |error| {100 * statistics.mean(errs):.1f}%, max {100 * max(errs):.1f}%; "
               if errs else "no configuration's whole call succeeded; ")
              + f"predicted best {pb['config']} "
              + ("FAILED as a whole call (no slowdown)" if failed_pick else
                 f"== measured best: {pb is mb} (slowdown {slowdown:.3f})"))
        out[coll] = {"nodes": n, "ppn": p, "bytes": m, "rows": rows, "missing": missing,
                     "best_match": pb is mb, "predicted_best_failed": failed_pick, "slowdown": slowdown}
    return out


VARIANT_COSTS: list = []


def variant_costs(costs, spec):
    """A TaskCosts on the same store and runner with other heuristics."""
    VARIANT_COSTS.append(TaskCosts(costs.store, costs.runner, costs.provenance, costs.cost, spec))
    return VARIANT_COSTS[-1]


def accuracy(costs, colls, layouts, sizes, failures, variants, space="han") -> dict:
    """Whole calls of every configuration at every point (exhaustive search),
    then, per heuristics variant, the model's pick and the pipelines it needed."""
    grid, whole_bench = [], 0.0
    for coll in colls:
        confs = configurations(coll, space)
        for n, p in layouts:
            for m in sizes:
                meas = [whole_or_none(costs, coll, n, p, c, m, failures) for c in confs]
                whole_bench += sum(w["bench_s"] for w in meas if w)
                grid.append((coll, n, p, m, confs, meas))
    out = {}
    for name in variants:
        vc = variant_costs(costs, None if name == "none" else name)
        points = []
        for coll, n, p, m, confs, meas in grid:
            ok = [(w["completion_s"], i) for i, w in enumerate(meas) if w]
            best_t, best_i = min(ok)
            pick_conf, _ = best_predicted(vc, coll, n, p, m, confs)
            pick = confs.index(pick_conf)
            if meas[pick] is None:
                failures.append(f"predicted best failed: {coll} {n}x{p} {m} ({name})")
                continue
            points.append({"coll": coll, "nodes": n, "ppn": p, "bytes": m,
                           "slowdown": meas[pick]["completion_s"] / best_t,
                           "picked": label(confs[pick]), "best": label(confs[best_i]),
                           "candidates": len(candidates(coll, n, p, m, confs, vc.active))})
        task_bench = vc.spent(vc.used)
        sds = [r["slowdown"] for r in points]
        summ = {"points": len(sds), "mean_slowdown": statistics.mean(sds),
                "share_optimal": sum(s == 1.0 for s in sds) / len(sds), "worst": max(sds),
                "task_bench_s": task_bench, "exhaustive_bench_s": whole_bench,
                "cost_ratio": task_bench / whole_bench, "pipelines": len(vc.used),
                "heuristics": vc.heuristics}
        out[name] = {"points": points, "summary": summ}
    return out


def print_accuracy(acc: dict, nconf: int) -> None:
    first = next(iter(acc.values()))
    print(f"\n(b) accuracy vs exhaustive search ({nconf} configurations per point), "
          f"per point with {next(iter(acc))!r}")
    print(f"{'coll':10s} {'layout':>7s} {'bytes':>9s} {'slowdown':>9s}  picked / best")
    for r in first["points"]:
        print(f"{r['coll']:10s} {r['nodes']:>3d}x{r['ppn']:<3d} {r['bytes']:9d} {r['slowdown']:9.3f}"
              f"  {r['picked']} / {r['best']}")
    print("\n(b, c) per heuristics variant: accuracy (target: average slowdown <= 1.02) and "
          "tuning cost (simulated benchmark seconds; paper: 23% without heuristics, 4.3% with)")
    print(f"{'heuristics':12s} {'avg slowdown':>12s} {'optimal':>9s} {'worst':>7s} "
          f"{'pipelines':>9s} {'task s':>9s} {'exhaustive s':>12s} {'cost':>7s}")
    for name, v in acc.items():
        s = v["summary"]
        print(f"{name:12s} {s['mean_slowdown']:12.4f} {s['share_optimal'] * s['points']:4.0f}/"
              f"{s['points']:<4d} {s['worst']:7.3f} {s['pipelines']:9d} {s['task_bench_s']:9.4f} "
              f"{s['exhaustive_bench_s']:12.4f} {100 * s['cost_ratio']:6.1f}%")


def evidence(costs, colls, layouts, sizes, failures, space="han") -> dict:
    """For each pruning heuristic, from the whole calls of the grid: at how many
    points it prunes something, whether it ever prunes the measured best, and
    the slowdown of the best configuration it keeps vs the best of all."""
    out = {}
    print("\n(e) evidence for the pruning heuristics (whole calls of every configuration)")
    print(f"{'heur.':6s} {'points pruned':>13s} {'configs pruned':>14s} {'best pruned':>11s} "
          f"{'worst kept/best':>15s} {'margin':>7s}  where the best was pruned")
    for name in PRUNING:
        npts = nconf = nbest = 0
        worst, margin, where = 1.0, float("inf"), []
        for coll in colls:
            confs = configurations(coll, space)
            for n, p in layouts:
                for m in sizes:
                    drop = pruned_by(name, coll, n, m, confs)
                    if not any(drop):
                        continue
                    meas = [whole_or_none(costs, coll, n, p, c, m, failures) for c in confs]
                    ok = [(w["completion_s"], i) for i, w in enumerate(meas) if w]
                    best_t, best_i = min(ok)
                    kept = [t for t, i in ok if not drop[i]]
                    npts += 1
                    nconf += sum(drop)
                    ratio = min(kept) / best_t if kept else float("inf")
                    worst = max(worst, ratio)
                    # margin: the fastest pruned configuration / the best kept one
                    margin = min(margin, min(t for t, i in ok if drop[i]) / min(kept))
                    if drop[best_i]:
                        nbest += 1
                        where.append(f"{coll} {n}x{p} {m} ({ratio:.3f})")
        print(f"{name:6s} {npts:13d} {nconf:14d} {nbest:11d} {worst:15.3f} {margin:7.3f}  "
              f"{'; '.join(where)}")
        out[name] = {"points_pruned": npts, "configs_pruned": nconf, "best_pruned": nbest,
                     "worst_kept_over_best": worst, "margin": margin, "where": where}
    # H5 changes a prediction, not the candidates: |error| vs the whole call with
    # the exact (u-1)-segment pipeline and with the slope, where it applies
    exact, slope = variant_costs(costs, None), variant_costs(costs, "H5")
    errs = {"exact": [], "H5": []}
    for coll in colls:
        for c in configurations(coll, space):
            d, fs = depth(coll, c), c["fs"]
            for n, p in layouts:
                for m in sizes:
                    if segments(m, fs) != d or m == d * fs or d - 1 < 2:
                        continue          # H5 applies to u = D >= 3, last segment partial
                    w = whole_or_none(costs, coll, n, p, c, m, failures)
                    if not w:
                        continue
                    for k, vc in (("exact", exact), ("H5", slope)):
                        errs[k].append(abs(predict_config(vc, coll, n, p, c, m)
                                           / w["completion_s"] - 1))
    if errs["H5"]:
        ex, h5 = errs["exact"], errs["H5"]
        print(f"H5     {len(h5)} (configuration, point) pairs with u = D >= 3 and a partial last "
              f"segment: mean |error| {100 * statistics.mean(ex):.1f}% with the exact "
              f"(u-1)-segment pipeline, {100 * statistics.mean(h5):.1f}% with H5's fill+drain; max "
              f"{100 * max(ex):.1f}% / {100 * max(h5):.1f}%")
        out["H5"] = {"pairs": len(h5), "mean_err_exact": statistics.mean(ex),
                     "mean_err_h5": statistics.mean(h5), "max_err_exact": max(ex),
                     "max_err_h5": max(h5)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="small")
    ap.add_argument("--validate", default="8x4", help="layout of (a); '' to skip")
    ap.add_argument("--validate-bytes", type=int, default=4 << 20)
    ap.add_argument("--layouts", default="3x4,6x3", help="grid of (b)/(c); '' to skip")
    ap.add_argument("--sizes", default="300000,3000000")
    ap.add_argument("--colls", default="bcast,allreduce")
    ap.add_argument("--cost", default="rank", choices=["rank", "leader"])
    ap.add_argument("--space", default="han", choices=sorted(SPACES),
                    help="configuration space: han (the paper's), han+flat (adds allreduce "
                         "imod=2, a flat ring / Rabenseifner across the leaders)")
    ap.add_argument("--heuristics", nargs="?", const="safe", default="",
                    help="heuristics of the validation (a): safe (alone), all, or e.g. H1,H3 (default none)")
    ap.add_argument("--variants", default="none," + ",".join(ALL) + ",all,safe",
                    help="heuristics variants compared in (b, c): none, H1..H5, all, safe, "
                         "or a '+'-joined set such as H1+H3")
    ap.add_argument("--stored-only", action="store_true",
                    help="measure nothing: report (a) from what the store has (partial runs)")
    ap.add_argument("--evidence", action="store_true",
                    help="(e): per pruning heuristic, does it ever prune the measured best?")
    ap.add_argument("--store", default="benchmarks/results/taskmodel/taskmodel_eval.sqlite")
    ap.add_argument("--json", help="summary JSON (default: next to --store)")
    ap.add_argument("--html", help="report page (default: next to --json)")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    settings = config.load({"platform": a.platform, "timeout": a.timeout})
    backend = SimBackend(settings, a.platform)
    backend.prepare()
    # a reprint (--stored-only) opens the store read-only: it never adds this
    # colltune's newer tables to a committed store
    store = Store(a.store, readonly=a.stored_only)
    runner = StoredOnlyRunner() if a.stored_only else TaskRunner(backend, settings)
    costs = TaskCosts(store, runner, backend.provenance(), a.cost,
                      a.heuristics)
    colls, failures, t0 = a.colls.split(","), [], time.monotonic()
    out = {"platform": a.platform, "cost": a.cost, "heuristics": a.heuristics,
           "space": a.space, "command": " ".join(sys.argv)}
    if a.validate:
        out["validation"] = validate(costs, colls, *layout(a.validate), a.validate_bytes, failures,
                                     a.space)
    if a.layouts:
        lays, sizes = [layout(s) for s in a.layouts.split(",")], parse_list(a.sizes, "message size")
        variants = [v.replace("+", ",") for v in a.variants.split(",") if v]
        acc = accuracy(costs, colls, lays, sizes, failures, variants, a.space)
        print_accuracy(acc, len(configurations(colls[0], a.space)))
        out["variants"] = {k: v["summary"] for k, v in acc.items()}
        out["accuracy"] = acc[variants[-1]]
        if a.evidence:
            out["evidence"] = evidence(costs, colls, lays, sizes, failures, a.space)
    if failures:
        print("\nfailed measurements (excluded):\n  " + "\n  ".join(failures))
    path = a.json or os.path.splitext(a.store)[0] + (f"_{a.platform}_{a.cost}{'_h' if costs.heuristics else ''}"
                                                     f"{'' if a.space == 'han' else '_' + a.space.replace('+', '_')}.json")
    with open(path, "w") as fh:
        json.dump({**out, "failures": failures}, fh, indent=1)
    from colltune.report.taskmodel import render_page
    page = render_page(path, a.html or os.path.splitext(path)[0] + ".html")
    wall = "" if a.stored_only else f"wall {time.monotonic() - t0:.0f} s; "   # a reprint: same bytes
    print(f"\nsummary: {path}, report {page}; {wall}"
          f"{costs.measured + sum(getattr(v, 'measured', 0) for v in VARIANT_COSTS)} pipelines "
          f"measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
