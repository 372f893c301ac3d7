"""Samples -> results store records (the one record schema): one launch row per
(run, collective, arm, nodes, ppn) with scenario ``online``, one point per
(communicator size, bytes) of its sampled calls; labels carry source ``online``, the
run id and the probability the arm had. Loading twice adds nothing (point keys)."""
from __future__ import annotations

import json
import statistics
import time

from .. import __version__
from ..providers.base import ALGORITHM, SELECTOR
from ..store import OK, Store, point_key
from .arms import LIBRARY, arm_label, split_arm
from .state import class_of
from .update import Samples

SCENARIO = "online"


def _arm_p(data: dict) -> dict:
    """(collective, nodes, ppn, class, arm) -> p the run drew with."""
    from .state import class_from_range
    return {(b["collective"], b["nodes"], b["ppn"], class_from_range(b["bytes_lo"], b.get("bytes_hi")),
             a["arm"]): a.get("p") for b in data.get("blocks", []) for a in b["arms"]}


def store_samples(store: Store, samples: Samples, campaign: str, state_dir: str) -> int:
    """Add one samples file's records; returns the number of new points."""
    data, job = samples.data, samples.data.get("job", {})
    groups: dict = {}
    for coll, nodes, ppn, size, nbytes, arm, cost, *_timed_by in data.get("records", []):
        groups.setdefault((coll, nodes, ppn, arm), {}).setdefault((size, nbytes), []).append(cost)
    probs, added = _arm_p(data), 0
    for (coll, nodes, ppn, arm), by_point in groups.items():
        prov, _, _ = split_arm(arm)
        points = []
        for (size, nbytes), costs in sorted(by_point.items()):
            key = point_key(source=SCENARIO, run=data.get("run_id"), fingerprint=samples.fingerprint,
                            collective=coll, arm=arm, nodes=nodes, ppn=ppn, size=size, bytes=nbytes)
            if store.done_keys([key]):
                continue
            points.append({
                "key": key, "status": OK, "participants": size, "msg_size": nbytes,
                "bytes": nbytes, "reps": len(costs), "warmup": 0,
                "ttc_median_s": statistics.median(costs), "ttc_mean_s": statistics.fmean(costs),
                "ttc_min_s": min(costs), "ttc_max_s": max(costs),
                "ttc_stddev_s": statistics.pstdev(costs), "valid": True,
                "labels_json": json.dumps({"source": SCENARIO, "run_id": data.get("run_id"),
                                           "arm": arm, "p": probs.get((coll, nodes, ppn,
                                                                      class_of(nbytes), arm))}),
            })
        if not points:
            continue
        started = job.get("started_s") or time.time()
        store.add_run({
            "campaign": campaign, "started": started, "finished": started, "status": "ok",
            "backend": "sim" if job.get("platform") else "local", "platform": job.get("platform") or None,
            "provider": "colltune" if prov in ("colltune", LIBRARY) else prov,
            "mpi_library": job.get("library"), "library_version": job.get("library"),
            "collective": coll, "algorithm": arm_label(arm),
            "algorithm_kind": SELECTOR if prov == LIBRARY else ALGORITHM,
            "nodes": nodes, "ppn": ppn, "nprocs": job.get("size"), "scenario": SCENARIO,
            "settings_json": json.dumps({"source": SCENARIO, "state_dir": state_dir,
                                         "samples": samples.path, "run_id": data.get("run_id"),
                                         "fingerprint": samples.fingerprint, "job": job}),
            "colltune_version": __version__, "exit_code": 0, "command": job.get("argv0"),
        }, points)
        added += len(points)
    return added
