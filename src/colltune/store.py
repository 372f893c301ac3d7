"""SQLite results store: one metadata row per launch (``runs``), one row per
measured point (``measurements``). Every stage reads and writes through here.

Points carry a ``key`` (hash of everything that defines the measurement) so a
campaign that is run again skips what is already measured: a killed campaign
loses at most the launches in flight.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from typing import Any, Iterable, Mapping

SCHEMA_VERSION = 1

RUN_COLUMNS = [
    "campaign", "started", "finished", "status", "backend", "platform", "platform_sha256",
    "provider", "mpi_library", "mpi_version", "library_version", "collective", "algorithm",
    "algorithm_kind", "nodes", "ppn", "nprocs", "scenario", "settings_json",
    "colltune_version", "exit_code", "error", "wall_s", "command",
]

POINT_COLUMNS = [
    "key", "status", "participants", "msg_size", "bytes", "count", "dtype", "root",
    "delay_us", "delayed_rank", "tcalc_us", "warmup", "reps", "late_starts",
    "ttc_median_s", "ttc_mean_s", "ttc_min_s", "ttc_max_s", "ttc_stddev_s", "rse_median",
    "rank_max_mean_s", "rank_mean_mean_s", "pure_median_s", "overlap_pct", "valid",
    "check_error", "labels_json",
]

# Statuses of a point. Only "ok" points take part in "best".
OK, WRONG, CRASHED, TIMEOUT, ERROR = "ok", "wrong_result", "crashed", "timeout", "error"
FINAL_STATUSES = (OK, WRONG, CRASHED, TIMEOUT, ERROR)

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS runs (
  run_id INTEGER PRIMARY KEY AUTOINCREMENT,
  {", ".join(c + " TEXT" if c not in ("started", "finished", "wall_s", "nodes", "ppn", "nprocs", "exit_code") else c + " REAL" for c in RUN_COLUMNS)}
);
CREATE TABLE IF NOT EXISTS measurements (
  point_id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(run_id),
  {", ".join(c + " TEXT" if c in ("key", "status", "dtype", "delayed_rank", "check_error", "labels_json") else c + " REAL" for c in POINT_COLUMNS)}
);
CREATE INDEX IF NOT EXISTS measurements_key ON measurements(key);
CREATE INDEX IF NOT EXISTS runs_campaign ON runs(campaign);
-- points a campaign reused from other campaigns (same key): part of its results
CREATE TABLE IF NOT EXISTS campaign_points (campaign TEXT, key TEXT, added REAL,
                                            PRIMARY KEY (campaign, key));
"""
_TABLES = {"meta", "runs", "measurements", "campaign_points", "sqlite_sequence"}


def point_key(**fields: Any) -> str:
    """Stable identity of a measurement: what was measured, where and how."""
    canon = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:32]


