"""Active-learning autotuner (ACCLAiM: Wilkins et al., "ACCLAiM: Advancing the
Practicality of MPI Collective Communication Autotuning Using Machine Learning",
CLUSTER 2022).

Loop, per collective (one model each, tuners/active_model.py):
1. measure a few spread initial points (every algorithm at each point);
2. fit the forest; compute the jackknife variance of every candidate point
   (nodes, ppn, size) of the grid — all node counts, not only powers of two;
3. select the batch of unmeasured points with the highest uncertainty (default: the
   variance of the predicted gap between the best and the runner-up algorithm;
   `active_uncertainty = algorithm`: its most uncertain algorithm's variance, as in
   ACCLAiM), every n-th selected
   point moved to a random non-power-of-two size between the neighbouring powers
   of two of its size; measure every algorithm there, the launches placed on
   disjoint groups of the platform (colltune.placement);
4. stop when the decision table stops moving: the new model prices the previous
   fit's choices over the candidate space at less than `active_stable` mean slowdown,
   `active_patience` times in a row (`active_stop = variance`: the summed variance
   changes by less than `active_threshold`, relative), or at the wall-clock budget,
   the point cap, or when no candidate is left.
Then rules are generated from the model (tuners/active_rules.py).

`tune_active(...)` is the entry point for other commands; `colltune tune
--strategy active` goes through `ActiveTuner.run`.
"""
from __future__ import annotations

import hashlib
import math
import random
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..campaign import Campaign, CampaignSummary, launched
from ..decision import DecisionTable, Entry
from ..plan import BenchSpec
from ..placement import GroupAllocator, Hold, greedy_schedule, groups_of, makespan
from ..results import Results
from ..store import OK, TIMEOUT, WRONG
from . import TUNERS
from .active_model import CollectiveModel, is_pow2
from .active_rules import bisect_choices, midpoint, rules_from_choices, rules_from_samples
from .base import Tuner, TuningSpace, within

Point = tuple[int, int, int]        # nodes, ppn, size


def point_cost(row: dict) -> float:
    """Simulated (or wall) seconds a measured point kept its ranks busy: warm-up
    and timed repetitions of the collective (sync windows and checks excluded).
    Only this is what "% of exhaustive" compares: it leaves out every launch's own
    cost (start-up, synchronisation, result checks: the wall time of a launch on
    SMPI is mostly that) and failures; the learner counts launches, wall seconds and
    timeouts apart (`ActiveLearner.cost`)."""
    if row.get("status") != OK or row.get("ttc_mean_s") is None:
        return 0.0
    return float((row.get("warmup") or 0) + (row.get("reps") or 0)) * float(row["ttc_mean_s"])


def timed_out(row: dict) -> bool:
    """A point whose launch was killed at the timeout (not one the campaign gave up
    on without launching it, after consecutive timeouts)."""
    return row.get("status") == TIMEOUT and launched(row)


def collective_rng(seed: int, collective: str) -> random.Random:
    """The random stream of one collective's learner (initial points, non-power-of-two
    sizes, random selection): seeded from (seed, collective) by SHA-256, so it does not
    depend on which other collectives are tuned in the same call (one generator shared
    by all had made allreduce's points depend on whether bcast was tuned with it) and
    is the same in every interpreter (Python's hash() of a str is salted)."""
    digest = hashlib.sha256(f"colltune-active/{int(seed)}/{collective}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass
class CollectiveState:
    collective: str
    algorithms: list                      # provider Algorithm objects
    grid: list[Point]
    model: CollectiveModel
    measured: dict[Point, dict[str, float | None]] = field(default_factory=dict)
    cost_s: float = 0.0
    launch_specs: int = 0                 # launches asked for: one per algorithm and layout of a batch
    timeouts: int = 0                     # points whose launch timed out (charged at the timeout)
    picks: int = 0                        # points selected so far (for the non-pow2 rule)
    variance: list[float] = field(default_factory=list)
    change: list[float] = field(default_factory=list)   # predicted cost of the previous table's choices
    choices: np.ndarray | None = None     # the model's choice at every grid point, last fit
    calm: int = 0                         # consecutive iterations below the threshold
    converged_at: int | None = None       # iteration at which the criterion first held
    stop: str | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))   # collective_rng


