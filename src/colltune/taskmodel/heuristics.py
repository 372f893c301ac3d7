"""Optional heuristics of the taskmodel tuner (``--heuristics``; docs/taskmodel.md,
"Heuristics", has the measured evidence for each and the command that prints it).

H1 changes how a pipeline is measured (3 steady tasks instead of 4-5; costs.py).
The others prune configurations *before* anything is measured for them, so the
pipelines of a pruned configuration are never launched. Each is a rule about
the structure of colltune's HAN (docs/hier.md), stated in terms of the point
(collective, nodes n, message bytes m) and the configuration, never in terms of
particular grid values:

H2 chain-fill: no chain inter-node tree (ibalg=3) when, counting only piece
   transfers (one piece of ibs bytes over one link = one step), the chain needs
   more steps than the binomial tree: P + n - 2 > ceil(log2 n) * P for P
   inter-node pieces. The chain delivers its last piece after the n - 1 hops of
   its fill plus P - 1 steps; the binomial root sends every piece to each of
   its ceil(log2 n) children through the node's one network port. (The first
   version, P < n - 1, pruned the best bcast at 16x12, 450000 B: P = 7 for
   15 hops, the chain 1.12-1.38x faster, as this count predicts: 21 vs 28.
   This version fails at 32 nodes, 7 pieces: 37 vs 35, yet the chain was
   1.04-1.10x faster; hence not in SAFE.)
H3 blocking-intra (bcast): no library intra-node bcast (smod=0, a *blocking*
   PMPI_Bcast on the node communicator) under colltune's non-blocking
   inter-node trees (imod=1) once the call is pipelined (u >= 2 segments):
   ct_han_task (native/hier/han.c) starts the task's inter-node ops, runs the
   blocking library steps, and only then progresses the ops, and the tree
   forwards piece by piece only while progressed: ib(s) stalls during sb(s-1)
   and the pipeline degenerates into a sequence. Not for allreduce: there the
   library's intra-node reduce can outweigh the stall (at 16x12 up to 1 MB,
   imod=1 + smod=0 was the best allreduce on the fat-tree and the dragonfly).
H4 unfilled-pipeline: no segment size that leaves the task pipeline unfilled
   (1 < u < D, D = stages: allreduce 4) when a smaller segment size of the space
   fills it (u >= D): every task of such a call is a fill or drain task.
H5 fill-drain: a message just over D full segments (u = D, last one partial)
   is interpolated between u-1 and u full segments; u-1 < D would need an exact
   (u-1)-segment pipeline of its own (a whole short call, measured for nothing
   else). A (D-1)-segment call has the same task structure as the fill and the
   drain of any pipeline (allreduce, 3 segments: sr(0); irsr(1); ibirsr(2);
   sbibir(2); sbib(2); sb(2)), so H5 takes the lower end from the pipeline the
   call uses anyway without its steady tasks (model.predict_fill_drain). Only
   where that short call is itself pipelined, u-1 >= 2 (allreduce): a
   1-segment call (bcast u-1 = 1) overlaps nothing and measured 11-34 % slower
   than the pipeline's ib(0) + sb for trees at both levels, so it keeps its
   exact measurement. (A first version, T(u-1) ~ 2 T(u) - T(u+1), failed: the
   first steady task costs up to 6x the later ones; mean |error| 63 % vs
   16.5 % exact on the training grid.)
"""
from __future__ import annotations

import math

from .model import depth, segments

ALL = ("H1", "H2", "H3", "H4", "H5")
PRUNING = ("H2", "H3", "H4")
# What a bare --heuristics means: the rules that kept the measured best on every
# grid measured (small 3x4/6x3 and 4x4/8x2; fat-tree 4x12/6x12/16x12/32x12;
# dragonfly 16x12/24x12/32x12; docs/taskmodel.md "Heuristics"). H2, even as
# revised, pruned the best bcast on the held-out 32x12 grids (7 pieces, 32
# nodes: the chain 1.04-1.10x faster), so it is opt-in ("all", "H2,...").
SAFE = ("H1", "H3", "H4", "H5")
# Inter-node piece bytes when a configuration does not set ibs/irs (the
# catalogue default, docs/hier.md).
DEFAULT_IBS = 65536


