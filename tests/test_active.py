"""Active-learning tuner: rule generation and the model (unit), the loop on real
smpirun runs on the small platform (selection by variance, non-power-of-two sizes
every fifth point, stopping by cap / budget / convergence, a valid pruned table)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from colltune import config
from colltune.decision import DecisionTable
from colltune.store import Store
from colltune.tuners.active import ActiveLearner, tune_active
from colltune.tuners.active_model import CollectiveModel, failed_by_ppn, is_pow2
from colltune.tuners.active_rules import bisect_choices, midpoint, rules_from_choices, rules_from_samples

from conftest import CACHE, run_cli

ALGS = ["binomial_tree", "flattree", "scatter_rdb_allgather", "NTSL"]
LAYOUTS = [(n, p) for n in (1, 2, 3, 4) for p in (1, 2)]
SIZES = [8, 32, 128, 512, 2048, 8192]


# -- rule generation (unit) ------------------------------------------------------
def _chooser(table):
    def choose(sizes):
        return [table(m) for m in sizes]
    return choose


def test_midpoint_is_between_and_not_a_power_of_two():
    for e in range(1, 20):
        a, c = 1 << e, 1 << (e + 1)
        b = midpoint(a, c)
        assert a < b < c and not is_pow2(b)
    assert midpoint(8, 64) not in (8, 64) and not is_pow2(midpoint(8, 64))


@pytest.mark.parametrize("at_mid,expected", [
    ("A", [(0, "A"), (32, "B")]),            # middle agrees with A: break at C
    ("B", [(0, "A"), (17, "B")]),            # middle agrees with C: break just above A
    ("C", [(0, "A"), (17, "C"), (32, "B")]),  # a third algorithm in between
])
def test_rules_query_the_midpoint_and_prune(at_mid, expected):
    asked = []

    def pick(m):
        asked.append(m)
        return "A" if m <= 16 else "B" if is_pow2(m) else at_mid
    rules = rules_from_choices([8, 16, 32, 64], _chooser(pick), "smpi", {8, 64})
    assert [(r.min_size, r.algorithm) for r in rules] == expected
    assert [m for m in asked if not is_pow2(m)] == [midpoint(16, 32)]   # only where it changes
    assert sorted(m for r in rules for m in r.measured_sizes) == [8, 64]


def test_rules_without_change_are_one_rule():
    rules = rules_from_choices([8, 16, 32], _chooser(lambda m: "X"), "smpi")
    assert [(r.min_size, r.algorithm) for r in rules] == [(0, "X")]


def _best(pick):
    asked = []

    def best(points):
        asked.append(list(points))
        return [pick(n, m) for n, _, m in points]
    return best, asked


def test_bisection_finds_the_models_switch_points():
    # layout 2: X below 5000 B, Y from there; layout 3: X / Z from 3000 / Y from 3500
    def pick(n, m):
        if n == 2:
            return "X" if m < 5000 else "Y"
        return "X" if m < 3000 else "Z" if m < 3500 else "Y"
    best, asked = _best(pick)
    samples = bisect_choices([(2, 1), (3, 1)], [1024, 2048, 4096, 8192], best)   # to the byte
    r2 = rules_from_samples(samples[(2, 1)], "smpi", {1024, 8192})
    r3 = rules_from_samples(samples[(3, 1)], "smpi")
    assert [(r.min_size, r.algorithm) for r in r2] == [(0, "X"), (5000, "Y")]
    assert [(r.min_size, r.algorithm) for r in r3] == [(0, "X"), (3000, "Z"), (3500, "Y")]
    assert [m for r in r2 for m in r.measured_sizes] == [1024, 8192]
    assert len(asked) <= 1 + 12                      # one batched query per level (2^12 = 4096)
    # a depth limit stops earlier: the break is then between the last two samples
    best, _ = _best(pick)
    coarse = rules_from_samples(bisect_choices([(2, 1)], [4096, 8192], best, 4)[(2, 1)], "smpi")
    assert [r.algorithm for r in coarse] == ["X", "Y"] and 4096 < coarse[1].min_size < 5400
    # every rule start is where the model's answer changes, and between samples
    for lay, rules in (((2, 1), r2), ((3, 1), r3)):
        for r in rules[1:]:
            assert pick(lay[0], r.min_size) == r.algorithm


def test_bisection_depth_one_is_the_midpoint_query():
    best, asked = _best(lambda n, m: "A" if m <= 16 else "B")
    samples = bisect_choices([(2, 1)], [8, 16, 32, 64], best, 1)
    assert [m for m, _ in samples[(2, 1)]] == [8, 16, midpoint(16, 32), 32, 64]
    rules = rules_from_samples(samples[(2, 1)], "smpi")
    b = midpoint(16, 32)
    # B answers like C: the change lies between A and B, the rule breaks at their middle
    assert [(r.min_size, r.algorithm) for r in rules] == [(0, "A"), (math.ceil(math.sqrt(16 * b)), "B")]
    # no change: the model is asked at the powers of two only
    best, asked = _best(lambda n, m: "X")
    samples = bisect_choices([(2, 1)], [8, 16, 32], best, 8)
    assert len(asked) == 1 and rules_from_samples(samples[(2, 1)], "smpi")[0].algorithm == "X"


# -- the model (unit) ----------------------------------------------------------
def _synthetic():
    """'fast' wins below 1 KiB, 'big' above; 'broken' always fails."""
    measured = {}
    for n in (2, 4, 8):
        for e in range(3, 15, 2):
            m = 1 << e
            measured[(n, 2, m)] = {"fast": 1e-6 * (1 + m / 1024), "big": 2e-6 * (1 + m / 4096),
                                   "broken": None}
    return measured


VARIANTS = [("forest", False, "acclaim"), ("extratrees", False, "acclaim"), ("forest", True, "acclaim"),
            ("forest", False, "ranks"), ("extratrees", True, "ranks")]


@pytest.mark.parametrize("kind,per_algorithm,features", VARIANTS)
def test_jackknife_variance_matches_leave_one_tree_out(kind, per_algorithm, features):
    model = CollectiveModel(["fast", "big", "broken"], trees=16, seed=3, kind=kind,
                            per_algorithm=per_algorithm, features=features)
    model.fit(_synthetic())
    pts = np.array([(3, 2, 100), (8, 2, 1 << 20)])
    trees = model.tree_predictions(pts)
    b = trees.shape[0]
    mean = trees.mean(axis=0)
    loo = np.stack([np.delete(trees, i, axis=0).mean(axis=0) for i in range(b)])
    expect = (b - 1) / b * ((loo - mean) ** 2).sum(axis=0)
    assert np.allclose(model.variance(pts), expect)
    assert (model.variance(pts) >= 0).all()


@pytest.mark.parametrize("kind,per_algorithm,features", VARIANTS)
def test_model_picks_the_faster_and_never_a_failing_algorithm(kind, per_algorithm, features):
    model = CollectiveModel(["broken", "fast", "big"], trees=32, seed=1, kind=kind,
                            per_algorithm=per_algorithm, features=features)
    model.fit(_synthetic())
    best = model.best(np.array([(4, 2, 16), (4, 2, 1 << 13)]))
    assert best == ["fast", "big"]
    assert (model.ok_probability(np.array([(4, 2, 64)]))[0, 0]) == 0.0


def test_an_algorithm_that_failed_at_every_point_of_a_ppn_is_not_picked_there():
    """'smp' is fastest and works at ppn 1, 2 and 4, and failed at all of its ppn-3
    points (as SMPI's smp_rdb allreduce deadlocks at ppn 3): never picked at ppn 3,
    at a layout nobody measured either; one failure alone is not enough evidence."""
    measured = {}
    for n in (2, 3, 4, 5):
        for p in (1, 2, 3, 4):
            for m in (8, 4096, 16384):
                measured[(n, p, m)] = {"smp": None if p == 3 else 1e-6, "flat": 2e-6}
    model = CollectiveModel(["smp", "flat"], trees=16, seed=1)
    model.fit(measured)
    assert model.failed_ppn == {"smp": {3}}
    pts = np.array([(6, 3, 9000), (6, 4, 9000), (6, 2, 9000)])
    assert model.best(pts) == ["flat", "smp", "smp"]
    assert model.ok_probability(pts)[0, 0] == 0.0
    measured = {k: v for k, v in measured.items() if k[1] != 3 or k == (2, 3, 8)}
    assert failed_by_ppn(measured) == {}


def test_rank_features():
    model = CollectiveModel(["a"], trees=4, seed=1, features="ranks")
    f = model.point_features([(3, 2, 1024), (4, 2, 8), (1, 1, 64)])
    assert f.tolist() == [[3, 2, 10, math.log2(6), 0], [4, 2, 3, 3, 1], [1, 1, 6, 0, 1]]
    assert CollectiveModel(["a"], trees=4, seed=1).point_features([(3, 2, 1024)]).tolist() == [[3, 2, 10]]
    with pytest.raises(ValueError):
        CollectiveModel(["a"], trees=4, seed=1, features="nope")


def test_decision_variance_is_the_variance_of_the_best_runner_up_gap():
    model = CollectiveModel(["fast", "big", "broken"], trees=16, seed=3)
    model.fit(_synthetic())
    pts = np.array([(3, 2, 100), (8, 2, 1 << 12), (2, 1, 1 << 16)])
    trees = model.tree_predictions(pts)
    mean = trees.mean(axis=0)
    mean[:, 2] = np.inf                      # "broken" never works: not a candidate
    want = []
    for i in range(len(pts)):
        first, second = np.argsort(mean[i])[:2]
        gap = trees[:, i, second] - trees[:, i, first]
        b = len(gap)
        loo = np.array([np.delete(gap, j).mean() for j in range(b)])
        want.append((b - 1) / b * ((loo - gap.mean()) ** 2).sum())
    assert np.allclose(model.decision_variance(pts), want)


def test_table_change_is_the_predicted_cost_of_the_previous_choices():
    from colltune.tuners.active import ActiveLearner, CollectiveState
    model = CollectiveModel(["fast", "big", "broken"], trees=16, seed=3)
    model.fit(_synthetic())
    grid = [(n, 2, 1 << e) for n in (2, 4) for e in range(3, 16)]
    st = CollectiveState("bcast", [], grid, model)
    assert ActiveLearner._table_change(None, st) is None          # nothing to compare with
    assert ActiveLearner._table_change(None, st) == 0.0           # same model, same choices
    now = st.choices.copy()
    st.choices = 1 - now                                          # swap fast <-> big everywhere
    pred = model.predict(np.array(grid))
    idx = np.arange(len(grid))
    want = np.mean(np.exp2(pred[idx, 1 - now] - pred[idx, now]) - 1)
    assert ActiveLearner._table_change(None, st) == pytest.approx(want) and want > 0


def test_bisected_table_gives_the_models_choice_at_every_size():
    """model_entries with rules = bisect: the table's pick equals the model's own
    best at any size between the grid's powers of two (where a layout's answers
    change at most once per bracket, as here); ACCLAiM's midpoint rules do not."""
    import random
    from colltune.tuners.active import model_entries
    model = CollectiveModel(["fast", "big", "broken"], trees=16, seed=2)
    measured = _synthetic()
    measured[(4, 2, 3000)] = {"fast": 1e-6 * (1 + 3000 / 1024), "big": 2e-6 * (1 + 3000 / 4096),
                              "broken": None}        # a non-pow2 sample moves a split
    model.fit(measured)
    grid = [(n, 2, 1 << e) for n in (2, 4, 8) for e in range(3, 15)]
    table = DecisionTable("active", {}, tuple(model_entries(model, "bcast", grid, [], measured, "smpi")))
    mid = DecisionTable("active", {}, tuple(model_entries(model, "bcast", grid, [], measured, "smpi",
                                                          "midpoint")))
    rng = random.Random(5)
    sizes = [rng.randint(8, 1 << 14) for _ in range(300)]
    pts = [(n, 2, m) for n in (2, 4, 8) for m in sizes]
    want = model.best(np.array(pts))
    assert [table.lookup("bcast", *pt).algorithm for pt in pts] == want
    assert [mid.lookup("bcast", *pt).algorithm for pt in pts] != want


