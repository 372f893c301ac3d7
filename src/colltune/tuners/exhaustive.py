"""Exhaustive search: measure every candidate at every point; the ground truth
every other tuner is measured against."""
from __future__ import annotations

from ..decision import DecisionTable, Entry, rules_from_points
from ..plan import BenchSpec
from ..providers.base import ALGORITHM
from ..results import Results
from . import TUNERS
from .base import Tuner


@TUNERS.register("exhaustive")
class ExhaustiveTuner(Tuner):
    name = "exhaustive"
    summary = "measure every candidate at every point (the ground truth)"

    def candidates(self, collective: str):
        algs = self.provider.algorithms(collective)
        if self.space.algorithms:
            algs = [a for a in algs if a.name in self.space.algorithms]
        sels = [s for s in self.provider.selectors(collective) if s.name in self.baselines]
        # Baselines first: an interrupted campaign can already compare with them.
        return sels + algs

    def plan(self) -> list[BenchSpec]:
        specs = []
        for coll in self.space.collectives:
            for nodes, ppn in self.space.layouts:
                for alg in self.candidates(coll):
                    specs.append(BenchSpec(coll, alg, nodes, ppn, tuple(self.space.sizes),
                                           root=self.space.root))
        return specs

    def decide(self, results: Results, provenance: dict) -> DecisionTable:
        entries = []
        for coll in self.space.collectives:
            # only this campaign's candidates: a store may hold algorithms the
            # provider no longer offers (or that the user excluded)
            names = [a.label for a in self.candidates(coll) if a.kind == ALGORITHM]
            best = results.filter(collective=coll, scenario="plain", algorithm=names).best()
            entries += self._entries(best)
        return DecisionTable(self.name, provenance, tuple(entries))

    @staticmethod
    def _entries(best) -> list[Entry]:
        entries = []
        for (coll, nodes, ppn), g in best.groupby(["collective", "nodes", "ppn"]):
            pts = [(int(r.msg_size), r.algorithm, r.provider, {}, float(r.ttc_median_s))
                   for r in g.itertuples()]
            entries.append(Entry(coll, int(nodes), int(ppn), rules_from_points(pts)))
        return entries
