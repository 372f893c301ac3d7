"""The standard in-memory form of measurements (hatchet/thicket style).

``Results`` holds two frames: ``points`` (one row per measured point, with the
columns of its launch joined in) and ``runs`` (one metadata row per launch).
Every operation returns a new object; nothing mutates in place.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .store import OK, Store

# What identifies one point of the tuning space (the decision table's key).
SPACE = ["collective", "nodes", "ppn", "msg_size"]


def declined_labels(labels_json) -> bool:
    """Did the forced colltune algorithm of this record hand the call to the library?
    (A point without labels, e.g. an SMPI algorithm's beside colltune's: NaN, not text.)"""
    if not isinstance(labels_json, str) or "switched_from" not in labels_json:
        return False
    try:
        labels = json.loads(labels_json)
    except ValueError:
        return False
    return labels.get("ran") == "library" and "switched_from" in labels


def _declined_mask(points: pd.DataFrame) -> pd.Series:
    """Boolean, per point: declined_labels (all False without labels; a mask, not an
    object Series a pandas index would take for column names when there are no points)."""
    if "labels_json" not in points:
        return pd.Series(False, index=points.index, dtype=bool)
    return points["labels_json"].map(declined_labels).astype(bool)


@dataclass(frozen=True)
class Results:
    points: pd.DataFrame
    runs: pd.DataFrame

    @classmethod
    def from_store(cls, store: Store, campaign: str | None = None,
                   also_keys: Iterable[str] = ()) -> "Results":
        """The campaign's points; with also_keys (a campaign's reused points,
        Campaign.reused_keys) also those measured by other campaigns under these keys."""
        pts, rns = store.query_points(campaign), store.query_runs(campaign)
        if campaign:        # and the points it reused, recorded by Campaign
            also_keys = set(also_keys) | store.campaign_keys(campaign)
        if campaign and also_keys:
            own = {p.get("key") for p in pts}
            more = [p for p in store.query_points_by_keys(also_keys) if p.get("key") not in own]
            if more:
                pts = sorted(pts + more, key=lambda p: p["point_id"])
                have = {r["run_id"] for r in rns}
                rns = sorted(rns + store.query_runs_by_ids(
                    {p["run_id"] for p in more} - have), key=lambda r: r["run_id"])
        points = pd.DataFrame(pts)
        runs = pd.DataFrame(rns)
        if points.empty:
            points = pd.DataFrame(columns=["collective", "algorithm", "algorithm_kind", "nodes",
                                           "ppn", "msg_size", "status", "ttc_median_s", "scenario"])
        for col in ("nodes", "ppn", "nprocs", "participants", "msg_size", "bytes", "reps"):
            if col in points and points[col].notna().all():
                points[col] = points[col].astype(int)
        return cls(points, runs)

    def __len__(self) -> int:
        return len(self.points)

    def filter(self, **equals: Any) -> "Results":
        mask = pd.Series(True, index=self.points.index)
        for col, val in equals.items():
            if isinstance(val, (list, tuple, set)):
                mask &= self.points[col].isin(list(val))
            else:
                mask &= self.points[col] == val
        pts = self.points[mask].copy()
        runs = self.runs[self.runs["run_id"].isin(pts["run_id"])] if "run_id" in pts else self.runs
        return Results(pts, runs.copy())

    def ok(self) -> "Results":
        """The timed successful points, less those where a forced colltune algorithm
        declined the call and the library ran it (labels ran 'library', switched_from):
        that time is the library's, not the algorithm's, and would carry the algorithm's
        name to layouts where it does run (recursive doubling on an odd rank count)."""
        pts = self.points[(self.points["status"] == OK) & self.points["ttc_median_s"].notna()]
        return Results(pts[~_declined_mask(pts)].copy(), self.runs.copy())

    def failures(self) -> pd.DataFrame:
        return self.points[self.points["status"] != OK].copy()

    def decision_points(self) -> "Results":
        """The points a decision table is about: the plain scenario on the whole
        communicator. A delayed or overlap sweep, or a sub-communicator size
        (bench --procs), has other keys than SPACE and must not be compared as one."""
        pts = self.points
        mask = pd.Series(True, index=pts.index) if "scenario" not in pts else pts["scenario"] == "plain"
        if "participants" in pts and "nprocs" in pts:
            mask &= pts["participants"].isna() | (pts["participants"] == pts["nprocs"])
        return Results(pts[mask].copy(), self.runs.copy())

    def of_setup(self, root: int | None = None, dtype: str | None = None) -> "Results":
        """The points of one root and one datatype per collective: those given, where a
        collective was measured at several; an error naming them where it was and none is
        given. A report had compared one algorithm at root 0 with the selector at root 5
        (points of one campaign; the decision key is collective, layout and size)."""
        from .errors import InputError
        pts = self.points
        for col, want, opt in (("root", root, "--root"), ("dtype", dtype, "--dtype")):
            if col not in pts or pts.empty:
                continue
            keep = pd.Series(True, index=pts.index)
            for coll, g in pts.groupby("collective"):
                seen = sorted(g[col].dropna().unique(), key=str)
                if len(seen) < 2:
                    continue
                shown = ", ".join(str(int(v)) if col == "root" else str(v) for v in seen)
                if want is None:
                    raise InputError(f"{coll} was measured at {col}s {shown} in these results: "
                                     f"one is compared at a time ({opt})")
                if want not in seen:        # it would drop the collective without a word
                    raise InputError(f"{opt} {want}: {coll} was measured at {col}s {shown} only")
                # a failed launch records none: it stays
                keep &= ~pts.index.isin(g.index) | pts[col].isna() | (pts[col] == want)
            pts = pts[keep]
        return Results(pts.copy(), self.runs.copy())

    def algorithms(self) -> "Results":
        """Only real algorithms (not library default selectors)."""
        return self.filter(algorithm_kind="algorithm")

    def arms(self, pairs: set[tuple[str, str]]) -> "Results":
        """Only the points of these (provider, algorithm label) pairs, of any kind:
        what a decision table may choose (providers.base.Provider.arms)."""
        keys = list(zip(self.points["provider"], self.points["algorithm"])) \
            if "provider" in self.points else []
        pts = self.points[pd.Series([k in pairs for k in keys], index=self.points.index,
                                    dtype=bool)]
        return Results(pts.copy(), self.runs.copy())

    def best(self, selectors: bool = False) -> pd.DataFrame:
        """Per point of the space, the fastest successful algorithm (ties: by name);
        selectors=True: library selectors compete too."""
        ok = (self if selectors else self.algorithms()).ok().points
        if ok.empty:
            return ok
        ok = ok.sort_values(SPACE + ["ttc_median_s", "algorithm"])
        return ok.groupby(SPACE, as_index=False).first()

    def times(self) -> pd.DataFrame:
        """Pivot: one row per point of the space, one column per algorithm/selector."""
        ok = self.ok().points
        return ok.pivot_table(index=SPACE, columns="algorithm", values="ttc_median_s",
                              aggfunc="min")

    def records(self) -> list[dict]:
        out = []
        for rec in self._typed().replace({np.nan: None}).to_dict(orient="records"):
            labels = rec.pop("labels_json", None)
            rec["labels"] = json.loads(labels) if labels else None
            out.append(rec)
        return out

    def _typed(self) -> pd.DataFrame:
        """The points with counts as integers and `valid` as a boolean (SQLite keeps
        them as REAL); missing values stay missing."""
        pts = self.points.copy()
        for col in INTEGER_COLUMNS:
            if col in pts:
                pts[col] = pd.to_numeric(pts[col], errors="coerce").astype("Int64")
        if "valid" in pts:
            pts["valid"] = pts["valid"].map(lambda v: None if pd.isna(v) else bool(v)).astype(object)
        return pts

    def to_csv(self, path_or_buf: Any) -> None:
        self._typed().to_csv(path_or_buf, index=False)

    def to_jsonl(self, fh: Any) -> None:
        for rec in self.records():
            fh.write(json.dumps(rec, default=_json_default) + "\n")


# columns that hold whole numbers (results export writes them as such)
INTEGER_COLUMNS = ("nodes", "ppn", "nprocs", "participants", "msg_size", "bytes", "count", "root",
                   "warmup", "reps", "late_starts", "exit_code")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    return str(obj)
