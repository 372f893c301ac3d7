"""HAN task-based cost model tuner (Luo et al., CLUSTER 2020; docs/taskmodel.md).

Measures task pipelines with colltune-taskbench instead of whole collectives,
predicts every configuration of the HAN space at every (nodes, ppn, size) point
and writes the predicted best as `han` rules of the `colltune` provider.
It needs the backend and the store, which the campaign does not hand to a
tuner: `colltune tune` calls ``attach`` (commands.run_tuning) before ``plan``.
"""
from __future__ import annotations

from ..decision import DecisionTable, Entry, rules_from_points
from ..errors import ColltuneError
from ..results import Results
from ..taskmodel.costs import TaskCosts
from ..taskmodel.model import STAGES
from ..taskmodel.runner import TaskRunner
from ..taskmodel.search import SPACES, best_predicted, configurations
from . import TUNERS
from .base import Tuner

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
        return []

    def decide(self, results: Results, provenance: dict) -> DecisionTable:
        entries = []
        for coll in self.space.collectives:
            for nodes, ppn in self.space.layouts:
                pts = [(m, ALGORITHM, PROVIDER, dict(self.choices[(coll, nodes, ppn, m)][0]),
                        self.choices[(coll, nodes, ppn, m)][1]) for m in self.space.sizes]
                entries.append(Entry(coll, nodes, ppn, rules_from_points(pts)))
        prov = {**provenance, "taskmodel": {"heuristics": self.costs.heuristics,
                                            "space": self.han_space,
                                            "pipelines_measured": self.costs.measured,
                                            "pipelines_reused": self.costs.reused,
                                            "bench_simulated_s": self.costs.bench_s}}
        return DecisionTable(self.name, prov, tuple(entries))
