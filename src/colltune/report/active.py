"""Report figures of the active learner: learning curve and variance convergence.

`active_section(history)` is HTML for `report.render(..., extra=[...])`: the summed
variance per iteration (what the stopping rule watches); `history` is an active
decision table's `provenance["active"]["history"]` or `ActiveOutcome.history`.
`render_evaluation(report, path)` is the page of benchmarks/active_learning.py:
average slowdown against training cost for the active learner and the random
baseline, and the variance curve against the slowdown curve.
"""
from __future__ import annotations

import html

from . import _img, plots

plt = plots.plt


def variance_figure(curve: list[dict], title: str, slowdown_key: str | None = None) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    it = [c["iteration"] for c in curve]
    ax.plot(it, [c["variance_sum"] for c in curve], marker=".", color="tab:blue")
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("summed jackknife variance", color="tab:blue")
    conv = [c["iteration"] for c in curve if c.get("converged")]
    if conv:
        ax.axvline(conv[0], color="black", ls=":", lw=1)
        ax.text(conv[0], ax.get_ylim()[1], " converged", va="top", fontsize=8)
    if slowdown_key:
        ax2 = ax.twinx()
        ax2.plot(it, [c[slowdown_key]["avg_slowdown"] for c in curve], color="tab:red", marker=".")
        ax2.axhline(1.03, color="tab:red", ls="--", lw=0.8)
        ax2.set_ylabel("average slowdown (test set)", color="tab:red")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return plots._png(fig)


def learning_figure(curves: dict[str, list[dict]], exhaustive_s: float, key: str, title: str) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    others = iter(["tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:grey"])
    for name, curve in sorted(curves.items()):
        style = (dict(lw=2, color="tab:blue") if name.startswith("variance")
                 else dict(lw=1, ls="--", color=next(others, "grey")))
        ax.plot([c["cost_s"] / exhaustive_s for c in curve], [c[key]["avg_slowdown"] for c in curve],
                marker=".", label="active (variance)" if name.startswith("variance") else name, **style)
    ax.axhline(1.03, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("training cost / exhaustive search cost (simulated benchmark seconds)")
    ax.set_ylabel("average slowdown")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return plots._png(fig)


def active_section(history: list[dict]) -> str:
    """HTML of the active learner's own history (per collective)."""
    parts = ["<h2>Active learning</h2><p class='note'>The learner measures next where the "
             "jackknife variance over the candidate space is largest; it stops when its table "
             "stops changing (setting active_stop = stable, the default) or when the summed "
             "variance below settles (active_stop = variance); no test set.</p>"]
    for coll in sorted({h["collective"] for h in history}):
        curve = [h for h in history if h["collective"] == coll]
        parts.append(_img(variance_figure(curve, f"{coll}: summed variance"), f"{coll} variance"))
    return "\n".join(parts)


def render_evaluation(report: dict, path: str) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>colltune active learning"
             "</title></head><body style='font-family:system-ui,sans-serif;max-width:1100px'>",
             "<h1>Active learning vs exhaustive ground truth</h1>",
             "<p>From benchmarks/active_learning.py (SimGrid SMPI, deterministic).</p>"]
    for coll, r in report.items():
        if "curves" not in r:
            continue
        parts.append(f"<h2>{html.escape(coll)}</h2>")
        for key, label in (("test_pow2", "power-of-two test set"),
                           ("test_nonpow2_sizes", "non-power-of-two sizes")):
            parts.append(_img(learning_figure(r["curves"], r["exhaustive_s"], key,
                                              f"{coll}: learning curve, {label}"), f"{coll} {key}"))
        parts.append(_img(variance_figure(r["curves"]["variance-1"], f"{coll}: variance vs slowdown",
                                          "test_pow2"), f"{coll} variance"))
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v['launches']}</td><td>{v['sequential_s'] * 1e3:.3f}"
                   f"</td><td>{v['makespan_s'] * 1e3:.3f}</td><td>{v['shared']}</td></tr>"
                   for k, v in report.items() if k.startswith("placement-"))
    if rows:
        parts.append("<h2>Parallel collection</h2><table border=1><tr><th>platform</th><th>launches"
                     "</th><th>sequential ms</th><th>makespan ms</th><th>shared groups</th></tr>"
                     + rows + "</table>")
    with open(path, "w") as fh:
        fh.write("\n".join(parts) + "</body></html>")
    return path
