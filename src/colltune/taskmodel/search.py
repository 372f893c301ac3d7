"""The configuration space of HAN parameters, model predictions over it, and
measured whole HAN calls (the ground truth the model is checked against)."""
from __future__ import annotations

import itertools
import json
import time

from ..store import point_key
from .model import predict, segments

# Default space (docs/taskmodel.md): segment size x inter-node module x intra-node
# module x inter-node tree; other parameters keep their catalogue defaults.
# ibalg only matters with imod=1 (colltune trees), so imod=0 takes one value.
SPACE = {"fs": (131072, 524288), "imod": (0, 1), "smod": (0, 1), "ibalg": (1, 3)}


def configurations(coll: str, space: dict | None = None) -> list[dict]:
    space = space or SPACE
    names = list(space)
    out, seen = [], set()
    for vals in itertools.product(*(space[n] for n in names)):
        c = dict(zip(names, vals))
        if c.get("imod") == 0 and "ibalg" in c:
            c["ibalg"] = space["ibalg"][0]
        if coll == "allreduce" and "ibalg" in c:
            c["iralg"] = c["ibalg"]     # one tree for both inter-node halves
        k = tuple(sorted(c.items()))
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def predict_config(costs, coll: str, nodes: int, ppn: int, params: dict, nbytes: int) -> float:
    u = segments(nbytes, int(params.get("fs", 0)))
    return predict(coll, u, **costs.inputs(coll, nodes, ppn, params, nbytes, u))


def best_predicted(costs, coll, nodes, ppn, nbytes, configs) -> tuple[dict, float]:
    preds = [(predict_config(costs, coll, nodes, ppn, c, nbytes), i) for i, c in enumerate(configs)]
    t, i = min(preds)
    return configs[i], t


def measure_whole(store, runner, platform: str, coll: str, nodes: int, ppn: int,
                  params: dict, nbytes: int) -> dict:
    """One checked whole HAN call (after a warmup), stored and reused."""
    store.db.executescript("SELECT 1")  # table created by TaskCosts
    key = point_key(kind="taskmodel-whole", platform=platform, coll=coll, nodes=nodes,
                    ppn=ppn, params=params, bytes=nbytes)
    row = store.db.execute("SELECT completion_s, ran, bench_s FROM taskmodel_whole WHERE key=?",
                           (key,)).fetchone()
    if row:
        return {"completion_s": row[0], "ran": row[1], "bench_s": row[2], "reused": True}
    t0 = time.monotonic()
    recs = [r for r in runner.launch(coll, nodes, ppn, nbytes, params, whole="han")
            if r["kind"] == "whole"]
    comp = float(recs[0]["completion"])
    out = {"completion_s": comp, "ran": recs[0]["ran"], "bench_s": 2 * comp, "reused": False}
    with store.db:
        store.db.execute("INSERT INTO taskmodel_whole VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         (key, platform, coll, nodes, ppn, json.dumps(params), nbytes, comp,
                          out["ran"], out["bench_s"], time.monotonic() - t0, time.time()))
    return out