class Store:
    def __init__(self, path: str, create: bool = True, readonly: bool = False):
        """create False: the store must exist (commands that only read it: a mistyped
        path is an error, not an empty store). readonly (implies create False): opened
        read-only, so reading an older store never adds the tables of this schema to it
        (the benchmarks' --no-run reprints of committed stores). A file that is not a
        colltune store is refused before anything is written to it."""
        from .errors import InputError
        self.path = path
        create = create and not readonly
        if os.path.exists(path) and not os.path.isfile(path):
            raise InputError(f"{path}: not a file (the results store is an SQLite file)")
        if not os.path.exists(path) and not create:
            raise InputError(f"{path}: no such results store")
        if os.path.dirname(path) and not readonly:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        # Campaign workers write their own launches (under the campaign's lock).
        self.db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro" if readonly else path,
                                  check_same_thread=False, uri=readonly)
        self.db.row_factory = sqlite3.Row
        try:
            try:
                tables = {r[0] for r in self.db.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
            except sqlite3.OperationalError:
                if not readonly:
                    raise
                # a WAL store in a folder this user cannot write (no -shm to create):
                # read the file as it is
                self.db.close()
                self.db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro&immutable=1",
                                          check_same_thread=False, uri=True)
                self.db.row_factory = sqlite3.Row
                tables = {r[0] for r in self.db.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise InputError(f"{path}: not a readable SQLite results store ({exc})") from None
        if tables and not {"meta", "runs", "measurements"} <= tables:
            self.db.close()
            raise InputError(f"{path}: an SQLite file of something else (tables: "
                             f"{', '.join(sorted(tables - _TABLES)) or ', '.join(sorted(tables))}), "
                             f"not a colltune results store")
        if readonly:
            if "campaign_points" not in tables:       # a store from before it: none reused
                self.db.execute(_DDL[_DDL.index("CREATE TABLE IF NOT EXISTS campaign_points"):]
                                .replace("CREATE TABLE", "CREATE TEMP TABLE"))
            return
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_DDL)
        row = self.db.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.commit()
        elif int(row[0]) != SCHEMA_VERSION:
            raise RuntimeError(f"{path}: results store schema {row[0]}, this colltune reads "
                               f"{SCHEMA_VERSION}; use another --store")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def done_keys(self, keys: Iterable[str]) -> set[str]:
        """Which of these keys are stored."""
        return set(self.statuses(keys))

    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        """The stored status of each of these keys that is stored."""
        return {r["key"]: r["status"] for r in
                self._rows_in("SELECT key, status FROM measurements", "key", keys)}

    def lacking_keys(self, keys: Iterable[str], need_time: bool,
                     need_check: Iterable[str] = ()) -> set[str]:
        """Stored ``ok`` points that do not answer what a run asks for, so they are
        measured again: without a time (measured with ``--check only``) when
        ``need_time``, unchecked (``valid`` null: ``--check none``) among ``need_check``.
        Failures (any other status) are never lacking: they are what the run would find."""
        need_check = set(need_check)
        lacking: set[str] = set()
        for r in self._rows_in("SELECT key, status, ttc_median_s, valid FROM measurements",
                               "key", keys):
            if r["status"] != OK:
                continue
            if (need_time and r["ttc_median_s"] is None) or \
                    (r["key"] in need_check and r["valid"] is None):
                lacking.add(r["key"])
        return lacking

    def mismatched_keys(self, keys: Iterable[str], want: Mapping[str, str | None],
                        unknown_when_absent: Iterable[str] = ()) -> set[str]:
        """Stored points whose labels differ from `want` (Provider.reuse_labels): measured
        in another way than the run would, so measured again. A label missing from a
        point counts as None, except those of `unknown_when_absent`, which are not held
        against it."""
        if not want:
            return set()
        unknown = set(unknown_when_absent)
        out: set[str] = set()
        for r in self._rows_in("SELECT key, labels_json FROM measurements", "key", keys):
            try:
                labels = json.loads(r["labels_json"] or "{}")
            except ValueError:
                labels = {}
            if any(labels.get(k) != v for k, v in want.items()
                   if k in labels or k not in unknown):
                out.add(r["key"])
        return out

    def keys_run_otherwise(self, keys: Iterable[str], want: Mapping[str, Any]) -> dict[str, str]:
        """Stored points whose run recorded another value of a setting in `want`
        (Backend.run_settings; settings_json), key -> the first such setting. A setting
        the run did not record (stored before it was) is not held against the point."""
        if not want:
            return {}
        out: dict[str, str] = {}
        canon = {k: json.dumps(v, sort_keys=True) for k, v in want.items()}
        for r in self._rows_in("SELECT m.key, r.settings_json FROM measurements m "
                               "JOIN runs r ON r.run_id = m.run_id", "m.key", keys):
            try:
                got = json.loads(r["settings_json"] or "{}")
            except ValueError:
                got = {}
            for k, v in canon.items():
                if k in got and json.dumps(got[k], sort_keys=True) != v:
                    out[r["key"]] = k
                    break
        return out

    def forget(self, keys: Iterable[str]) -> None:
        """Drop points (e.g. failures to be retried)."""
        for k in keys:
            self.db.execute("DELETE FROM measurements WHERE key=?", (k,))
        self.db.commit()

    def add_run(self, run: Mapping[str, Any], points: Iterable[Mapping[str, Any]],
                replace: Iterable[str] = ()) -> int:
        """Write one launch and its points in a single transaction.

        ``replace``: keys of stored points this launch measured again because they lacked
        what the run asked for (Store.lacking_keys). The new point supersedes the stored
        one, whose campaign keeps the key (it sees the new point). Except: a passed check
        (``--check only``, no time) of a timed unchecked point is added to that point
        (``valid`` set), and a timed unchecked point keeps a passed check stored before."""
        row = {c: run.get(c) for c in RUN_COLUMNS}
        row.setdefault("finished", time.time())
        replace = set(replace)
        with self.db:
            cur = self.db.execute(
                f"INSERT INTO runs ({','.join(RUN_COLUMNS)}) VALUES ({','.join('?' * len(RUN_COLUMNS))})",
                [row[c] for c in RUN_COLUMNS])
            run_id = cur.lastrowid
            for p in points:
                p = dict(p)
                if p.get("key") in replace and not self._supersede(run.get("campaign"), p):
                    continue
                vals = [p.get(c) for c in POINT_COLUMNS]
                vals = [int(v) if isinstance(v, bool) else v for v in vals]
                self.db.execute(
                    f"INSERT INTO measurements (run_id,{','.join(POINT_COLUMNS)}) "
                    f"VALUES (?,{','.join('?' * len(POINT_COLUMNS))})", [run_id, *vals])
        return run_id

    def _supersede(self, campaign: str | None, p: dict) -> bool:
        """Make room for point p, measured again (add_run's ``replace``), inside add_run's
        transaction; False when p was merged into the stored point instead (nothing to
        insert). p may get the stored point's passed check."""
        old = [dict(r) for r in self.db.execute(
            "SELECT m.point_id, m.status, m.ttc_median_s, m.valid, r.campaign FROM measurements m "
            "JOIN runs r USING(run_id) WHERE m.key=?", (p["key"],))]
        timed = [o for o in old if o["status"] == OK and o["ttc_median_s"] is not None]
        checked = [o for o in old if o["status"] == OK and o["valid"] is not None]
        if p.get("status") == OK and p.get("ttc_median_s") is None and p.get("valid") and timed:
            # a passed check of a timed point: the point is now a checked one
            self.db.execute("UPDATE measurements SET valid=? WHERE point_id=?",
                            (int(bool(p["valid"])), timed[0]["point_id"]))
            if campaign and timed[0]["campaign"] != campaign:
                self._link(campaign, [p["key"]])
            return False
        if p.get("status") == OK and p.get("valid") is None and checked:
            p["valid"] = checked[0]["valid"]
        for o in old:
            self.db.execute("DELETE FROM measurements WHERE point_id=?", (o["point_id"],))
            if o["campaign"] and o["campaign"] != campaign:      # it keeps the point
                self._link(o["campaign"], [p["key"]])
        return True

    def query_runs(self, campaign: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM runs", []
        if campaign:
            q, args = q + " WHERE campaign=?", [campaign]
        return [dict(r) for r in self.db.execute(q + " ORDER BY run_id", args)]

    _POINTS = ("SELECT m.*, r.campaign, r.backend, r.platform, r.platform_sha256, r.provider, "
               "r.mpi_library, r.mpi_version, r.collective, r.algorithm, r.algorithm_kind, "
               "r.nodes, r.ppn, r.nprocs, r.scenario FROM measurements m JOIN runs r USING(run_id)")

    def query_points(self, campaign: str | None = None) -> list[dict]:
        q, args = self._POINTS, []
        if campaign:
            q, args = q + " WHERE r.campaign=?", [campaign]
        return [dict(r) for r in self.db.execute(q + " ORDER BY m.point_id", args)]

    def _rows_in(self, select: str, column: str, values: Iterable) -> list[dict]:
        """Rows of `select WHERE column IN values`, queried 500 values at a time (SQLite's
        limit on bound parameters)."""
        values, out = sorted(set(values)), []
        for i in range(0, len(values), 500):
            chunk = values[i:i + 500]
            out += [dict(r) for r in self.db.execute(
                f"{select} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk)]
        return out

    def query_points_by_keys(self, keys: Iterable[str]) -> list[dict]:
        """The points stored under these keys, whichever campaign measured them."""
        return sorted(self._rows_in(self._POINTS, "m.key", keys), key=lambda r: r["point_id"])

    def query_runs_by_ids(self, run_ids: Iterable[int]) -> list[dict]:
        return sorted(self._rows_in("SELECT * FROM runs", "run_id", run_ids),
                      key=lambda r: r["run_id"])

    def campaigns(self) -> list[str]:
        """Campaign names, the most recently active last (launches or reused points)."""
        return [r[0] for r in self.db.execute(
            "SELECT campaign FROM (SELECT campaign, started AS t FROM runs UNION ALL "
            "SELECT campaign, added AS t FROM campaign_points) GROUP BY campaign "
            "ORDER BY MAX(t), campaign")]

    def add_campaign_keys(self, campaign: str, keys: Iterable[str]) -> None:
        """Record points of other campaigns that this one reused (its results include them)."""
        self._link(campaign, keys)
        self.db.commit()

    def _link(self, campaign: str, keys: Iterable[str]) -> None:
        """campaign's results include these keys (inside the caller's transaction)."""
        now = time.time()
        self.db.executemany("INSERT OR IGNORE INTO campaign_points VALUES (?, ?, ?)",
                            [(campaign, k, now) for k in keys])

    def campaign_keys(self, campaign: str) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM campaign_points WHERE campaign=?",
                                              (campaign,))}
