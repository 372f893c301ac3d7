"""The configuration space of HAN parameters, model predictions over it, and
measured whole HAN calls (the ground truth the model is checked against)."""
from __future__ import annotations

import itertools
import json
import time

from ..store import point_key
from .heuristics import candidates
from .model import FLAT_IMOD, depth, predict, predict_fill_drain, segments

# Spaces (docs/taskmodel.md): segment size x inter-node module x intra-node
# module x inter-node tree; other parameters keep their catalogue defaults.
# ibalg only matters with imod=1 (colltune trees), so imod=0 takes one value.
# "han+flat" adds allreduce imod=2 (colltune's flat allreduce across the leaders,
# ring or Rabenseifner: iaalg), which has no inter-node trees.
SPACE = {"fs": (131072, 524288), "imod": (0, 1), "smod": (0, 1), "ibalg": (1, 3)}
# "han+nb" adds the library's non-blocking intra-node module (smod=3).
SPACES = {"han": SPACE, "han+flat": {**SPACE, "imod": (0, 1, FLAT_IMOD), "iaalg": (2, 3)},
          "han+nb": {**SPACE, "smod": (0, 1, 3)}}


def configurations(coll: str, space: dict | str | None = None) -> list[dict]:
    if isinstance(space, str):
        if space not in SPACES:
            raise ValueError(f"taskmodel space {space!r}: expected one of {', '.join(SPACES)}")
        space = SPACES[space]
    space = space or SPACE
    names = list(space)
    out, seen = [], set()
    for vals in itertools.product(*(space[n] for n in names)):
        c = dict(zip(names, vals))
        flat = c.get("imod") == FLAT_IMOD
        if flat and coll != "allreduce":
            continue                    # only allreduce has a flat inter-node level
        if flat:
            c.pop("ibalg", None)        # no inter-node trees
        else:
            c.pop("iaalg", None)
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
    """Model time of one configuration. A partial last segment (u >= D segments,
    nbytes not a multiple of fs) is interpolated linearly between u-1 and u full
    segments: the extrapolated pipeline has full segments only, and charging a
    whole one overestimated a 200000-byte bcast (fs 128 KiB) by 15 %."""
    fs = int(params.get("fs", 0))
    u = segments(nbytes, fs)

    def full(k, b):
        return predict(coll, k, **costs.inputs(coll, nodes, ppn, params, b, k), params=params)
    d = depth(coll, params)
    if u < d or nbytes == u * fs:
        return full(u, nbytes)
    hi = full(u, u * fs)
    if 2 <= u - 1 < d and "H5" in getattr(costs, "active", ()):
        # H5: u-1 full segments would need an exact short pipeline of its own;
        # take the same pipeline without its steady tasks instead (heuristics.py)
        lo = predict_fill_drain(coll, costs.inputs(coll, nodes, ppn, params, u * fs, u)["pipe"],
                                params)
    else:
        lo = full(u - 1, (u - 1) * fs)
    return lo + (nbytes - (u - 1) * fs) / fs * (hi - lo)


def best_predicted(costs, coll, nodes, ppn, nbytes, configs) -> tuple[dict, float]:
    """The configuration with the lowest prediction among those the active
    pruning heuristics of ``costs`` leave (heuristics.py): pruned ones are
    never predicted, so their pipelines are never measured."""
    configs = candidates(coll, nodes, ppn, nbytes, configs, getattr(costs, "active", ()))
    preds = [(predict_config(costs, coll, nodes, ppn, c, nbytes), i) for i, c in enumerate(configs)]
    t, i = min(preds)
    return configs[i], t


def measure_whole(costs, coll: str, nodes: int, ppn: int, params: dict, nbytes: int) -> dict:
    """One checked whole HAN call (after a warmup) in the store of ``costs`` (a
    TaskCosts), measured once; bench_s = simulated seconds of warmup + call."""
    key = point_key(kind="taskmodel-whole", sha=costs.sha, coll=coll, nodes=nodes, ppn=ppn,
                    params=params, bytes=nbytes)
    row = costs.db.execute("SELECT completion_s, ran, bench_s FROM taskmodel_whole WHERE key=?",
                           (key,)).fetchone()
    if row:
        return {"completion_s": row[0], "ran": row[1], "bench_s": row[2], "reused": True}
    t0 = time.monotonic()
    recs = [r for r in costs.runner.launch(coll, nodes, ppn, nbytes, params, whole="han")
            if r["kind"] == "whole"]
    comp = float(recs[0]["completion"])
    out = {"completion_s": comp, "ran": recs[0]["ran"], "bench_s": 2 * comp, "reused": False}
    with costs.db:
        costs.db.execute("INSERT INTO taskmodel_whole VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         (key, costs.platform, coll, nodes, ppn, json.dumps(params), nbytes, comp,
                          out["ran"], out["bench_s"], time.monotonic() - t0, time.time()))
    return out
