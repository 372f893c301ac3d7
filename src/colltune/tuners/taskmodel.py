"""HAN task-based cost model tuner (Luo et al., CLUSTER 2020; docs/taskmodel.md).

Measures task pipelines with colltune-taskbench instead of whole collectives,
predicts every configuration of the HAN space at every (nodes, ppn, size) point
and writes the predicted best as `han` rules of the `colltune` provider.
With a provider that offers colltune's algorithms beside others (--provider both,
docs/deploy.md) the model does the HAN part only: the configuration it predicts best
at a point is measured there, as every other arm is (the library's default decision,
its algorithms where deployable, colltune's flat ones; HAN's catalogue presets are
replaced by the model's choice), and the fastest measured arm wins, as in the
exhaustive tuner. It needs the backend and the store, which the campaign does not
hand to a tuner: `colltune tune` calls ``attach`` (commands.run_tuning) before ``plan``.
"""
from __future__ import annotations

import pandas as pd

from ..decision import DecisionTable, Entry, rules_from_points
from ..errors import ColltuneError
from ..plan import BenchSpec
from ..results import Results
from ..taskmodel.costs import TaskCosts
from ..taskmodel.model import STAGES
from ..taskmodel.runner import TaskRunner
from ..taskmodel.search import SPACES, best_predicted, configurations
from . import TUNERS
from .base import Tuner
from .exhaustive import ExhaustiveTuner

PROVIDER, ALGORITHM = "colltune", "han"


@TUNERS.register("taskmodel")
class TaskModelTuner(Tuner):
    name = "taskmodel"
    summary = "HAN task cost model, measures task pipelines and predicts every HAN configuration (docs/taskmodel.md)"

    def attach(self, backend, settings, store, heuristics: bool = False,
               space: str = "han") -> None:
        if space not in SPACES:
            raise ColltuneError(f"--han-space {space!r}: expected one of {', '.join(SPACES)}")
        self.costs = TaskCosts(store, TaskRunner(backend, settings), backend.provenance(),
                               heuristics=heuristics)
        self.han_space = space
        self.choices: dict = {}

    def plan(self):
        """Measures the task pipelines the predictions need (none twice); the
        campaign itself then has nothing to run."""
        if not hasattr(self, "costs"):
            raise ColltuneError("the taskmodel tuner needs attach(backend, settings, store)")
        other = [c for c in self.space.collectives if c not in STAGES]
        if other:
            raise ColltuneError(f"the taskmodel tuner knows the HAN task pipelines of "
                                f"{', '.join(STAGES)}, not {', '.join(other)}")
        for coll in self.space.collectives:
            confs = configurations(coll, self.han_space)
            for nodes, ppn in self.space.layouts:
                for m in self.space.sizes:
                    self.choices[(coll, nodes, ppn, m)] = best_predicted(
                        self.costs, coll, nodes, ppn, m, confs)
        if self.provider.colltune_part is None:
            return []
        # --provider both: the other arms at every point, the model's HAN choice where chosen
        self._others = ExhaustiveTuner(self.provider, self.space, self.baselines)
        specs = [s for s in self._others.plan() if not self._is_han(s.algorithm)]
        self._han_alg = {key: self._han(key[0], conf) for key, (conf, _) in self.choices.items()}
        for coll in self.space.collectives:
            for nodes, ppn in self.space.layouts:
                by_conf: dict = {}
                for m in self.space.sizes:
                    by_conf.setdefault(self._han_alg[(coll, nodes, ppn, m)], []).append(m)
                specs += [BenchSpec(coll, alg, nodes, ppn, tuple(ms), root=self.space.root)
                          for alg, ms in by_conf.items()]
        return specs

    @staticmethod
    def _is_han(alg) -> bool:
        return (alg.provider, alg.name) == (PROVIDER, ALGORITHM)

    def _han(self, coll: str, conf: dict):
        """The model's configuration as an algorithm of colltune's part (its label carries
        every parameter, so each configuration has its own store points)."""
        label = f"{ALGORITHM}[{','.join(f'{k}={v}' for k, v in sorted(conf.items()))}]"
        return self.provider.colltune_part.lookup(coll, label)

    def decide(self, results: Results, provenance: dict) -> DecisionTable:
        if self.provider.colltune_part is not None:
            return self._decide_measured(results, provenance)
        entries = []
        for coll in self.space.collectives:
            for nodes, ppn in self.space.layouts:
                pts = [(m, ALGORITHM, PROVIDER, dict(self.choices[(coll, nodes, ppn, m)][0]),
                        self.choices[(coll, nodes, ppn, m)][1]) for m in self.space.sizes]
                entries.append(Entry(coll, nodes, ppn, rules_from_points(pts)))
        # every rule is colltune's HAN, whatever provider the campaign's backend has
        return DecisionTable(self.name, self._provenance({**provenance, "arms": {"provider": PROVIDER}}),
                             tuple(entries))

    def _provenance(self, provenance: dict, **extra) -> dict:
        return {**provenance, "taskmodel": {"heuristics": self.costs.heuristics,
                                            "space": self.han_space, **extra,
                                            "pipelines_measured": self.costs.measured,
                                            "pipelines_reused": self.costs.reused,
                                            "bench_simulated_s": self.costs.bench_s}}

    def _decide_measured(self, results: Results, provenance: dict) -> DecisionTable:
        """--provider both: per point the fastest measured arm among the other arms and
        the model's HAN choice there (a configuration chosen at another size of the
        layout does not compete at this one: it was not measured there)."""
        entries = []
        for coll in self.space.collectives:
            others = {(a.provider, a.label) for a in self._others.arms(coll) if not self._is_han(a)}
            for nodes, ppn in self.space.layouts:
                chosen = {(PROVIDER, self._han_alg[(coll, nodes, ppn, m)].label, m) for m in self.space.sizes}
                pts = results.filter(collective=coll, nodes=nodes, ppn=ppn, scenario="plain") \
                    .arms(others | {(p, a) for p, a, _ in chosen})
                p = pts.points
                keep = pd.Series([(pr, a) in others or (pr, a, int(m)) in chosen for pr, a, m in
                                  zip(p["provider"], p["algorithm"], p["msg_size"])], index=p.index, dtype=bool)
                pts = Results(p[keep].copy(), pts.runs.copy())
                entries += ExhaustiveTuner._entries(pts.best(selectors=True), pts.ok().points)
        return DecisionTable(self.name, self._provenance(provenance, han_part_of="both"), tuple(entries))
