"""Compare the best algorithm with a library's default decision (a selector).

On SMPI timings are deterministic, so the algorithm a selector really ran can
be recognised: it is the algorithm whose time equals the selector's time to
the last bit. That identification is reported as evidence, never assumed.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .results import SPACE, Results

SAME_TIME_RTOL = 1e-9     # "equal" on a deterministic simulator
DIFFERS_RTOL = 1e-6       # the selector is slower than the best by more than this


def compare_to_baselines(results: Results, baselines: list[str]) -> pd.DataFrame:
    times = results.times()
    best = results.best()
    if best.empty:
        return pd.DataFrame()
    best = best.set_index(SPACE)
    algos = [a for a in results.algorithms().points["algorithm"].unique()]
    pts = results.points
    failed = set(map(tuple, pts[pts["status"] != "ok"][SPACE + ["algorithm"]].itertuples(index=False)))
    rows = []
    for idx, b in best.iterrows():
        row = dict(zip(SPACE, idx))
        row.update(best_algorithm=b["algorithm"], best_s=b["ttc_median_s"])
        trow = times.loc[idx] if idx in times.index else pd.Series(dtype=float)
        for name in baselines:
            t = trow.get(name, np.nan)
            row[f"{name}_s"] = t
            if pd.isna(t):
                why = "failed" if (*idx, name) in failed else "not measured"
                row[f"{name}_speedup"], row[f"{name}_choice"], row[f"{name}_differs"] = np.nan, why, np.nan
                continue
            same = [a for a in algos if a in trow and not pd.isna(trow[a])
                    and math.isclose(trow[a], t, rel_tol=SAME_TIME_RTOL)]
            row[f"{name}_speedup"] = t / b["ttc_median_s"] if b["ttc_median_s"] > 0 else np.nan
            row[f"{name}_choice"] = "|".join(sorted(same)) if same else "?"
            # a best of 0 s (count 0: no data moves, some algorithm returns at once) gives no
            # speed-up, and a baseline that took time there does not "differ" in a way that counts
            row[f"{name}_differs"] = bool(t > b["ttc_median_s"] * (1 + DIFFERS_RTOL)) \
                if b["ttc_median_s"] > 0 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(cmp: pd.DataFrame, baselines: list[str]) -> pd.DataFrame:
    """Per collective and baseline: how often the best differs, geometric-mean speedup."""
    rows = []
    if cmp.empty:
        return pd.DataFrame()
    for coll, g in cmp.groupby("collective"):
        for name in baselines:
            sp = g[f"{name}_speedup"].dropna()
            rows.append({
                "collective": coll, "baseline": name, "points": len(g),
                "baseline_failed": int((g[f"{name}_choice"] == "failed").sum()),
                "baseline_missing": int((g[f"{name}_choice"] == "not measured").sum()),
                "differs": int(g[f"{name}_differs"].fillna(False).astype(bool).sum()),
                "differs_share": float(g[f"{name}_differs"].fillna(False).astype(bool).mean()),
                "geomean_speedup": float(np.exp(np.log(sp).mean())) if len(sp) else np.nan,
                "max_speedup": float(sp.max()) if len(sp) else np.nan,
            })
    return pd.DataFrame(rows)


def format_summary(summary: pd.DataFrame) -> str:
    if summary.empty:
        return "no comparable points"
    lines = [f"{'collective':<12} {'baseline':<9} {'points':>6} {'best differs':>13} "
             f"{'geomean speedup':>16} {'max':>7}"]
    for _, r in summary.iterrows():
        if r.baseline_missing == r.points:     # e.g. active learning measures no selector
            lines.append(f"{r.collective:<12} {r.baseline:<9} {r.points:>6}   baseline not measured")
            continue
        failed = f" ({r.baseline_failed} failed)" if r.baseline_failed else ""
        failed += f" ({r.baseline_missing} not measured)" if r.baseline_missing else ""
        lines.append(f"{r.collective:<12} {r.baseline:<9} {r.points:>6} "
                     f"{r.differs:>5} ({r.differs_share:4.0%}) {r.geomean_speedup:>15.3f}x "
                     f"{r.max_speedup:>6.2f}x{failed}")
    return "\n".join(lines)
