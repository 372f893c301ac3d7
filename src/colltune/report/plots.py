"""Matplotlib figures of a campaign, returned as PNG bytes."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display: reports are rendered on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..sizes import human_bytes  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def best_map(best: pd.DataFrame, collective: str) -> bytes:
    """Best algorithm over message size (x) and nodes x ppn (y)."""
    g = best[best["collective"] == collective]
    sizes = sorted(g["msg_size"].unique())
    layouts = sorted({(int(n), int(p)) for n, p in zip(g["nodes"], g["ppn"])})
    algs = sorted(g["algorithm"].unique())
    code = {a: i for i, a in enumerate(algs)}
    grid = np.full((len(layouts), len(sizes)), np.nan)
    for r in g.itertuples():
        grid[layouts.index((int(r.nodes), int(r.ppn))), sizes.index(r.msg_size)] = code[r.algorithm]
    cmap = plt.get_cmap("tab20", max(len(algs), 1))
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(sizes)), 1.0 + 0.5 * len(layouts)))
    ax.imshow(grid, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(algs) - 0.5)
    ax.set_xticks(range(len(sizes)), [human_bytes(int(s)) for s in sizes], rotation=60, fontsize=8)
    ax.set_yticks(range(len(layouts)), [f"{n} nodes x {p}" for n, p in layouts], fontsize=8)
    ax.set_xlabel("message size (bytes per rank)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(code[a])) for a in algs]
    ax.legend(handles, algs, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"{collective}: fastest algorithm")
    return _png(fig)


def times_by_size(points: pd.DataFrame, collective: str, nodes: int, ppn: int,
                  baselines: list[str]) -> bytes:
    g = points[(points["collective"] == collective) & (points["nodes"] == nodes)
               & (points["ppn"] == ppn)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    cmap = plt.get_cmap("tab20")
    for i, (alg, a) in enumerate(sorted(g.groupby("algorithm"), key=lambda t: t[0])):
        a = a.sort_values("msg_size")
        a = a[a["msg_size"] > 0]
        style = dict(lw=2.5, ls="--", color="black" if alg == (baselines or [""])[0] else "grey") \
            if alg in baselines else dict(lw=1, color=cmap(i % 20))
        ax.plot(a["msg_size"], a["ttc_median_s"] * 1e6, marker=".", label=alg, **style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("time to completion (us, median)")
    ax.set_title(f"{collective} on {nodes} nodes x {ppn} (dashed: library selectors)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _png(fig)


def speedup_by_size(cmp: pd.DataFrame, collective: str, baselines: list[str]) -> bytes:
    g = cmp[cmp["collective"] == collective]
    fig, axes = plt.subplots(1, len(baselines), figsize=(5 * len(baselines), 3.5), squeeze=False)
    for ax, base in zip(axes[0], baselines):
        for (n, p), h in g.groupby(["nodes", "ppn"]):
            h = h.sort_values("msg_size")
            h = h[h["msg_size"] > 0]
            ax.plot(h["msg_size"], h[f"{base}_speedup"], marker="o", ms=3, label=f"{n}x{p}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes per rank)")
        ax.set_ylabel(f"T({base}) / T(best)")
        ax.set_title(f"{collective}: speedup of best over '{base}'")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="nodes x ppn", title_fontsize=7)
    return _png(fig)
