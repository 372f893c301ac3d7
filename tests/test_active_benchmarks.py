"""The active learner's evidence scripts (benchmarks/active_*.py), from an expert review:
refits carry the learner's untrusted algorithms, every score counts failed picks (a
model picking failing algorithms had scored better), and the active and random
learners are scored on the same test sets. Synthetic data, no MPI."""
from __future__ import annotations

import importlib.util
import os
from types import SimpleNamespace

import numpy as np

from colltune.decision import DecisionTable, Entry, Rule
from colltune.tuners.active_model import CollectiveModel

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


AM = _load("active_models")
AL = _load("active_learning")
NP2 = _load("active_nonpow2")

ALGS = ["fast_but_wrong_once", "slow"]


def _wrong_once():
    """'fast_but_wrong_once' is faster everywhere and returned wrong data at 3x2 @
    3000 B: the learner (active_exclude_wrong) stops trusting it."""
    measured = {(n, 2, m): {"fast_but_wrong_once": 1e-5, "slow": 2e-5}
                for n in (2, 3, 4) for m in (8, 64, 512, 4096)}
    measured[(3, 2, 3000)] = {"fast_but_wrong_once": None, "slow": 2e-5}
    return measured


def _learner(measured):
    model = CollectiveModel(ALGS, 16, 1, features="ranks")
    model.fit(measured)
    model.untrusted.add("fast_but_wrong_once")          # ActiveLearner._collect on WRONG
    settings = SimpleNamespace(active_trees=16, active_seed=1, active_model="forest",
                               active_per_algorithm=False, active_features="ranks", active_rules="bisect")
    grid = [(n, 2, m) for n in (2, 3, 4) for m in (8, 64, 512, 4096)]
    state = SimpleNamespace(model=model, grid=grid, algorithms=[SimpleNamespace(provider="smpi")])
    return SimpleNamespace(states={"bcast": state}, settings=settings)


def test_refits_of_the_learners_model_keep_its_untrusted_algorithms():
    measured = _wrong_once()
    learner = _learner(measured)
    snap = {"measured": measured, "untrusted": sorted(learner.states["bcast"].model.untrusted)}
    q = np.array([(2, 2, 1000), (4, 2, 4096)])
    assert learner.states["bcast"].model.best(q) == ["slow", "slow"]
    assert AM.model_at(learner, "bcast", snap).best(q) == ["slow", "slow"]
    table = AM.table_of(learner, "bcast", snap)
    assert {r.algorithm for e in table.entries for r in e.rules} == {"slow"}
    entry = {"labels": ALGS, "trees": 16, "seed": 1, "features": "ranks", "candidates": learner.states["bcast"].grid,
             "provider": "smpi"}
    table = NP2.table_at(entry, "bcast", snap)
    assert {r.algorithm for e in table.entries for r in e.rules} == {"slow"}


class _Picks:
    """A model whose picks are given."""

    def __init__(self, picks):
        self.picks = picks

    def best(self, points):
        return [self.picks[tuple(int(x) for x in p)] for p in points]


def test_every_score_counts_failed_picks():
    truth = {(2, 2, 8): {"a": 1.0, "b": 2.0}, (2, 2, 64): {"a": None, "b": 3.0},
             (3, 2, 8): {"a": 1.0, "b": 1.5}}
    tests = {"pow2": sorted(truth)}
    # picks 'a' where it failed: its failed pick is counted, not dropped from the score
    failing = _Picks({(2, 2, 8): "a", (2, 2, 64): "a", (3, 2, 8): "a"})
    honest = _Picks({(2, 2, 8): "a", (2, 2, 64): "b", (3, 2, 8): "a"})
    assert AM.quick_score(failing, "bcast", truth, tests, {}) == {"pow2": (1.0, 1)}
    assert AM.quick_score(honest, "bcast", truth, tests, {}) == {"pow2": (1.0, 0)}
    assert AM.fmt_quick({"pow2": (1.0, 1), "np2": (1.02, 0)}) == "1.0000 f1 / 1.0200"
    assert AM.pooled_slowdown(failing, {}, truth) == (1.0, 2, 1)
    assert AM.pooled_slowdown(honest, {}, truth) == (1.0, 3, 0)


def test_active_and_random_learners_are_scored_on_the_same_test_sets():
    """benchmarks/active_learning.py had cut the non-pow2 test set after each
    learner's run: the active learner was scored before the random learners'
    training sizes were removed, the random ones after."""
    truth = {(2, 1, m): {"a": 1.0, "b": 2.0 if m != 3000 else 0.5} for m in (12, 100, 3000, 12000)}
    tests = {"nonpow2_sizes": sorted(truth)}
    table = DecisionTable("active", {}, (Entry("bcast", 2, 1, (Rule(0, "a", "smpi"),)),))
    curves = [[{"points": 4, "tables": {"": table}}], [{"points": 4, "tables": {"": table}}]]
    trained = [{(2, 1, 12000)}, {(2, 1, 3000)}]                # each learner's random sizes
    common = AL.common_tests(tests, trained[0] | trained[1])
    assert common == {"nonpow2_sizes": [(2, 1, 12), (2, 1, 100)]}
    AL.score_curves(curves, "bcast", truth, common)
    a, r = curves[0][0]["test_nonpow2_sizes"], curves[1][0]["test_nonpow2_sizes"]
    assert a == r and a["points"] == 2 and "tables" not in curves[0][0]
