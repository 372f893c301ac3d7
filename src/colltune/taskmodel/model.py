"""The HAN task cost model (Luo et al., CLUSTER 2020): predict a whole HAN call
from the costs of its tasks.

A collective is a pipeline of stages over u segments; task t runs stage k on
segment t-k for every k with 0 <= t-k < u (bcast: ib, sb; allreduce: sr, ir,
ib, sb — docs/hier.md). So a u-segment call is u + D - 1 tasks (D stages):
D-1 fill tasks, u-D+1 steady tasks (sbib / sbibirsr), D-1 drain tasks.

    bcast     = max_i  T_i(ib(0)) + sum_{s=1}^{u-1} T_i(sbib(s)) + T_i(sb(u-1))
    allreduce = max_i  T_i(sr(0)) + T_i(irsr(1)) + T_i(ibirsr(2))
                       + sum_{s=3}^{u-1} T_i(sbibirsr(s))
                       + T_i(sbibir(u-1)) + T_i(sbib(u-1)) + T_i(sb(u-1))

(i = node leader in the paper; colltune uses i = rank by default, see costs.py).
The steady sum uses every measured steady task of a short pipeline, then each
rank's rate from its last two (``extrapolated``): with constant steady costs it
is the paper's (u-1)·T(sbib(s)). The allreduce drain
ends with sb(u-1): the brief's formula omits it, but HAN runs it
(docs/hier.md). For u < D the sequence is shorter and its tasks are other
composites (e.g. u=2 allreduce: sr(0); irsr(1); ibir(1); sbib(1); sb(1));
those calls are predicted from a pipeline of exactly u segments.
"""
from __future__ import annotations

import math

STAGES = {"bcast": ("ib", "sb"), "allreduce": ("sr", "ir", "ib", "sb")}
# allreduce with imod=2 (a flat allreduce across the leaders, docs/hier.md): the
# ir task is the whole inter-node allreduce, there is no ib stage.
FLAT_IMOD, FLAT_STAGES = 2, ("sr", "ir", "sb")


def stages(coll: str, params: dict | None = None) -> tuple[str, ...]:
    """The stages of a call of coll with these HAN parameters (None: the standard ones)."""
    try:
        st = STAGES[coll]
    except KeyError:
        raise ValueError(f"taskmodel: no task pipeline for collective {coll!r} "
                         f"(have {', '.join(STAGES)})") from None
    if coll == "allreduce" and params is not None and int(params.get("imod", 1)) == FLAT_IMOD:
        return FLAT_STAGES
    return st


def depth(coll: str, params: dict | None = None) -> int:
    return len(stages(coll, params))


def segments(nbytes: int, fs: int) -> int:
    """u: number of segments of fs bytes (fs 0 = one segment)."""
    if fs <= 0 or nbytes <= fs:
        return 1
    return math.ceil(nbytes / fs)


def pipeline_tasks(coll: str, u: int, params: dict | None = None) -> list[str]:
    """The task sequence of a u-segment call, as taskbench explicit sums."""
    st = stages(coll, params)
    return ["+".join(f"{st[k]}({t - k})" for k in range(len(st)) if 0 <= t - k < u)
            for t in range(u + len(st) - 1)]


def node_totals(task_costs: list[list[float]]) -> float:
    """max over nodes (or ranks) of the sum of the tasks' costs there."""
    return max(sum(col) for col in zip(*task_costs))


def predict(coll: str, u: int, short: list[list[float]] | None = None,
            pipe: list[list[float]] | None = None, params: dict | None = None) -> float:
    """Predicted time of a u-segment call.

    short: per-task per-node costs of an exact u-segment pipeline (needed if u < D).
    pipe:  per-task per-node costs of a U-segment pipeline, U >= D (used if u >= D).
    params: the configuration (its stages: allreduce imod=2 has no ib)."""
    d = depth(coll, params)
    if u < d:
        if short is None or len(short) != u + d - 1:
            raise ValueError(f"{coll} with u={u} < {d} needs the {u + d - 1} tasks of a "
                             f"{u}-segment pipeline")
        return node_totals(short)
    if pipe is None or len(pipe) < 2 * d - 1:
        raise ValueError(f"{coll} with u={u} needs a pipeline of at least {d} segments")
    fill, steady, drain = pipe[:d - 1], pipe[d - 1:len(pipe) - (d - 1)], pipe[len(pipe) - (d - 1):]
    n_steady = u - d + 1
    used = steady[:n_steady] + [extrapolated(steady)] * max(0, n_steady - len(steady))
    return node_totals(fill + used + drain)


def extrapolated(steady: list[list[float]]) -> list[float]:
    """Per-rank cost of one more steady task: the mean of the last two.

    A rank's steady costs can alternate from task to task while their maximum
    over ranks is flat (it is what stability is judged on): with a chain across
    nodes whose forwarding runs into the next task, 8x4 allreduce fs 128 KiB
    leaders cost 108, 193, 108, 193 us, in opposite phase on the last leader.
    Repeating one task's vector charged one phase at 193 us every time (+24 %
    over the whole call); two tasks' mean is the rank's rate either way, and
    equals the last cost when costs are flat.

    Why the last two and not the first tasks whose maximum over ranks stopped
    changing (the rule until 2026-11-24): along a chain the fill reaches the
    leaders one after the other, so the maximum stays flat while the wave
    passes and each rank is still slowing down or speeding up (dragonfly 64x12
    bcast, fs 128 KiB: the last leader's steady costs 59.8, 60.6, 51.9, 35.9 us
    with a maximum of 60.6, 60.6, 51.9, 37.1). Judged that way, the prediction
    was 40 % over; from the last two, 16 %."""
    if len(steady) < 2:
        return steady[-1]
    return [(a + b) / 2 for a, b in zip(steady[-2], steady[-1])]


def predict_fill_drain(coll: str, pipe: list[list[float]], params: dict | None = None) -> float:
    """max over ranks of the fill and drain tasks of a pipeline without any
    steady task: the estimate of a (D-1)-segment call that the --heuristics
    rule H5 uses instead of measuring its own exact short pipeline."""
    d = depth(coll, params)
    if pipe is None or len(pipe) < 2 * d - 1:
        raise ValueError(f"{coll} needs a pipeline of at least {d} segments")
    return node_totals(pipe[:d - 1] + pipe[len(pipe) - (d - 1):])
