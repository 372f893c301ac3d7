"""Run-by-run view of a state dir from its samples files: the probabilities each run
drew with, its arms, and the time its intercepted collectives took (estimated from
the samples: sampled calls at their measured cost, the calls after the budget at the
cost of the arm the block then ran)."""
from __future__ import annotations

from .state import class_from_range
from .update import MIN_N, Samples


def block_key(b: dict) -> tuple:
    return (b["collective"], b["nodes"], b["ppn"], class_from_range(b["bytes_lo"], b.get("bytes_hi")))


def block_time(b: dict) -> float:
    """Seconds the block's calls took in one run (rank-0 view, estimated). Calls that
    built per-communicator state: their arms learnt part of their cost, setup_s is
    the rest; outliers (not learnt by their arms) cost outlier_s."""
    arms = b.get("arms", [])
    sampled = sum(a.get("n", 0) * a.get("mean", 0.0) for a in arms)
    n = sum(a.get("n", 0) for a in arms)
    measured = [a["mean"] for a in arms if a.get("n", 0) >= MIN_N]
    rest = max(0, b.get("calls", 0) - n - sum(a.get("outliers", 0) for a in arms))
    per_call = min(measured) if measured else (sampled / n if n else 0.0)
    return sampled + b.get("setup_s", 0.0) + b.get("outlier_s", 0.0) + rest * per_call


def run_time(samples: Samples) -> float:
    """The run's time in intercepted collectives: the native total when the samples
    file has one, else the estimate."""
    job = samples.data.get("job", {})
    if isinstance(job.get("coll_time_s"), (int, float)):
        return float(job["coll_time_s"])
    return sum(block_time(b) for b in samples.data.get("blocks", []))


def runs(samples: list[Samples]) -> list[dict]:
    """Per run: id, collective time, {block key: {arm: p}}, {block key: most used arm}."""
    out = []
    for s in samples:
        probs, used = {}, {}
        for b in s.data.get("blocks", []):
            key = block_key(b)
            probs[key] = {a["arm"]: a.get("p", 0.0) for a in b["arms"]}
            if b["arms"]:
                used[key] = max(b["arms"], key=lambda a: a.get("n", 0))["arm"]
        out.append({"run_id": s.data.get("run_id", s.path), "coll_time_s": run_time(s),
                    "probs": probs, "used": used})
    return out
