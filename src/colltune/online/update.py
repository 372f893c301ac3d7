"""The update rule (identical to native/intercept/online*.c; docs/online.md) and the
re-derivation of a state from every samples file of a state dir.

Per block, after merging a run's statistics (Welford, in run order), with t the
number of runs that timed the block (this one included) and K its arms:
timed arms (n >= 1): r_a = mean_a / min_b mean_b, w_a = exp(-(r_a - 1) t / TAU);
arms never timed: w_a = 1 whatever t (optimism: as good as the best) until timed once;
at t = 1 max(K p_a, 1) (p the prior's or the forest's the run drew with; later p is the
rule's own, which the max would inflate run after run): with a weight decaying in t a
block called a few times per run had locked onto its first arms and never met the
others; conservative draws (C, ct_online_conservative) bound what trying them costs;
p = w / sum(w); p = max(p, FLOOR / (K r_a t)) (r_a = 1 untimed), p = p / sum(p).
Exploration shrinks as 1/t with evidence, yet sums to infinity over runs: every arm
keeps being timed (docs/online.md, "why it converges").
With no arm timed yet the block keeps its probabilities (prior or uniform).
Only blocks the run touched are updated: applying the rule again to an unchanged block
would keep moving it.
"""
from __future__ import annotations

import glob
import math
import os
import sys
from dataclasses import dataclass

from ..errors import InputError
from ..inputs import read_json
from .state import Arm, Block, State, class_from_range

TAU, FLOOR = 0.1, 0.02
MIN_N = 3          # timed calls before an arm may be the block's choice (State.Block.best)
SAMPLES_SCHEMA = "colltune-online-samples/1"


def g9(x: float) -> float:
    """x through C's printf("%.9g") and back."""
    return float(f"{x:.9g}")


def merge(arm: Arm, n: int, mean: float, m2: float) -> None:
    """Chan et al.'s parallel Welford merge of (n, mean, m2) into arm."""
    if n <= 0:
        return
    if arm.n == 0:
        arm.n, arm.mean, arm.m2 = n, mean, m2
        return
    total = arm.n + n
    delta = mean - arm.mean
    arm.mean = arm.mean + delta * n / total
    arm.m2 = arm.m2 + m2 + delta * delta * arm.n * n / total
    arm.n = total


def probabilities(arms: list[Arm], runs: int = 1, tau: float = TAU) -> list[float]:
    """The rule's new probabilities of one block's arms (in order); runs = t >= 1."""
    k, t = len(arms), max(runs, 1)
    timed = [a.mean for a in arms if a.n >= 1]
    best = min(timed) if timed else 0.0
    if not best > 0:
        return [a.p for a in arms]
    r = [a.mean / best if a.n >= 1 else 1.0 for a in arms]
    w = [math.exp(-(ra - 1.0) * t / tau) if a.n >= 1 else 1.0 if t > 1 else max(k * a.p, 1.0)
         for a, ra in zip(arms, r)]
    total = sum(w)
    p = [max(x / total, FLOOR / (k * ra * t)) for x, ra in zip(w, r)]
    total = sum(p)
    return [x / total for x in p]


def apply_rule(block: Block) -> None:
    for a, p in zip(block.arms, probabilities(block.arms, block.runs)):
        a.p = p


@dataclass
class Samples:
    path: str
    data: dict

    @property
    def fingerprint(self) -> str:
        return self.data.get("fingerprint", "")

    @property
    def order(self) -> str:
        """The run id starts with its MPI_Finalize time (UTC): the order in which runs
        took the state lock, so the order in which C merged them."""
        return str(self.data.get("run_id", ""))


