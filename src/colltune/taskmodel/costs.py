"""Task costs: measured once per (platform, layout, collective, parameters that
matter, segment bytes, segments), kept in the results store (an additive table
``taskmodel_pipelines`` in the same SQLite file), reused across message sizes.

A measurement is one taskbench launch of a whole task pipeline (docs/taskmodel.md):
ib(0), sbib after a real ib(0), the steady tasks until their cost stops
changing, the drain. Two cost vectors of a task are kept:
- "leader": the paper's, the node leader's time (max_leader over nodes); for the
  last task the max over the node's ranks, since the call completes when the
  non-leaders have their data (measured: sb(u-1) takes 0.76 us on the leaders,
  128 us on the others);
- "rank": every rank's own time (the model then takes the max over ranks of
  the sums). colltune's tasks end when each op is *locally* complete, so a
  leader's sb ends when its sends are posted while its node's ranks still
  receive: on 2x4, 1 MiB bcast the non-leaders take 16.7 us per sbib vs 11.5 us
  on the leader, and the leader-only sum is 36 % under the whole call. A
  per-node max per task would count a rank's waiting twice (it is also in the
  next task of the ranks it waits for); per-rank sums do not.
"""
from __future__ import annotations

import json
import time

from ..store import point_key
from . import heuristics as heuristics_mod
from .model import depth, pipeline_tasks

# Segments of the short pipeline that yields fill, steady and drain costs.
PIPE_SEGMENTS = {"bcast": 6, "allreduce": 7}
# --heuristics, H1 (docs/taskmodel.md): pipelines with 3 steady tasks. Measured
# on small (41 pipelines of the default length): 35 stable by the 3rd steady
# task; the others never stabilise within 12 segments either (re-measuring them
# longer cost more and predicted worse), so the last two are used as by default.
PIPE_SEGMENTS_SHORT = {"bcast": 4, "allreduce": 6}
# Parameters each collective's tasks depend on (fs enters through segment bytes).
RELEVANT = {"bcast": ("imod", "ibalg", "ibs", "smod", "salg", "ss"),
            "allreduce": ("imod", "ibalg", "iralg", "ibs", "irs", "smod", "sralg", "salg",
                          "sbalg", "ss", "iaalg")}

_DDL = """
CREATE TABLE IF NOT EXISTS taskmodel_pipelines (
  key TEXT PRIMARY KEY, platform TEXT, platform_sha256 TEXT, collective TEXT,
  nodes INTEGER, ppn INTEGER, params_json TEXT, seg_bytes INTEGER, segments INTEGER,
  tasks_json TEXT, bench_s REAL, wall_s REAL, created REAL);
CREATE TABLE IF NOT EXISTS taskmodel_whole (
  key TEXT PRIMARY KEY, platform TEXT, collective TEXT, nodes INTEGER, ppn INTEGER,
  params_json TEXT, bytes INTEGER, completion_s REAL, ran TEXT, bench_s REAL, wall_s REAL,
  created REAL);
"""


COST_KINDS = ("rank", "leader")


def leader_costs(rec: dict, last: bool) -> list[float]:
    """Per-node cost of one task record: the leader's time (max over the node if last)."""
    out = [0.0] * rec["nodes"]
    for t, lead, node in zip(rec["times"], rec["leader"], rec["node"]):
        if last or lead:
            out[node] = max(out[node], float(t))
    return out


def bench_seconds(rank_costs: list[list[float]]) -> float:
    """Simulated seconds a pipeline launch spends: warm-up + one timed repetition,
    each as long as its slowest rank's back-to-back tasks (the same measure as a
    whole call's completion, after the same barrier)."""
    return 2 * max(sum(col) for col in zip(*rank_costs))


