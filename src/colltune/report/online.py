"""The online tuning section of `colltune report` (docs/online.md): per block the
selection probabilities over runs ("progress of selection probabilities"), the
run-by-run collective time, and the current choice against the offline best where
the store has benchmark points for the block."""
from __future__ import annotations

import html
import json
import os

import pandas as pd

from . import _img, _table, plots

plt = plots.plt


def state_dirs(results) -> list[str]:
    """The state dirs of a campaign's online records."""
    runs = results.runs
    if runs.empty or "scenario" not in runs or not (runs["scenario"] == "online").any():
        return []
    dirs = []
    for text in runs.loc[runs["scenario"] == "online", "settings_json"].dropna():
        d = json.loads(text).get("state_dir")
        if d and d not in dirs:
            dirs.append(d)
    return dirs


def probability_figure(history: list[dict], key: tuple, final: dict) -> bytes:
    arms = sorted({a for r in history for a in r["probs"].get(key, {})} | set(final))
    x = list(range(1, len(history) + 2))
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for arm in arms:
        ys = [r["probs"].get(key, {}).get(arm) for r in history] + [final.get(arm)]
        ax.plot(x, [float("nan") if y is None else y for y in ys], marker=".", label=arm)
    ax.set_xlabel("run (last point: the state after it)")
    ax.set_ylabel("selection probability")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{key[0]} {key[1]}x{key[2]} size class {key[3]}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return plots._png(fig)


def time_figure(history: list[dict]) -> bytes:
    fig, ax = plt.subplots(figsize=(6.5, 3))
    ax.plot(range(1, len(history) + 1), [r["coll_time_s"] * 1e3 for r in history], marker="o")
    ax.set_xlabel("run")
    ax.set_ylabel("time in intercepted collectives (ms)")
    ax.grid(True, alpha=0.3)
    return plots._png(fig)


def offline_best(results_all, block) -> tuple[str, float] | None:
    """(best algorithm, time of the state's choice / best) from plain benchmark points of
    the block's layout and size class, averaged over the measured sizes; None when
    none is known or the choice was not measured."""
    from ..online.arms import arm_label
    from ..online.state import class_range
    pts = results_all.ok().points
    if pts.empty:
        return None
    lo, hi = class_range(block.cls)
    g = pts[(pts["scenario"] == "plain") & (pts["collective"] == block.collective)
            & (pts["nodes"] == block.nodes) & (pts["ppn"] == block.ppn)
            & (pts["msg_size"] >= lo) & ((pts["msg_size"] <= hi) if hi else True)]
    if g.empty:
        return None
    t = g.pivot_table(index="msg_size", columns="algorithm", values="ttc_median_s", aggfunc="min")
    choice = arm_label(block.best().arm)
    mean = t.mean()
    if choice not in t:
        return str(mean.idxmin()), float("nan")
    return str(mean.idxmin()), float((t[choice] / t.min(axis=1)).mean())


def online_sections(store, results) -> tuple[str, ...]:
    """HTML sections for the campaign's online state dirs (none: ())."""
    from ..online.history import runs
    from ..online.state import load
    from ..online.update import samples_files
    from ..results import Results
    dirs = state_dirs(results)
    if not dirs:
        return ()
    everything = Results.from_store(store)
    parts = ["<h2 id='online'>Online tuning</h2><p class='note'>Probabilities each run drew "
             "with (from its samples file) and the state after the last run; collective time "
             "per run from the samples (sampled calls at their cost, later calls at the cost "
             "of the arm then run). docs/online.md.</p>"]
    for d in dirs:
        path = os.path.join(d, "state.txt")
        if not os.path.exists(path):
            parts.append(f"<p>{html.escape(d)}: no state.txt</p>")
            continue
        st = load(path)
        history = runs([s for s in samples_files(d) if s.fingerprint == st.fingerprint])
        parts.append(f"<h3>{html.escape(d)}</h3><p>{st.run_count} runs, {len(st.blocks)} blocks, "
                     f"fingerprint {html.escape(st.fingerprint)}</p>")
        if history:
            parts.append(_img(time_figure(history), "collective time per run"))
        rows = []
        for b in st.blocks.values():
            off = offline_best(everything, b)
            best = b.best()
            rows.append({"block": b.label(), "source": b.source, "calls": b.calls,
                         "choice": best.arm, "p": best.p, "mean_us": best.mean * 1e6 if best.n else None,
                         "offline_best": off[0] if off else "", "choice/offline": off[1] if off else None})
        parts.append(_table(pd.DataFrame(rows), {"block", "source", "choice", "offline_best"}))
        for b in st.blocks.values():
            if b.source == "measured" and any(b.key in r["probs"] for r in history):
                parts.append(_img(probability_figure(history, b.key, {a.arm: a.p for a in b.arms}),
                                  f"progress of selection probabilities {b.label()}"))
    return tuple(parts)