# -- the loop on real smpirun runs -------------------------------------------------
def _settings(**kw):
    base = {"cache_dir": CACHE, "platform": "small", "min_reps": 2, "check": "none",
            "active_batch": 2, "active_initial_points": 3, "active_max_points": 13,
            "active_min_points": 4, "active_trees": 32}
    return config.load({**base, **kw}, environ={})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Store(str(tmp_path_factory.mktemp("active") / "s.sqlite")) as s:
        yield s


@pytest.fixture(scope="module")
def capped(sim_backend, store):
    """One learner run to the point cap, with the variance of every candidate
    recorded after each fit (before the next selection)."""
    from colltune.campaign import Campaign
    sim_backend.settings = _settings(active_min_points=1000)      # never converges: runs to the cap
    seen = []

    def on_iteration(learner, rec):
        st = learner.states["bcast"]
        todo = [p for p in st.grid if p not in st.measured]
        if not todo:
            var = np.array([])
        elif learner.settings.active_uncertainty == "decision":     # the default
            var = st.model.decision_variance(np.array(todo))
        else:
            var = st.model.variance(np.array(todo)).max(axis=1)
        seen.append({"rec": rec, "todo": todo, "var": var, "picks": st.picks})

    camp = Campaign("capped", sim_backend, store, sim_backend.settings, False)
    learner = ActiveLearner(camp, sim_backend.provider(), ["bcast"], LAYOUTS, SIZES, ALGS,
                            on_iteration=on_iteration)
    return learner, learner.run(), seen


