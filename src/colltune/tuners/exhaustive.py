"""Exhaustive search: measure every candidate at every point; the ground truth
every other tuner is measured against."""
from __future__ import annotations

from ..decision import DecisionTable, Entry, rules_from_points
from ..plan import BenchSpec
from ..results import Results
from . import TUNERS
from .base import Tuner, within


@TUNERS.register("exhaustive")
class ExhaustiveTuner(Tuner):
    name = "exhaustive"
    summary = "measure every candidate at every point (the ground truth)"

    def arms(self, collective: str):
        """What the table may choose (Provider.arms), within --algorithms (which never
        drops the library's default decision)."""
        return within(self.provider, collective, self.space.algorithms,
                      self.provider.arms(collective))

    def candidates(self, collective: str):
        algs = within(self.provider, collective, self.space.algorithms,
                      self.provider.algorithms(collective))
        sels = [s for s in self.provider.selectors(collective) if s.name in self.baselines]
        # Baselines first: an interrupted campaign can already compare with them;
        # then the arms, then what is measured but never chosen (not deployable).
        return list(dict.fromkeys(sels + self.arms(collective) + algs))

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
            # only this campaign's arms, by provider and label: a store may hold
            # algorithms the provider no longer offers (or that the user excluded),
            # and two providers may have algorithms of the same name
            arms = {(a.provider, a.label) for a in self.arms(coll)}
            pts = results.filter(collective=coll, scenario="plain").arms(arms)
            entries += self._entries(pts.best(selectors=True), pts.ok().points)
        return DecisionTable(self.name, provenance, tuple(entries))

    @staticmethod
    def _entries(best, ok) -> list[Entry]:
        """One entry per layout, with every arm's successful times (ok) besides the
        winners: robust_rules generalises from them (docs/rules.md)."""
        layout = ["collective", "nodes", "ppn"]
        measured = {k: tuple(sorted((int(r.msg_size), r.provider, r.algorithm, float(r.ttc_median_s))
                                    for r in g.itertuples()))
                    for k, g in ok.groupby(layout)}
        entries = []
        for (coll, nodes, ppn), g in best.groupby(layout):
            pts = [(int(r.msg_size), r.algorithm, r.provider, {}, float(r.ttc_median_s))
                   for r in g.itertuples()]
            entries.append(Entry(coll, int(nodes), int(ppn), rules_from_points(pts),
                                 measured.get((coll, nodes, ppn), ())))
        return entries