@dataclass
class ActiveOutcome:
    table: DecisionTable
    history: list[dict]
    summary: CampaignSummary
    stops: dict[str, str]
    real_holds: list[Hold]                # launches really run, with their groups and times
    schedule: list[Hold]                  # simulated-duration schedule of every batch
    sequential_s: float
    makespan_s: float
    models: dict[str, CollectiveModel]
    cost: dict = field(default_factory=dict)   # ActiveLearner.cost(): launches, wall, timeouts


class ActiveLearner:
    """select: 'variance' (ACCLAiM) or 'random' (the baseline it is compared with)."""

    def __init__(self, campaign: Campaign, provider, collectives, layouts, sizes,
                 algorithms=None, candidates: dict[str, list[Point]] | None = None,
                 select: str = "variance", budget_s: float | None = None, on_iteration=None,
                 keep_going: bool = False):
        s = campaign.settings
        self.campaign, self.provider, self.settings = campaign, provider, s
        # keep_going: note convergence but go on (learning curves past the stopping point)
        self.select_mode, self.on_iteration, self.keep_going = select, on_iteration, keep_going
        self.budget_s = s.active_budget_s if budget_s is None else budget_s
        self.sizes = sorted(set(int(m) for m in sizes))
        self.layouts = sorted(set((int(n), int(p)) for n, p in layouts))
        self.groups = groups_of(campaign.backend)
        if campaign.placer is None and self.groups:
            campaign.placer = GroupAllocator(self.groups)
        self.states: dict[str, CollectiveState] = {}
        self.label = provider.arm_label       # unique among the arms (a composite's two parts)
        for coll in collectives:
            # the arms a table may choose (Provider.arms); --algorithms never drops the
            # library's default decision
            algs = within(provider, coll, algorithms, provider.arms(coll))
            grid = (candidates or {}).get(coll) or [(n, p, m) for n, p in self.layouts
                                                    for m in self.sizes]
            grid = [g for g in grid if g[0] * g[1] > 1]     # one rank: nothing to choose
            if not grid:
                from ..errors import ConfigError
                raise ConfigError(f"{coll}: no layout of more than one rank to tune "
                                  f"(--layouts {','.join(f'{n}x{p}' for n, p in self.layouts)})")
            self.states[coll] = CollectiveState(coll, algs, sorted(set(grid)), CollectiveModel(
                [self.label(a) for a in algs], s.active_trees, s.active_seed, s.active_model,
                s.active_per_algorithm, s.active_features), rng=collective_rng(s.active_seed, coll))
        self.history: list[dict] = []
        self.schedule: list[Hold] = []
        self.sequential_s = self.makespan_s = 0.0
        self.summary = CampaignSummary()      # launches really run and wall time, this session
        self.launch_wall_s = 0.0              # of the wall time: the batches' campaigns (launching)

    # -- point selection -------------------------------------------------------
    def _initial(self, st: CollectiveState) -> list[Point]:
        """Spread start: smallest and largest layout at the smallest and largest size,
        then seeded random points of the grid."""
        lay = sorted({(n, p) for n, p, _ in st.grid}, key=lambda t: (t[0] * t[1], t))
        lo, hi = min(m for *_, m in st.grid), max(m for *_, m in st.grid)
        want = [(*lay[-1], hi), (*lay[-1], lo), (*lay[len(lay) // 2], lo), (*lay[len(lay) // 2], hi)]
        out = [p for p in dict.fromkeys(want) if p in set(st.grid)]
        rest = [p for p in st.grid if p not in out]
        st.rng.shuffle(rest)
        return (out + rest)[:self.settings.active_initial_points]

    def _nonpow2(self, st: CollectiveState, point: Point) -> Point:
        """A random non-power-of-two size between the powers of two around the point's
        size, within the grid's size range (a multiple of 8 when there is one)."""
        n, p, m = point
        lo = max(m // 2 + 1, min(s for *_, s in st.grid))
        hi = min(2 * m - 1, max(s for *_, s in st.grid))
        cands = [v for v in range(-(-lo // 8) * 8, hi + 1, 8) if not is_pow2(v)] or \
                [v for v in range(lo, hi + 1) if not is_pow2(v)]
        for _ in range(8):
            if not cands:
                break
            q = (n, p, st.rng.choice(cands))
            if q not in st.measured:
                return q
        return point

    def _select(self, st: CollectiveState, k: int) -> list[Point]:
        todo = [p for p in st.grid if p not in st.measured]
        if not todo:
            return []
        if self.select_mode == "random":
            order = st.rng.sample(todo, len(todo))
        else:
            var = (st.model.decision_variance(np.array(todo))
                   if self.settings.active_uncertainty == "decision"
                   else st.model.variance(np.array(todo)).max(axis=1))
            order = [todo[i] for i in np.argsort(-var, kind="stable")]
        batch: list[Point] = []
        for pt in order:                      # distinct sizes first: a batch spreads out
            if len(batch) < k and pt[2] not in {q[2] for q in batch}:
                batch.append(pt)
        for pt in order:
            if len(batch) < k and pt not in batch:
                batch.append(pt)
        out = []
        for pt in batch:
            st.picks += 1
            every = self.settings.active_nonpow2_every
            out.append(self._nonpow2(st, pt) if st.picks % every == 0 else pt)
        return list(dict.fromkeys(out))

    # -- measuring -------------------------------------------------------------
    def _specs(self, coll: str, points: list[Point]) -> list[BenchSpec]:
        by_layout: dict[tuple[int, int], list[int]] = {}
        for n, p, m in points:
            by_layout.setdefault((n, p), []).append(m)
        return [BenchSpec(coll, alg, n, p, tuple(sorted(set(ms))))
                for (n, p), ms in sorted(by_layout.items()) for alg in self.states[coll].algorithms]

    def _collect(self, batch: dict[str, list[Point]]) -> CampaignSummary:
        specs = {c: self._specs(c, pts) for c, pts in batch.items() if pts}
        summary = self.campaign.run([s for ss in specs.values() for s in ss])
        tasks = []
        for coll, ss in specs.items():
            st = self.states[coll]
            for spec in ss:
                dur = 0.0
                st.launch_specs += 1
                for row in self.campaign.measured(spec):
                    st.timeouts += timed_out(row)
                    pt = (spec.nodes, spec.ppn, int(row["msg_size"]))
                    ok = row["status"] == OK and row["ttc_median_s"] is not None
                    st.measured.setdefault(pt, {})[self.label(spec.algorithm)] = \
                        float(row["ttc_median_s"]) if ok else None
                    if row["status"] == WRONG and self.settings.active_exclude_wrong:
                        # wrong data is never a choice, wherever it was seen: rules are
                        # size ranges and the same bug may sit between two measured sizes
                        st.model.untrusted.add(self.label(spec.algorithm))
                    dur += point_cost(row)
                st.cost_s += dur
                tasks.append((spec, spec.nodes, dur))
        seq = sum(t[2] for t in tasks)
        # batches run one after the other (the model is refitted in between)
        sched = [replace(h, start=h.start + self.makespan_s, end=h.end + self.makespan_s)
                 for h in (greedy_schedule(tasks, self.groups) if self.groups else [])]
        self.schedule += sched
        self.sequential_s += seq
        self.makespan_s += makespan(sched) if self.groups else seq
        return summary

    # -- the loop --------------------------------------------------------------
    def _table_change(self, st: CollectiveState) -> float | None:
        """Predicted mean slowdown, under the model just fitted, of the choices the
        previous model made over the candidate grid (0: the decisions did not move)."""
        grid = np.array(st.grid)
        pred = st.model.predict(grid)
        now = st.model.choice(grid)
        prev, st.choices = st.choices, now
        if prev is None:
            return None
        idx = np.arange(len(grid))
        return float(np.mean(np.exp2(pred[idx, prev] - pred[idx, now]) - 1.0))

    def _converged(self, st: CollectiveState) -> bool:
        if self.settings.active_stop == "stable":
            c = st.change
            if c and c[-1] is not None:
                st.calm = st.calm + 1 if c[-1] < self.settings.active_stable else 0
        else:
            v = st.variance
            if len(v) >= 2 and v[-2] > 0:
                st.calm = st.calm + 1 if abs(v[-1] - v[-2]) / v[-2] < self.settings.active_threshold else 0
        return st.calm >= self.settings.active_patience and len(st.measured) >= self.settings.active_min_points

    def run(self) -> ActiveOutcome:
        start = time.monotonic()
        total = self.summary = CampaignSummary()
        # the budget bounds the launches too: the first batch alone had run 6x over a
        # 20 s budget (a user's review of run --tune-first); a launch in flight finishes
        self.campaign.deadline = start + self.budget_s
        batch = {c: self._initial(st) for c, st in self.states.items()}
        iteration = 0
        while True:
            s = self._collect(batch)
            self.launch_wall_s += s.wall_s
            total.launches += s.launches
            total.skipped_points += s.skipped_points
            total.past_deadline += s.past_deadline
            total.past_deadline_colls |= s.past_deadline_colls
            for k, v in s.measured.items():
                total.measured[k] = total.measured.get(k, 0) + v
            iteration += 1
            wall = total.wall_s = time.monotonic() - start
            for coll, st in self.states.items():
                if st.stop or not batch.get(coll):
                    continue
                try:
                    st.model.fit(st.measured)
                except ValueError:      # nothing measured: failures, or the budget spent first
                    st.stop = "budget" if coll in s.past_deadline_colls else "no successful measurement"
                    continue
                st.variance.append(float(st.model.variance(np.array(st.grid)).sum()))
                st.change.append(self._table_change(st))
                prev = st.variance[-2] if len(st.variance) > 1 else math.nan
                rec = {"collective": coll, "iteration": iteration, "points": len(st.measured),
                       "new_points": [list(p) for p in batch[coll]], "cost_s": st.cost_s,
                       "variance_sum": st.variance[-1], "table_change": st.change[-1],
                       "rel_change": abs(st.variance[-1] - prev) / prev if prev > 0 else None,
                       "wall_s": wall, "makespan_s": self.makespan_s,
                       "sequential_s": self.sequential_s, "launches": total.launches,
                       "launch_specs": st.launch_specs, "timeouts": st.timeouts}
                if st.converged_at is None and self._converged(st):
                    st.converged_at = iteration
                rec["converged"] = st.converged_at is not None
                if st.converged_at is not None and not self.keep_going:
                    st.stop = "converged"
                elif all(p in st.measured for p in st.grid):
                    st.stop = "no candidate left"
                elif self.settings.active_max_points and len(st.measured) >= self.settings.active_max_points:
                    st.stop = "point cap"
                rec["stop"] = st.stop
                self.history.append(rec)
                if self.on_iteration:
                    self.on_iteration(self, rec)
            live = [st for st in self.states.values() if not st.stop]
            if not live:
                break
            if time.monotonic() - start >= self.budget_s:
                for st in live:
                    st.stop = "budget"
                break
            k = self.settings.active_batch
            batch = {st.collective: self._select(st, k if not self.settings.active_max_points else
                                                 min(k, self.settings.active_max_points - len(st.measured)))
                     for st in live}
        total.wall_s = time.monotonic() - start
        return ActiveOutcome(self.decide(), self.history, total,
                             {c: st.stop for c, st in self.states.items()},
                             list(self.campaign.placer.log) if self.campaign.placer else [],
                             self.schedule, self.sequential_s, self.makespan_s,
                             {c: st.model for c, st in self.states.items()}, self.cost())

    # -- rules -----------------------------------------------------------------
    def entries(self, coll: str) -> list[Entry]:
        st = self.states[coll]
        if st.model.forest is None:
            return []
        entries = model_entries(st.model, coll, st.grid, self.layouts, st.measured,
                                st.algorithms[0].provider, self.settings.active_rules)
        # the model's choices are arm labels: back to each arm's algorithm and provider
        arm = {self.label(a): a for a in st.algorithms}
        return [replace(e, rules=tuple(replace(r, algorithm=arm[r.algorithm].label,
                                               provider=arm[r.algorithm].provider)
                                       for r in e.rules)) for e in entries]

    def cost(self) -> dict:
        """What the session cost, beyond the simulated benchmark seconds of its points
        (`benchmark_s`, what "% of exhaustive" compares): per collective the launches it
        asked for (one per algorithm and layout of each batch: a fresh store needs at
        least these; an exhaustive search needs one per algorithm and layout in all)
        and its points whose launch timed out, charged at the timeout (wall seconds,
        not in `benchmark_s`); for the whole session the launches really run (points
        already in the store are read back, not launched; a crash relaunches the rest
        of a launch's sizes) and the wall time, model fits included (`launch_wall_s`:
        the part spent in the batches' campaigns, launching)."""
        timeout = float(self.settings.timeout)
        return {"benchmark_s": {c: st.cost_s for c, st in self.states.items()},
                "launch_specs": {c: st.launch_specs for c, st in self.states.items()},
                "timeouts": {c: st.timeouts for c, st in self.states.items()},
                "timeout_charged_s": {c: st.timeouts * timeout for c, st in self.states.items()},
                "launches": self.summary.launches, "wall_s": self.summary.wall_s,
                "launch_wall_s": self.launch_wall_s}

    def decide(self, provenance: dict | None = None) -> DecisionTable:
        entries = [e for c in self.states for e in self.entries(c)]
        info = {"active": {
            "stops": {c: st.stop for c, st in self.states.items()},
            "converged_at_iteration": {c: st.converged_at for c, st in self.states.items()},
            "points": {c: len(st.measured) for c, st in self.states.items()},
            **self.cost(),
            "history": [{k: h[k] for k in ("collective", "iteration", "points", "cost_s",
                                           "variance_sum", "converged", "stop", "launches",
                                           "launch_specs", "timeouts", "wall_s")}
                        for h in self.history],   # report.active.active_section draws it
            "select": self.select_mode,
            "settings": {k: v for k, v in self.settings.values.items() if k.startswith("active_")}}}
        prov = {**(provenance or self.campaign.provenance), **info}
        return DecisionTable("active", prov, tuple(entries))


def cost_lines(active: dict) -> list[str]:
    """Lines saying what an active session cost (a table's provenance["active"], or
    ActiveLearner.cost()): simulated benchmark seconds next to launches, wall time and
    timeouts."""
    out = []
    for coll, sim in (active.get("benchmark_s") or {}).items():
        n_to = (active.get("timeouts") or {}).get(coll, 0)
        out.append(f"active learning, {coll}: {(active.get('points') or {}).get(coll, '?')} points, "
                   f"{sim * 1e3:.3f} ms of benchmark time (warm-up + repetitions; simulated time on SMPI), "
                   f"{(active.get('launch_specs') or {}).get(coll, '?')} launches asked for, "
                   f"{n_to} timed out"
                   + (f" (charged {(active.get('timeout_charged_s') or {}).get(coll, 0):.0f} s at "
                      f"their timeout)" if n_to else ""))
    if "launches" in active:
        out.append(f"active learning: {active['launches']} launches run (points already in the store "
                   f"are read back) in {active.get('wall_s', 0):.1f} s wall, "
                   f"{active.get('launch_wall_s', 0):.1f} s of it launching")
    return out


def model_entries(model: CollectiveModel, coll: str, grid: list[Point], layouts, measured,
                  provider: str, rules: str = "bisect", depth: int | None = None) -> list[Entry]:
    """Decision-table entries of one collective from a fitted model: rule generation
    (tuners/active_rules.py) at every layout of the grid and of `layouts`, over the
    powers of two of the grid's size range. rules "midpoint": ACCLAiM's rules (one
    midpoint query where the choice changes between powers of two, the interval
    takes its answer); "bisect": midpoint queries until the change is located (to
    the byte, or `depth` levels), the rule changes where the model's answer does
    (active_rules.bisect_choices)."""
    lo, hi = min(m for *_, m in grid), max(m for *_, m in grid)
    pow2 = [1 << e for e in range(max(lo, 1).bit_length() - 1, hi.bit_length())
            if lo <= 1 << e <= hi] or sorted({m for *_, m in grid})
    layouts = sorted({(n, p) for n, p, _ in grid} | set(layouts))

    def here(n, p):
        return {m for (a, b, m) in measured if (a, b) == (n, p)}

    if rules == "bisect":
        samples = bisect_choices(layouts, pow2, lambda pts: model.best(np.array(pts)), depth)
        return [Entry(coll, n, p, rules_from_samples(samples[(n, p)], provider, here(n, p)))
                for n, p in layouts]
    # one batched model query for every size rule generation may ask about
    asked = [(n, p, m) for n, p in layouts
             for m in pow2 + [midpoint(a, c) for a, c in zip(pow2, pow2[1:]) if c - a >= 2]]
    cache = dict(zip(asked, model.best(np.array(asked))))
    out = []
    for n, p in layouts:
        def choose(sizes, n=n, p=p):
            missing = [(n, p, m) for m in sizes if (n, p, m) not in cache]
            if missing:
                cache.update(zip(missing, model.best(np.array(missing))))
            return [cache[(n, p, m)] for m in sizes]
        out.append(Entry(coll, n, p, rules_from_choices(pow2, choose, provider, here(n, p))))
    return out

def tune_active(backend, store, settings, collectives, layouts, sizes, *, campaign: str = "active",
                budget_s: float | None = None, algorithms=None, show_progress: bool = False,
                **learner_options) -> ActiveOutcome:
    """Active tuning of `collectives` over layouts x sizes within `budget_s` wall
    seconds (default: the `active_budget_s` setting); returns the outcome, whose
    `.table` is the DecisionTable."""
    backend.provider()
    groups = groups_of(backend)
    camp = Campaign(campaign, backend, store, settings, show_progress,
                    placer=GroupAllocator(groups) if groups else None)
    learner = ActiveLearner(camp, backend.provider(), collectives, layouts, sizes, algorithms,
                            budget_s=budget_s, **learner_options)
    return learner.run()


@TUNERS.register("active")
class ActiveTuner(Tuner):
    name = "active"
    summary = "active learning as in ACCLAiM, random forests pick the points to measure (docs/active.md)"

    def __init__(self, provider, space: TuningSpace, baselines: list[str]):
        super().__init__(provider, space, baselines)
        self.outcome: ActiveOutcome | None = None

    def plan(self) -> list[BenchSpec]:
        raise NotImplementedError("the active tuner chooses its points as it learns: use run()")

    def run(self, campaign: Campaign) -> CampaignSummary:
        learner = ActiveLearner(campaign, self.provider, self.space.collectives, self.space.layouts,
                                self.space.sizes, self.space.algorithms)
        self.outcome = learner.run()
        self._learner = learner
        return self.outcome.summary

    def decide(self, results: Results, provenance: dict) -> DecisionTable:
        if self.outcome is None:
            raise RuntimeError("ActiveTuner.decide() before run()")
        return self._learner.decide(provenance)
