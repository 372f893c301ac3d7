"""Self-contained HTML report of a campaign (plots embedded as PNG)."""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json

import pandas as pd

from .. import __version__
from ..compare import compare_to_baselines, summarize
from ..errors import InputError
from ..providers.base import SELECTOR
from ..results import Results
from . import plots

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-top:1em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}.note{color:#555;font-size:.9em}img{max-width:100%}"""


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(df: pd.DataFrame, left: set[str] = frozenset(), floatfmt: str = "{:.3f}") -> str:
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(str(c))}</th>' for c in df.columns)
    rows = []
    for i in range(len(df)):
        cells = []
        for c in df.columns:
            v = df[c].iloc[i]          # by column: a row would turn its integers into floats
            text = floatfmt.format(v) if isinstance(v, float) and pd.notna(v) else ("" if pd.isna(v) else str(v))
            cells.append(f'<td class="{"l" if c in left else ""}">{html.escape(text)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


# what varies along a sweep that is not a decision point (Results.decision_points)
_SWEEP = (("delayed", "delay_us", "delay (us)"), ("overlap", "tcalc_us", "compute (us)"))


def _sweeps(results: Results) -> list[str]:
    """The points that are not decision points, one table per collective, layout,
    scenario and size: time (us) per algorithm along the scenario's variable or the
    sub-communicator size. Not in the summary: no best or speed-up across them."""
    pts = results.ok().points
    if pts.empty:
        return []
    rest = pts.loc[~pts.index.isin(results.decision_points().points.index)]
    if rest.empty:
        return []
    out = ["<h2>Scenario sweeps and sub-communicator sizes</h2>",
           "<p class='note'>Time to completion in µs per algorithm; these points are not "
           "in the summary above (it compares the plain scenario on the whole communicator).</p>"]
    var = {scen: (col, label) for scen, col, label in _SWEEP}
    for (coll, scen, n, p, m), g in rest.groupby(["collective", "scenario", "nodes", "ppn", "msg_size"]):
        col, label = var.get(scen, (None, None))
        t = g.pivot_table(index=([col] if col else []) + ["participants"], columns="algorithm",
                          values="ttc_median_s", aggfunc="min") * 1e6
        t = t.reset_index().astype({"participants": int})
        t = t.rename(columns={"participants": "ranks", **({col: label} if col else {})})
        out.append(f"<h3>{html.escape(coll)} {html.escape(scen)}, {n}x{p}, {m} B</h3>")
        out.append(_table(t, set(), "{:.2f}"))
    return out


def _timing_note(runs) -> str:
    """What the timings are worth: deterministic on SMPI; on a real library the host's noise,
    and none at all where a layout had more ranks than the host has cores."""
    backends = set(runs["backend"].dropna()) if "backend" in runs else set()
    if not backends or backends == {"sim"}:
        return "On SimGrid SMPI timings are deterministic."
    note = (f"Real MPI timings ({', '.join(sorted(backends))}): the medians carry the machine's "
            f"noise; compare ratios, not single points.")
    from ..backends.local import host_cores, oversubscribed_runs
    over = sorted({int(n) for n in oversubscribed_runs(runs)["nprocs"]})
    if over:
        note += (f" WARNING: {', '.join(map(str, over))} ranks on this {host_cores()}-core host "
                 f"oversubscribe it: those timings are noise, not a ranking.")
    return note


def render(results: Results, baselines: list[str], path: str, title: str = "colltune report",
           extra: tuple[str, ...] = ()) -> str:
    """`extra`: further HTML sections (e.g. report.active.active_section,
    report.taskmodel.sections) before Failures."""
    pts = results.points
    measured = set(pts["algorithm"]) if len(results) else set()
    selectors = sorted(set(pts.loc[pts["algorithm_kind"] == SELECTOR, "algorithm"])) \
        if len(results) and "algorithm_kind" in pts else []
    if baselines and not measured & set(baselines) and len(results):
        raise InputError(f"--baselines {','.join(baselines)}: the campaign measured none of them "
                         f"(its library default selectors: {', '.join(selectors) or 'none'})")
    # default: the selectors the campaign measured (none for active learning)
    baselines = [b for b in baselines if b in measured] if baselines else selectors
    decision = results.decision_points()
    pts = decision.ok().points
    best = decision.best()
    cmp = compare_to_baselines(decision, baselines)
    summary = summarize(cmp, baselines)
    runs = results.runs
    prov = {}
    if not runs.empty:
        first = runs.iloc[0]
        prov = {k: first.get(k) for k in ("backend", "platform", "platform_sha256", "mpi_library",
                                          "mpi_version", "library_version", "colltune_version")}
        prov["settings"] = first.get("settings_json")
    if pts.empty and extra and not len(results.failures()):   # an online campaign: its sections
        return _write(path, [*_start(title, "No benchmark points in this campaign: the sections "
                                            "below say what it measured."), *extra, "</body></html>"])
    parts = [*_start(title, "Metric: time to completion (max end − min start over ranks, "
                            "synchronised start), median of repetitions. "
                            + _timing_note(runs) + " Failed points (crash, hang, wrong result) "
                            "are excluded from 'best'."),
             "<h2>Summary</h2>",
             _table(summary, {"collective", "baseline"}) if not summary.empty else ("<p>No comparable points: the summary compares the best algorithm with the "
              f"baselines ({html.escape(', '.join(baselines) or 'none measured')}) at points of "
              "the plain scenario on the whole communicator.</p>")]
    for coll in sorted(pts["collective"].unique()):
        parts.append(f"<h2 id='{coll}'>{html.escape(coll)}</h2>")
        if not best.empty and coll in set(best["collective"]):
            parts.append(_img(plots.best_map(best, coll), f"{coll} best algorithm map"))
        if baselines and not cmp.empty and coll in set(cmp["collective"]):
            parts.append(_img(plots.speedup_by_size(cmp, coll, baselines), f"{coll} speedup"))
        g = pts[pts["collective"] == coll]
        for n, p in sorted({(int(a), int(b)) for a, b in zip(g["nodes"], g["ppn"])}):
            parts.append(_img(plots.times_by_size(pts, coll, n, p, baselines),
                              f"{coll} times {n}x{p}"))
        if not cmp.empty:
            c = cmp[cmp["collective"] == coll].drop(columns=["collective"])
            parts.append("<details><summary>per-point table</summary>"
                         + _table(c, {"best_algorithm"} | {f"{b}_choice" for b in baselines},
                                  "{:.4g}") + "</details>")
    parts.extend(_sweeps(results))
    parts.extend(extra)
    fails = results.failures()
    parts.append("<h2>Failures</h2>")
    if fails.empty:
        parts.append("<p>None.</p>")
    else:
        f = fails[["collective", "algorithm", "nodes", "ppn", "msg_size", "status", "check_error"]]
        f = f.assign(check_error=f["check_error"].fillna("").str.slice(0, 160))
        parts.append(_table(f, {"collective", "algorithm", "status", "check_error"}))
    parts.append("<h2>Provenance</h2><pre>" + html.escape(json.dumps(prov, indent=1, default=str))
                 + "</pre></body></html>")
    return _write(path, parts)


def _start(title: str, note: str) -> list[str]:
    """The page's head, title and first note (colltune's version, when, `note`)."""
    return [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>",
            f"<h1>{html.escape(title)}</h1>",
            f"<p class='note'>colltune {__version__}, generated "
            f"{_dt.datetime.now().isoformat(timespec='seconds')}. {note}</p>"]


def _write(path: str, parts: list[str]) -> str:
    with open(path, "w") as fh:
        fh.write("\n".join(parts))
    return path
