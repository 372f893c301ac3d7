"""Scoring a decision table against measured ground truth (the metrics of docs/active.md).

Average slowdown on a test set: mean over points of T(algorithm the table selects)
/ T(best algorithm), both measured. Also the share of points where the table picks
the optimum (within OPTIMAL_RTOL: SMPI timings are deterministic, ties are real)
and the worst slowdown. A pick that failed (or was never measured) at a point has
no time: it is counted apart, never given a fake slowdown.
"""
from __future__ import annotations

import math

from ..decision import DecisionTable
from ..results import Results
from ..store import OK

OPTIMAL_RTOL = 1e-9

Point = tuple[int, int, int]


def ground_truth(results: Results, collective: str) -> dict[Point, dict[str, float | None]]:
    """point -> {algorithm: median time, None if it failed}, real algorithms only."""
    pts = results.filter(collective=collective, scenario="plain").algorithms().points
    out: dict[Point, dict[str, float | None]] = {}
    for r in pts.itertuples():
        ok = r.status == OK and r.ttc_median_s is not None and not math.isnan(r.ttc_median_s)
        out.setdefault((int(r.nodes), int(r.ppn), int(r.msg_size)), {})[r.algorithm] = \
            float(r.ttc_median_s) if ok else None
    return out


def score(table: DecisionTable, collective: str, truth: dict[Point, dict[str, float | None]],
          points: list[Point]) -> dict:
    slow, failed = [], 0
    for pt in points:
        times = truth[pt]
        ok = [t for t in times.values() if t is not None]
        if not ok or min(ok) <= 0:        # nothing measured, or one rank: no communication
            continue
        t = times.get(table.lookup(collective, *pt).algorithm)
        if t is None:
            failed += 1
            continue
        slow.append(t / min(ok))
    n = len(slow)
    return {"points": n + failed, "avg_slowdown": sum(slow) / n if n else math.nan,
            "optimal_share": sum(s <= 1 + OPTIMAL_RTOL for s in slow) / n if n else math.nan,
            "worst_slowdown": max(slow) if n else math.nan, "failed_picks": failed}