def test_loop_selects_by_variance_and_stops_at_the_cap(capped):
    learner, out, seen = capped
    st = learner.states["bcast"]
    assert out.stops == {"bcast": "point cap"}
    assert len(st.measured) == 13 and len(seen) >= 5
    assert all(n * p > 1 for n, p, _ in st.grid)              # one rank: nothing to choose
    checked = 0
    for before, after in zip(seen, seen[1:]):
        first = tuple(after["rec"]["new_points"][0])
        if is_pow2(first[2]):                                  # not moved to a non-pow2 size
            checked += 1
            top = before["var"].max()
            assert before["var"][before["todo"].index(first)] == top
            assert before["var"][before["todo"].index(first)] > np.median(before["var"])
    assert checked >= 3
    # every algorithm measured at every point (or recorded as failed, never timed)
    assert all(set(v) == set(ALGS) for v in st.measured.values())
    assert out.sequential_s > 0 and out.makespan_s == pytest.approx(out.sequential_s)  # one group


def test_every_fifth_point_has_a_random_non_power_of_two_size(capped):
    learner, out, seen = capped
    selected = [tuple(p) for s in seen[1:] for p in s["rec"]["new_points"]]
    assert len(selected) >= 10
    # picks 5 and 10 (1-based) are non-powers of two within the powers of two around a grid size
    for k in (4, 9):
        n, p, m = selected[k]
        assert not is_pow2(m) and SIZES[0] <= m <= SIZES[-1]
        assert any(g // 2 < m < 2 * g for g in SIZES)
    assert all(is_pow2(m) for i, (_, _, m) in enumerate(selected) if (i + 1) % 5)


def test_table_is_valid_pruned_and_covers_every_layout(capped):
    learner, out, _ = capped
    table = DecisionTable.from_dict(json.loads(json.dumps(out.table.to_dict())))
    assert {(e.nodes, e.ppn) for e in table.entries} == set(LAYOUTS)
    for e in table.entries:
        algs = [r.algorithm for r in e.rules]
        assert all(a != b for a, b in zip(algs, algs[1:]))     # pruned
        assert set(algs) <= set(ALGS)
    assert table.provenance["active"]["points"] == {"bcast": 13}


def test_budget_and_convergence_stop_the_loop(sim_backend, store, tmp_path):
    sim_backend.settings = _settings(active_max_points=0)
    with Store(str(tmp_path / "empty.sqlite")) as empty:
        out = tune_active(sim_backend, empty, sim_backend.settings, ["bcast"], LAYOUTS, SIZES,
                          algorithms=ALGS, budget_s=0, campaign="budget")
    # the budget bounds the launches as well: spent before the first batch started,
    # nothing is launched (the first batch alone had run 6x over a budget). 0, not a
    # tiny budget: planning a batch can take less than a millisecond
    assert out.stops == {"bcast": "budget"} and out.history == []
    assert out.summary.launches == 0 and out.summary.past_deadline > 0
    # any relative change passes a threshold of 100: converged after patience + 1 fits
    sim_backend.settings = _settings(active_max_points=0, active_threshold=100.0, active_patience=2,
                                     active_min_points=3, active_stop="variance")
    out = tune_active(sim_backend, store, sim_backend.settings, ["bcast"], LAYOUTS, SIZES,
                      algorithms=ALGS, campaign="converge")
    assert out.stops == {"bcast": "converged"}
    assert len(out.history) == 3 and out.history[-1]["converged"]
    # the table-stability rule (the default): the first fit has nothing to compare
    # with; any change passes a threshold of 100, so again patience + 1 fits
    sim_backend.settings = _settings(active_max_points=0, active_stable=100.0, active_patience=2,
                                     active_min_points=3)
    out = tune_active(sim_backend, store, sim_backend.settings, ["bcast"], LAYOUTS, SIZES,
                      algorithms=ALGS, campaign="converge-stable")
    assert out.stops == {"bcast": "converged"}
    assert len(out.history) == 3 and out.history[-1]["converged"]
    assert out.history[0]["table_change"] is None and out.history[1]["table_change"] >= 0


def test_cli_tune_strategy_active(workdir):
    out = run_cli("tune", "--strategy", "active", "--collectives", "bcast", "--nodes", "2-3",
                  "--ppn", "2", "--sizes", "8..512", "--algorithms", ",".join(ALGS[:3]),
                  "--campaign", "cli", "--check", "none", "--min-reps", "2", "-q",
                  env={"COLLTUNE_ACTIVE_MAX_POINTS": "5", "COLLTUNE_ACTIVE_BATCH": "2"})
    path = workdir / "out" / "cli.table.json"
    table = DecisionTable.load(str(path))
    assert table.tuner == "active" and {(e.nodes, e.ppn) for e in table.entries} == {(2, 2), (3, 2)}
    assert "decision table" in out.stdout
    # why it stopped, on the terminal too (it was only in the table's provenance)
    assert "active learning, bcast: stopped: point cap after 5 measured points -- NOT " \
           "converged" in out.stdout, out.stdout


def test_report_draws_the_variance_curve(capped, store, tmp_path):
    from colltune.report import render
    from colltune.report.active import active_section
    from colltune.results import Results
    learner, out, _ = capped
    history = out.table.provenance["active"]["history"]
    assert [h["iteration"] for h in history] == list(range(1, len(history) + 1))
    # (an empty campaign: the per-collective plots of render() need measured selectors)
    path = render(Results.from_store(store, "no such campaign"), ["ompi"], str(tmp_path / "r.html"),
                  extra=(active_section(history),))
    text = open(path).read()
    assert "<h2>Active learning</h2>" in text and 'alt="bcast variance"' in text


def test_untrusted_algorithm_is_never_picked():
    model = CollectiveModel(["broken", "fast", "big"], trees=32, seed=1)
    model.fit(_synthetic())
    pts = np.array([(4, 2, 16), (4, 2, 1 << 13)])
    assert model.best(pts) == ["fast", "big"]
    model.untrusted = {"fast"}
    assert "fast" not in model.best(pts)


@pytest.mark.parametrize("exclude", [True, False])
def test_an_algorithm_returning_wrong_data_is_never_in_the_table(sim_backend, store, exclude):
    """SMPI's flattree_pipeline bcast returns wrong data at sizes above 8 KiB that
    are not a multiple of 8192 and works at 8192 and 16384 B (the result check says
    so): with active_exclude_wrong (the default) the learner never names it in the
    table; without, a size range can still hand it a size where it is wrong."""
    algs = ["binomial_tree", "flattree_pipeline"]
    sim_backend.settings = _settings(active_max_points=0, active_initial_points=6, check="first",
                                     active_exclude_wrong=exclude)
    out = tune_active(sim_backend, store, sim_backend.settings, ["bcast"], [(1, 2), (2, 1)],
                      [8192, 12000, 16384], algorithms=algs, campaign=f"wrong-data-{exclude}")
    # the second run reads the first one's measurements back from the store
    wrong = store.db.execute("SELECT COUNT(*) FROM measurements WHERE status = 'wrong_result'"
                             " AND msg_size = 12000").fetchone()[0]
    picked = {r.algorithm for e in out.table.entries for r in e.rules}
    assert wrong > 0
    if exclude:
        assert picked == {"binomial_tree"}
    else:
        assert "flattree_pipeline" in picked
