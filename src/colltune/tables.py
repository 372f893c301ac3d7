"""The classic benchmark table (OSU-like columns, gnuplot-friendly)."""
from __future__ import annotations

import pandas as pd

from .results import declined_labels


def classic(points: pd.DataFrame) -> str:
    """size ranks avg min max stddev (us) of time to completion, per algorithm."""
    lines = []
    # the same name from two providers (SMPI's ring and colltune's, --provider both), and
    # points of other roots or datatypes, are separate rows: named in the header
    split = [k for k in ("provider", "root", "dtype") if k in points and points[k].nunique() > 1]
    keys = ["collective", "algorithm", "scenario"] + [k for k in ("nodes", "ppn") if k in points]
    for k in split:             # a failed launch records no root or datatype: its row's
        points = points.assign(**{k: points.groupby(keys, sort=False, dropna=False)[k].transform(
            lambda v: v.fillna(v.mode().iloc[0]) if v.notna().any() else v)})
    for group, g in points.groupby(keys + split, sort=False, dropna=False):
        coll, alg, scen = group[:3]
        layout = f" layout={int(group[3])}x{int(group[4])}" if "ppn" in keys else ""
        extra_keys = dict(zip(split, group[len(keys):]))
        prov = extra_keys.pop("provider", None)
        alg = f"{prov}:{alg}" if prov else alg
        more = "".join(f" {k}={v}" for k, v in extra_keys.items())
        lines.append(f"# {coll} {alg} scenario={scen}{layout}{more}")
        extra = "delay_us" if scen == "delayed" else ("tcalc_us" if scen == "overlap" else None)
        head = "# size ranks avg_us min_us max_us stddev_us median_us reps status"
        lines.append(head + (f" {extra}" if extra else "") + (" overlap_pct" if scen == "overlap" else ""))
        for r in g.sort_values(["participants", "msg_size"]).itertuples():
            if r.status == "ok" and pd.notna(r.ttc_mean_s):
                cols = (f"{r.msg_size:>10} {r.participants:>5} {r.ttc_mean_s * 1e6:>10.2f} "
                        f"{r.ttc_min_s * 1e6:>10.2f} {r.ttc_max_s * 1e6:>10.2f} "
                        f"{r.ttc_stddev_s * 1e6:>10.2f} {r.ttc_median_s * 1e6:>10.2f} "
                        f"{int(r.reps):>5} ok")
                if declined_labels(getattr(r, "labels_json", None)):
                    cols += " (declined: the library ran it)"
            else:
                cols = f"{r.msg_size:>10} {r.participants:>5}" + "        nan" * 5 + f" {0:>5} {r.status}"
            if extra:
                cols += f" {getattr(r, extra):g}"
            if scen == "overlap":
                cols += f" {r.overlap_pct:.1f}" if pd.notna(r.overlap_pct) else " nan"
            lines.append(cols)
        lines.append("")
    return "\n".join(lines)
