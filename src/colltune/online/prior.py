"""Priors for blocks never sampled: the active learner's forest (tuners/active_model.py)
on (nodes, ppn, size) with the arm as a feature, trained per collective on the
measured blocks' per-arm mean costs, predicts each arm's log2 slowdown at an unseen
block; the update rule's weights turn the predicted slowdowns into probabilities."""
from __future__ import annotations

import math

from .state import EDGES, Arm, Block, State, class_range
from .update import FLOOR, MIN_N, TAU


def class_size(cls: int) -> int:
    """The size a class stands for: the geometric middle of its range (the last class:
    4x its lower edge)."""
    lo, hi = class_range(cls)
    if hi is None:
        return 4 * lo
    return max(1, int(math.sqrt(max(lo, 1) * hi)))


def training_points(state: State, collective: str) -> dict:
    """(nodes, ppn, size) -> {arm: mean cost} of the measured arms of measured blocks."""
    out = {}
    for b in state.blocks.values():
        if b.collective != collective:
            continue
        means = {a.arm: a.mean for a in b.arms if a.n >= MIN_N and a.mean > 0}
        if len(means) >= 2:
            out[(b.nodes, b.ppn, class_size(b.cls))] = means
    return out


def slowdown_probabilities(slowdowns: list[float], tau: float = TAU) -> list[float]:
    """The update rule's weights on predicted slowdowns r >= 1, with the floor."""
    k = len(slowdowns)
    w = [math.exp(-(r - 1.0) / tau) for r in slowdowns]
    total = sum(w)
    p = [max(x / total, FLOOR / (k * max(r, 1.0))) for x, r in zip(w, slowdowns)]
    total = sum(p)
    return [x / total for x in p]


def fit(state: State, collective: str, trees: int = 50, seed: int = 0):
    """The collective's model, or None with fewer than 2 measured blocks."""
    from ..tuners.active_model import CollectiveModel
    pts = training_points(state, collective)
    if len(pts) < 2:
        return None
    arms = sorted({a for m in pts.values() for a in m})
    model = CollectiveModel(arms, trees, seed, features="ranks")
    model.fit(pts)
    return model


class Models(dict):
    """Each collective's model, fitted on first use (None with fewer than 2 measured
    blocks); one instance serves add_priors and inform_untimed: prior blocks carry no
    timings, so adding them does not change what a model is fitted on."""

    def __init__(self, state: State, trees: int = 50, seed: int = 0):
        super().__init__()
        self.state, self.trees, self.seed = state, trees, seed

    def __missing__(self, collective: str):
        model = self[collective] = fit(self.state, collective, self.trees, self.seed)
        return model


def predict_block(model, block: Block) -> None:
    """Set the block's arm probabilities from the model (arms the model never saw keep
    the uniform share: they are explored)."""
    import numpy as np
    pred = model.predict(np.array([[block.nodes, block.ppn, class_size(block.cls)]]))[0]
    k = len(block.arms)
    known = [a for a in block.arms if a.arm in model.algorithms]
    if not known:
        return
    slow = {a.arm: 2.0 ** float(pred[model.algorithms.index(a.arm)]) for a in known}
    best = min(slow.values())
    probs = dict(zip(slow, slowdown_probabilities([s / best for s in slow.values()])))
    share = len(known) / k                  # the known arms split their share of uniform
    for a in block.arms:
        a.p = probs[a.arm] * share if a.arm in probs else 1.0 / k
    total = sum(a.p for a in block.arms)
    for a in block.arms:
        a.p /= total


def add_priors(state: State, layouts: list[tuple[int, int]], arms_of: dict[str, list[str]],
               trees: int = 50, seed: int = 0, models: Models | None = None) -> list[Block]:
    """Blocks of these (nodes, ppn) layouts for every collective with arms and every size
    class that the state lacks, or has only as priors: probabilities from the prediction
    (uniform without a model). Returns the blocks written."""
    written = []
    models = Models(state, trees, seed) if models is None else models
    for coll, arm_ids in arms_of.items():
        for nodes, ppn in layouts:
            for cls in range(len(EDGES) + 1):
                key = (coll, nodes, ppn, cls)
                old = state.blocks.get(key)
                if old is not None and old.source != "prior":
                    continue
                block = Block(coll, nodes, ppn, cls, 0, "prior",
                              [Arm(a, 1.0 / len(arm_ids)) for a in arm_ids])
                if models[coll] is not None:
                    predict_block(models[coll], block)
                state.add(block)
                written.append(block)
    return written


def inform_untimed(state: State, trees: int = 50, seed: int = 0,
                   models: Models | None = None) -> list[Block]:
    """Arms a measured block has never timed get from the model the share of the next
    run's draws its prediction earns: w = exp(-(max(s_u / s_b, 1) - 1) / TAU), s the
    predicted slowdowns of the arm and of the block's fastest timed arm b, p_u at least
    w / (1 + w) (an arm predicted as fast as b: one draw in two; together at most one in two), the
    other arms scaled to share the rest.
    The rule presumes every untimed arm as good as the block's best; this orders them:
    the next run's draws go first to the arm that wins the neighbours (the rule's
    max(K p, 1) then keeps the lift until the arm is timed). Returns the blocks
    changed."""
    import numpy as np
    models = Models(state, trees, seed) if models is None else models
    changed = []
    for b in state.blocks.values():
        timed = [a for a in b.arms if a.n > 0]
        untimed = [a for a in b.arms if a.n == 0]
        if b.source == "prior" or not timed or not untimed:
            continue
        model = models[b.collective]
        best = min(timed, key=lambda a: a.mean)
        if model is None or best.arm not in model.algorithms:
            continue
        pred = model.predict(np.array([[b.nodes, b.ppn, class_size(b.cls)]]))[0]
        slow = {name: 2.0 ** float(pred[i]) for i, name in enumerate(model.algorithms)}
        floor = {}
        for a in untimed:
            if a.arm in slow:
                w = math.exp(-(max(slow[a.arm] / slow[best.arm], 1.0) - 1.0) / TAU)
                floor[a.arm] = w / (1.0 + w)
        total = sum(floor.values())      # at most half of the draws on predictions
        floor = {k: v * min(1.0, 0.5 / total) for k, v in floor.items()} if total else floor
        fixed: dict[str, float] = {}     # arms lifted to their floor; the rest scaled
        while True:
            free = [a for a in b.arms if a.arm not in fixed]
            scale = (1.0 - sum(fixed.values())) / max(sum(a.p for a in free), 1e-300)
            low = [a for a in free if a.p * scale < floor.get(a.arm, 0.0) * (1 - 1e-6)]
            if not low or not free:
                break
            fixed.update((a.arm, floor[a.arm]) for a in low)
        if fixed:
            for a in b.arms:
                a.p = float(f"{fixed.get(a.arm, a.p * scale):.9g}")
            changed.append(b)
    return changed


def arms_by_collective(state: State) -> dict[str, list[str]]:
    """The arms each collective's blocks use (first block's order, others appended)."""
    out: dict[str, list[str]] = {}
    for b in state.blocks.values():
        lst = out.setdefault(b.collective, [])
        lst.extend(a.arm for a in b.arms if a.arm not in lst)
    return out