def parse(spec) -> frozenset:
    """True / 'safe' -> SAFE; 'all' -> every heuristic; False / None / '' / 'none'
    -> none; 'H1,H3' -> those (case-insensitive)."""
    if spec is True:
        return frozenset(SAFE)
    if not spec or spec is False:
        return frozenset()
    if isinstance(spec, (set, frozenset, list, tuple)):
        names = {str(s).upper() for s in spec}
    else:
        s = str(spec).strip().lower()
        if s == "all":
            return frozenset(ALL)
        if s in ("safe", "1", "true", "yes"):
            return frozenset(SAFE)
        if s in ("none", "0", "false", "no"):
            return frozenset()
        names = {x.strip().upper() for x in s.split(",") if x.strip()}
    bad = names - set(ALL)
    if bad:
        from ..errors import ConfigError
        raise ConfigError(f"--heuristics: unknown taskmodel heuristic(s) {', '.join(sorted(bad))} "
                          f"(have {', '.join(ALL)}, safe, all, none)")
    return frozenset(names)


def chain_unfilled(coll: str, nodes: int, params: dict, nbytes: int) -> bool:
    """H2: a chain inter-node tree that needs more piece steps than a binomial tree."""
    if nodes < 2 or int(params.get("imod", 1)) != 1 or int(params.get("ibalg", 1)) != 3:
        return False
    pieces = inter_pieces(params, nbytes)
    return pieces + nodes - 2 > math.ceil(math.log2(nodes)) * pieces


def inter_pieces(params: dict, nbytes: int) -> int:
    """Inter-node pieces of a whole call: every segment streams in pieces of ibs
    bytes (0 = the whole segment)."""
    fs = int(params.get("fs", 0))
    u = segments(nbytes, fs)
    seg = fs if u > 1 else nbytes
    ibs = int(params.get("ibs", DEFAULT_IBS))
    piece = min(ibs, seg) if ibs > 0 else seg
    last = nbytes - (u - 1) * seg
    return (u - 1) * math.ceil(seg / piece) + math.ceil(last / piece)


def blocking_intra(coll: str, nodes: int, params: dict, nbytes: int) -> bool:
    """H3: bcast with the library's blocking intra-node module under colltune's
    inter-node trees, pipelined call."""
    return (coll == "bcast" and int(params.get("imod", 1)) == 1
            and int(params.get("smod", 1)) == 0
            and segments(nbytes, int(params.get("fs", 0))) >= 2)


def unfilled(coll: str, params: dict, nbytes: int, configs: list[dict]) -> bool:
    """H4: 1 < u < D while a smaller fs of the candidates has u >= D."""
    d = depth(coll, params)
    fs = int(params.get("fs", 0))
    u = segments(nbytes, fs)
    if not 1 < u < d:
        return False
    return any(0 < int(c.get("fs", 0)) < fs and segments(nbytes, int(c["fs"])) >= d
               for c in configs)


def pruned_by(name: str, coll: str, nodes: int, nbytes: int, configs: list[dict]) -> list[bool]:
    """Which configurations heuristic ``name`` alone removes at this point."""
    if name == "H2":
        return [chain_unfilled(coll, nodes, c, nbytes) for c in configs]
    if name == "H3":
        return [blocking_intra(coll, nodes, c, nbytes) for c in configs]
    if name == "H4":
        return [unfilled(coll, c, nbytes, configs) for c in configs]
    return [False] * len(configs)


def candidates(coll: str, nodes: int, ppn: int, nbytes: int, configs: list[dict],
               active) -> list[dict]:
    """The configurations left to predict after the active pruning heuristics
    (never none: if every configuration would be pruned, all are kept)."""
    active = parse(active)
    drop = [False] * len(configs)
    for name in PRUNING:
        if name in active:
            drop = [a or b for a, b in zip(drop, pruned_by(name, coll, nodes, nbytes, configs))]
    kept = [c for c, d in zip(configs, drop) if not d]
    return kept or list(configs)
