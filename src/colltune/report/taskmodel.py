"""Report sections of the HAN task cost model (benchmarks/taskmodel_eval.py's
summary JSON): predicted vs measured whole calls, accuracy and tuning cost vs
exhaustive search. ``sections`` returns HTML fragments for
``report.render(..., extra=...)``; ``render_page`` writes them as one page."""
from __future__ import annotations

import datetime as _dt
import html
import json

import pandas as pd

from . import _CSS, _img, _table
from .plots import _png, plt


def predicted_vs_measured(val: dict) -> bytes:
    fig, axes = plt.subplots(1, len(val), figsize=(5.5 * len(val), 4.5), squeeze=False)
    for ax, (coll, v) in zip(axes[0], sorted(val.items())):
        rows = [r for r in v["rows"] if r["measured_s"]]
        x = [1e3 * r["measured_s"] for r in rows]
        y = [1e3 * r["predicted_s"] for r in rows]
        ax.scatter(x, y, s=18)
        lo, hi = min(x + y) * 0.9, max(x + y) * 1.1
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
        best = min(rows, key=lambda r: r["predicted_s"])
        ax.scatter([1e3 * best["measured_s"]], [1e3 * best["predicted_s"]], s=80,
                   facecolors="none", edgecolors="r", label="predicted best")
        ax.set(xlabel="measured whole HAN call (ms)", ylabel="model prediction (ms)",
               title=f"{coll} {v['nodes']}x{v['ppn']}, {v['bytes']} B, one point per configuration")
        ax.legend(fontsize=8)
    return _png(fig)


def sections(summary: dict) -> list[str]:
    out = [f"<h2 id='taskmodel'>HAN task cost model ({html.escape(summary['platform'])}, "
           f"task cost: {html.escape(summary['cost'])})</h2>",
           f"<p class='note'>From <code>{html.escape(summary['command'])}</code>. Simulated "
           f"(SMPI) times are deterministic; benchmark seconds are simulated seconds.</p>"]
    val = summary.get("validation")
    if val:
        out.append(_img(predicted_vs_measured(val), "predicted vs measured"))
        for coll, v in sorted(val.items()):
            df = pd.DataFrame([{"configuration": r["config"], "predicted_s": r["predicted_s"],
                                "measured_s": r["measured_s"], "error_pct":
                                None if r["error"] is None else 100 * r["error"]}
                               for r in v["rows"]])
            out.append(f"<details><summary>{html.escape(coll)}: predicted best is measured "
                       f"best: {v['best_match']} (slowdown {v['slowdown']:.3f})</summary>"
                       + _table(df, {"configuration"}, "{:.4g}") + "</details>")
    acc = summary.get("accuracy")
    if acc:
        s = acc["summary"]
        out.append(_table(pd.DataFrame([{
            "points": s["points"], "mean slowdown": s["mean_slowdown"],
            "share optimal": s["share_optimal"], "worst": s["worst"],
            "task model bench s": s["task_bench_s"], "exhaustive bench s": s["exhaustive_bench_s"],
            "cost ratio": s["cost_ratio"]}]), set(), "{:.4g}"))
        if summary.get("variants"):
            out.append("<p>Heuristics variants (same whole calls, same grid):</p>" + _table(
                pd.DataFrame([{"heuristics": k, "mean slowdown": v["mean_slowdown"],
                               "share optimal": v["share_optimal"], "worst": v["worst"],
                               "pipelines": v.get("pipelines"),
                               "task model bench s": v["task_bench_s"],
                               "cost ratio": v["cost_ratio"]}
                              for k, v in summary["variants"].items()]), {"heuristics"}, "{:.4g}"))
        out.append("<details><summary>per point</summary>"
                   + _table(pd.DataFrame(acc["points"]), {"coll", "picked", "best"}, "{:.4g}")
                   + "</details>")
    if summary.get("failures"):
        out.append("<p>Failed measurements (excluded): "
                   + html.escape("; ".join(summary["failures"])) + "</p>")
    return out


def render_page(summary_path: str, out_path: str) -> str:
    with open(summary_path) as fh:
        summary = json.load(fh)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>HAN task model</title>"
             f"<style>{_CSS}</style></head><body><h1>HAN task cost model</h1>"
             f"<p class='note'>generated {_dt.datetime.now().isoformat(timespec='seconds')}</p>",
             *sections(summary), "</body></html>"]
    with open(out_path, "w") as fh:
        fh.write("\n".join(parts))
    return out_path
