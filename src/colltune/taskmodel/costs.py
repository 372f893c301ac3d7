"""Task costs: measured once per (platform, layout, collective, parameters that
matter, segment bytes, segments), kept in the results store (an additive table
``taskmodel_pipelines`` in the same SQLite file), reused across message sizes.

A measurement is one taskbench launch of a whole task pipeline (docs/taskmodel.md):
ib(0), sbib after a real ib(0), the steady tasks until their cost stops
changing, the drain. The cost of a task on node i is its leader's time (what
the next task waits for); for the last task of the pipeline it is the max over
the node's ranks, since the call completes when the non-leaders have their data
(measured: sb(u-1) takes 0.76 us on the leaders, 128 us on the others).
"""
from __future__ import annotations

import json
import time

from ..store import point_key
from .model import depth, pipeline_tasks

# Segments of the short pipeline that yields fill, steady and drain costs.
PIPE_SEGMENTS = {"bcast": 6, "allreduce": 7}
# Parameters each collective's tasks depend on (fs enters through segment bytes).
RELEVANT = {"bcast": ("imod", "ibalg", "ibs", "smod", "salg", "ss"),
            "allreduce": ("imod", "ibalg", "iralg", "ibs", "irs", "smod", "sralg", "salg",
                          "sbalg", "ss")}

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


def node_costs(rec: dict, last: bool) -> list[float]:
    """Per-node cost of one task record (leader's time, or max over the node if last)."""
    nn = rec["nodes"]
    out = [0.0] * nn
    for t, lead, node in zip(rec["times"], rec["leader"], rec["node"]):
        if last or lead:
            out[node] = max(out[node], float(t))
    return out


class TaskCosts:
    """Measured pipelines in the store; measures what is missing through a TaskRunner."""

    def __init__(self, store, runner, provenance: dict):
        self.db, self.runner = store.db, runner
        self.platform = provenance.get("platform")
        self.sha = provenance.get("platform_sha256")
        self.db.executescript(_DDL)
        self.measured = 0          # pipelines measured by this object
        self.bench_s = 0.0         # simulated seconds they cost
        self.reused = 0

    def _relevant(self, coll: str, params: dict) -> dict:
        return {k: int(params[k]) for k in RELEVANT[coll] if k in params}

    def pipeline(self, coll: str, nodes: int, ppn: int, params: dict, seg_bytes: int,
                 u: int) -> list[list[float]]:
        rel = self._relevant(coll, params)
        key = point_key(kind="taskmodel-pipeline", sha=self.sha, coll=coll, nodes=nodes,
                        ppn=ppn, params=rel, seg=seg_bytes, u=u)
        row = self.db.execute("SELECT tasks_json FROM taskmodel_pipelines WHERE key=?",
                              (key,)).fetchone()
        if row:
            self.reused += 1
            return [t["node_costs"] for t in json.loads(row[0])]
        tasks = pipeline_tasks(coll, u)
        # fs = seg_bytes and exactly u segments of it: the launch measures this pipeline.
        t0 = time.monotonic()
        recs = self.runner.launch(coll, nodes, ppn, seg_bytes * u, {**rel, "fs": seg_bytes},
                                  tasks=tasks)
        recs = [r for r in recs if r["kind"] == "task" and r["rep"] == 0]
        if len(recs) != len(tasks) or recs[0]["segments"] != u:
            raise RuntimeError(f"taskbench returned {len(recs)} task records with "
                               f"{recs[0]['segments'] if recs else '?'} segments for {tasks}")
        out = [{"task": r["task"], "max_leader": r["max_leader"], "max_all": r["max_all"],
                "node_costs": node_costs(r, i == len(recs) - 1)} for i, r in enumerate(recs)]
        # Simulated seconds spent: warmup + timed repetition of every task.
        bench = 2 * sum(r["max_all"] for r in recs)
        with self.db:
            self.db.execute(
                "INSERT INTO taskmodel_pipelines VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, self.platform, self.sha, coll, nodes, ppn, json.dumps(rel), seg_bytes, u,
                 json.dumps(out), bench, time.monotonic() - t0, time.time()))
        self.measured += 1
        self.bench_s += bench
        return [t["node_costs"] for t in out]

    def inputs(self, coll: str, nodes: int, ppn: int, params: dict, nbytes: int, u: int) -> dict:
        """Keyword arguments of model.predict for a u-segment call of nbytes."""
        fs = int(params.get("fs", 0))
        if u == 1:
            return {"short": self.pipeline(coll, nodes, ppn, params, nbytes, 1)}
        if u < depth(coll):
            return {"short": self.pipeline(coll, nodes, ppn, params, fs, u)}
        return {"pipe": self.pipeline(coll, nodes, ppn, params, fs, PIPE_SEGMENTS[coll])}

    def spent(self) -> float:
        """Simulated seconds of every pipeline stored for this platform."""
        row = self.db.execute("SELECT COALESCE(SUM(bench_s),0) FROM taskmodel_pipelines "
                              "WHERE platform_sha256 IS ?", (self.sha,)).fetchone()
        return float(row[0])