def _check_shape(path: str, data: dict) -> None:
    """The fields merge_run and the records read, with their types: a file of the right
    schema but another shape had been a traceback naming nothing (a review)."""
    num = (int, float)

    def need(ok: bool, where: str, what: str) -> None:
        if not ok:
            raise InputError(f"{path}: {where}: expected {what}")
    need(isinstance(data.get("blocks", []), list), "blocks", "a list")
    for i, b in enumerate(data.get("blocks", [])):
        w = f"blocks/{i}"
        need(isinstance(b, dict), w, "an object")
        need(isinstance(b.get("collective"), str), f"{w}/collective", "a name")
        for k in ("nodes", "ppn", "bytes_lo"):
            need(isinstance(b.get(k), int) and not isinstance(b.get(k), bool), f"{w}/{k}", "an integer")
        need(b.get("bytes_hi") is None or isinstance(b.get("bytes_hi"), int), f"{w}/bytes_hi",
             "an integer or null")
        for k in ("calls", "setup_calls", "setup_s", "outlier_s"):
            need(isinstance(b.get(k, 0), num), f"{w}/{k}", "a number")
        need(isinstance(b.get("arms"), list), f"{w}/arms", "a list")
        for j, a in enumerate(b["arms"]):
            need(isinstance(a, dict) and isinstance(a.get("arm"), str), f"{w}/arms/{j}",
                 "an object with an 'arm' name")
            for k in ("p", "n", "mean", "m2", "outliers"):
                need(isinstance(a.get(k, 0), num), f"{w}/arms/{j}/{k}", "a number")
    need(isinstance(data.get("records", []), list), "records", "a list")


def read_samples(path: str) -> Samples:
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema") != SAMPLES_SCHEMA:
        raise InputError(f"{path}:1: schema {data.get('schema') if isinstance(data, dict) else None!r},"
                         f" expected {SAMPLES_SCHEMA!r}")
    _check_shape(path, data)
    for i, b in enumerate(data.get("blocks", [])):
        if class_from_range(b.get("bytes_lo", -1), b.get("bytes_hi")) is None:
            raise InputError(f"{path}: blocks/{i}: bytes {b.get('bytes_lo')}..{b.get('bytes_hi')} "
                             f"is not a size class")
    return Samples(path, data)


def samples_files(state_dir: str) -> list[Samples]:
    """Every readable samples file, in run order; unreadable ones skipped with a warning."""
    out = []
    for path in sorted(glob.glob(os.path.join(state_dir, "samples", "*.json"))):
        try:
            out.append(read_samples(path))
        except InputError as exc:
            print(f"colltune online: warning: {exc}; file skipped", file=sys.stderr)
    return sorted(out, key=lambda s: s.order)


def merge_run(state: State, samples: dict) -> None:
    """One run's samples into the state: statistics merged, rule applied to the blocks
    it touched, run-count + 1. A block new to the state starts from the probabilities
    the run drew with (its prior, or uniform)."""
    for b in samples.get("blocks", []):
        cls = class_from_range(b["bytes_lo"], b.get("bytes_hi"))
        key = (b["collective"], b["nodes"], b["ppn"], cls)
        block = state.blocks.get(key)
        if block is None:
            block = state.add(Block(*key, arms=[Arm(a["arm"], a.get("p", 0.0)) for a in b["arms"]]))
        block.calls += b.get("calls", 0)
        block.setups += b.get("setup_calls", 0)          # as C merges them (%.9g)
        block.setup_s = g9(block.setup_s + g9(b.get("setup_s", 0.0)))
        for a in b["arms"]:
            arm = block.arm(a["arm"])
            if arm is None:                  # the run knew an arm the state did not
                arm = Arm(a["arm"], a.get("p", 0.0))
                block.arms.append(arm)
            arm.p = a.get("p", arm.p)       # what C's rule reads: the p the run drew with
            merge(arm, a.get("n", 0), a.get("mean", 0.0), a.get("m2", 0.0))
        block.source = "measured"
        block.runs += 1 if any(a.get("n", 0) > 0 for a in b["arms"]) else 0
        apply_rule(block)
        for a in block.arms:               # what C's state.txt keeps between runs (%.9g)
            a.p, a.mean, a.m2 = g9(a.p), g9(a.mean), g9(a.m2)
    state.run_count += 1


def rederive(runs: list[Samples], fingerprint: str) -> State:
    """The state every run of this fingerprint leads to, from nothing."""
    state = State(fingerprint=fingerprint)
    for s in runs:
        if s.fingerprint == fingerprint:
            merge_run(state, s.data)
    return state