class TaskCosts:
    """Measured pipelines in the store; measures what is missing through a TaskRunner."""

    def __init__(self, store, runner, provenance: dict, cost: str = "rank",
                 heuristics=False):
        if cost not in COST_KINDS:
            raise ValueError(f"task cost {cost!r}: expected one of {', '.join(COST_KINDS)}")
        self.db, self.runner, self.cost = store.db, runner, cost
        self.store, self.provenance = store, provenance
        self.active = heuristics_mod.parse(heuristics)
        self.heuristics = sorted(self.active)   # provenance: the names in effect
        self.platform = provenance.get("platform")
        self.sha = provenance.get("platform_sha256")
        self.db.executescript(_DDL)
        self.measured = 0          # pipelines measured by this object
        self.bench_s = 0.0         # simulated seconds they cost
        self.reused = 0
        self.used: set[str] = set()  # keys of the pipelines this object's predictions read

    def _relevant(self, coll: str, params: dict) -> dict:
        return {k: int(params[k]) for k in RELEVANT[coll] if k in params}

    def pipeline(self, coll: str, nodes: int, ppn: int, params: dict, seg_bytes: int,
                 u: int, nbytes: int | None = None) -> list[list[float]]:
        """Costs of the tasks of a u-segment call of nbytes (default u * seg_bytes)."""
        nbytes = seg_bytes * u if nbytes is None else nbytes
        rel = self._relevant(coll, params)
        key = point_key(kind="taskmodel-pipeline", sha=self.sha, coll=coll, nodes=nodes,
                        ppn=ppn, params=rel, seg=seg_bytes, u=u, bytes=nbytes)
        row = self.db.execute("SELECT tasks_json FROM taskmodel_pipelines WHERE key=?",
                              (key,)).fetchone()
        self.used.add(key)
        if row:
            self.reused += 1
            return [t[self.cost] for t in json.loads(row[0])]
        tasks = pipeline_tasks(coll, u, params)
        t0 = time.monotonic()
        recs = self.runner.launch(coll, nodes, ppn, nbytes, {**rel, "fs": seg_bytes},
                                  tasks=tasks)
        recs = [r for r in recs if r["kind"] == "task" and r["rep"] == 0]
        if len(recs) != len(tasks) or recs[0]["segments"] != u:
            raise RuntimeError(f"taskbench returned {len(recs)} task records with "
                               f"{recs[0]['segments'] if recs else '?'} segments for {tasks}")
        out = [{"task": r["task"], "max_leader": r["max_leader"], "max_all": r["max_all"],
                "leader": leader_costs(r, i == len(recs) - 1), "rank": [float(t) for t in r["times"]]}
               for i, r in enumerate(recs)]
        bench = bench_seconds([t["rank"] for t in out])
        with self.db:
            self.db.execute(
                "INSERT INTO taskmodel_pipelines VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, self.platform, self.sha, coll, nodes, ppn, json.dumps(rel), seg_bytes, u,
                 json.dumps(out), bench, time.monotonic() - t0, time.time()))
        self.measured += 1
        self.bench_s += bench
        return [t[self.cost] for t in out]

    def inputs(self, coll: str, nodes: int, ppn: int, params: dict, nbytes: int, u: int) -> dict:
        """Keyword arguments of model.predict for a u-segment call of nbytes."""
        fs = int(params.get("fs", 0))
        if u == 1:   # one segment of the whole message: any fs >= nbytes shares it
            return {"short": self.pipeline(coll, nodes, ppn, params, nbytes, 1)}
        if u < depth(coll, params):   # exact short call (its last segment may be partial)
            return {"short": self.pipeline(coll, nodes, ppn, params, fs, u, nbytes)}
        segs = (PIPE_SEGMENTS_SHORT if "H1" in self.active else PIPE_SEGMENTS)[coll]
        return {"pipe": self.pipeline(coll, nodes, ppn, params, fs, segs)}

    def spent(self, keys) -> float:
        """Simulated seconds the given stored pipelines cost to measure."""
        keys = list(keys)
        row = self.db.execute(f"SELECT COALESCE(SUM(bench_s),0) FROM taskmodel_pipelines "
                              f"WHERE key IN ({','.join('?' * len(keys))})", keys).fetchone()
        return float(row[0])
