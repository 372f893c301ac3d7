"""Active learner, from an expert review: a collective's random stream does not depend
on the other collectives tuned with it; the model's edge cases (runner-up predicted
to fail, nothing predicted to work); the cost the learner reports (launches, wall
time, timeouts next to the simulated seconds)."""
from __future__ import annotations

import numpy as np
import pytest

from colltune import config
from colltune.store import Store
from colltune.tuners.active import tune_active
from colltune.tuners.active_model import CollectiveModel

from conftest import CACHE

# two of SMPI's bcast and three of its allreduce algorithms (the library's selectors are
# always arms): --algorithms names each collective's own and ignores the other's
ALGS = ["binomial_tree", "flattree", "rdb", "lr", "redbcast"]
LAYOUTS = [(1, 2), (2, 1), (2, 2), (3, 1)]
SIZES = [8, 64, 512, 4096]


def _settings(**kw):
    base = {"cache_dir": CACHE, "platform": "small", "min_reps": 2, "check": "none",
            "active_batch": 2, "active_initial_points": 3, "active_max_points": 9,
            "active_min_points": 1000, "active_trees": 16}
    return config.load({**base, **kw}, environ={})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Store(str(tmp_path_factory.mktemp("active-review") / "s.sqlite")) as s:
        yield s


# -- 1. one random stream per collective -----------------------------------------
def test_a_collectives_points_and_table_do_not_depend_on_the_others_tuned(sim_backend, store):
    """The learner had one random.Random(active_seed) for all collectives: allreduce's
    initial points and random non-power-of-two sizes (and so its table) changed when
    bcast was tuned in the same call. Pick 5 is a random non-pow2 size."""
    sim_backend.settings = _settings()
    runs = {}
    for colls in (["allreduce"], ["bcast", "allreduce"]):
        out = tune_active(sim_backend, store, sim_backend.settings, colls, LAYOUTS, SIZES,
                          algorithms=ALGS, campaign="rng-" + "-".join(colls))
        picks = [p for h in out.history if h["collective"] == "allreduce" for p in h["new_points"]]
        table = [e for e in out.table.entries if e.collective == "allreduce"]
        runs[len(colls)] = (picks, table, out.stops["allreduce"])
    (alone, t_alone, stop_alone), (both, t_both, stop_both) = runs[1], runs[2]
    assert len(alone) == 9 and any(m not in SIZES for _, _, m in alone)    # a non-pow2 pick
    assert alone == both
    assert t_alone == t_both and stop_alone == stop_both == "point cap"


def test_the_per_collective_seed_is_stable_and_differs_by_collective():
    from colltune.tuners.active import collective_rng
    a, b = collective_rng(1, "allreduce"), collective_rng(1, "allreduce")
    assert [a.random() for _ in range(3)] == [b.random() for _ in range(3)]
    assert collective_rng(1, "allreduce").random() != collective_rng(1, "bcast").random()
    assert collective_rng(1, "allreduce").random() != collective_rng(2, "allreduce").random()
    # not Python's salted hash(): the same number in a fresh interpreter, whatever PYTHONHASHSEED
    import subprocess
    import sys
    code = "from colltune.tuners.active import collective_rng; print(collective_rng(1, 'allreduce').random())"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": h}).stdout
            for h in ("1", "2")}
    assert outs == {f"{collective_rng(1, 'allreduce').random()}\n"}


# -- 2. the model's edge cases (pure Python, synthetic data) --------------------------
def _crossing(algs=("fast", "big")):
    """'fast' wins below 1 KiB, 'big' above (both always work)."""
    return {(n, 2, 1 << e): {"fast": 1e-6 * (1 + (1 << e) / 1024), "big": 2e-6 * (1 + (1 << e) / 4096)}
            for n in (2, 4, 8) for e in range(3, 15)}


def test_no_runner_up_when_only_one_algorithm_is_predicted_to_work():
    """docs/active.md: an algorithm the decision may not pick is never the runner-up.
    With 'big' untrusted only 'fast' is left at every point: there is no decision to
    be unsure about (the gap to an excluded algorithm's prediction had been scored)."""
    model = CollectiveModel(["fast", "big"], trees=16, seed=3)
    model.fit(_crossing())
    pts = np.array([(3, 2, 100), (8, 2, 1 << 12), (2, 2, 1 << 10)])
    assert (model.decision_variance(pts) > 0).any()          # two candidates: a real gap
    model.untrusted = {"big"}
    assert model.decision_variance(pts).tolist() == [0.0, 0.0, 0.0]
    # and where two of three are left, the gap is theirs, not the excluded one's
    three = CollectiveModel(["fast", "big", "wrong"], trees=16, seed=3)
    data = {pt: {**t, "wrong": t["fast"] * 0.5} for pt, t in _crossing().items()}
    three.fit(data)
    three.untrusted = {"wrong"}
    trees = three.tree_predictions(pts)
    mean = trees.mean(axis=0)
    first = np.where(mean[:, 0] <= mean[:, 1], 0, 1)
    gap = trees[:, np.arange(3), 1 - first] - trees[:, np.arange(3), first]
    assert np.allclose(three.decision_variance(pts), CollectiveModel._jackknife(gap))


def test_when_nothing_is_predicted_to_work_the_excluded_stay_excluded():
    """At 16 KiB every algorithm is predicted to fail: 'wrong' (fastest, returned wrong
    data somewhere: untrusted), 'broken' (failed everywhere), 'smp' (failed at both
    of its ppn-3 points) and 'big' (fails from 8 KiB on, by the classifier). The
    fallback used to restore every algorithm, so the table picked 'wrong'; now it
    picks among those only the classifier doubts ('big'), and says so in best()."""
    measured = {}
    for n in (2, 3, 4):
        for p in (1, 2, 3):
            for e in range(3, 15):
                m = 1 << e
                measured[(n, p, m)] = {"wrong": 1e-7 * (1 + m / 64), "big": 2e-6 * (1 + m / 4096),
                                       "broken": None, "smp": None if p == 3 else 3e-6 * (1 + m / 2048)}
                if m >= 8192:
                    measured[(n, p, m)].update(big=None, smp=None)
    algs = ["wrong", "big", "broken", "smp"]
    model = CollectiveModel(algs, trees=16, seed=1)
    model.fit(measured)
    model.untrusted = {"wrong"}
    pts = np.array([(3, 3, 1 << 14), (4, 1, 1 << 14), (3, 2, 64)])
    prob = model.ok_probability(pts)
    assert (prob[:2] < 0.5).all()                              # nothing predicted to work there
    picks = model.best(pts)
    assert picks[0] == "big" and picks[1] in ("big", "smp")    # never 'wrong' nor 'broken'
    assert picks[2] in ("big", "smp")
    # smp failed at every ppn-3 point: never picked at ppn 3, even as a fallback
    assert "smp" not in model.best(np.array([(n, 3, m) for n in (2, 3, 4) for m in (8, 1 << 14)]))
    # the decision variance follows the same candidates (no excluded runner-up)
    assert np.isfinite(model.decision_variance(pts)).all()
    # only when every algorithm is excluded by hard evidence does the model fall back to all
    solo = CollectiveModel(["wrong", "broken"], trees=8, seed=1)
    solo.fit({pt: {"wrong": t["wrong"], "broken": None} for pt, t in measured.items()})
    solo.untrusted = {"wrong"}
    assert solo.best(np.array([(2, 1, 8)])) == ["wrong"]


# -- 3. what the session cost: launches, wall time, timeouts ---------------------------
def test_the_table_records_launches_wall_time_and_timeouts(sim_backend, tmp_path):
    """'% of exhaustive' counts simulated benchmark seconds only; the table's provenance
    now also says how many launches the learner asked for, how many ran, the wall
    time and the points whose launch timed out (charged at the timeout)."""
    from colltune.tuners.active import cost_lines
    sim_backend.settings = _settings(active_max_points=5)
    with Store(str(tmp_path / "fresh.sqlite")) as fresh:
        out = tune_active(sim_backend, fresh, sim_backend.settings, ["bcast"], LAYOUTS, SIZES,
                          algorithms=ALGS, campaign="cost")
    act = out.table.provenance["active"]
    arms = len(out.models["bcast"].algorithms)
    # one launch per algorithm and layout of each batch (a batch's sizes at one layout share it)
    want = sum(arms * len({(n, p) for n, p, _ in h["new_points"]}) for h in out.history)
    assert act["launch_specs"] == {"bcast": want} and want > len(LAYOUTS) * arms / 2
    assert act["launches"] == out.summary.launches >= want        # fresh store: all really run
    assert act["wall_s"] == pytest.approx(out.summary.wall_s) and 0 < act["launch_wall_s"] <= act["wall_s"]
    assert act["timeouts"] == {"bcast": 0} and act["timeout_charged_s"] == {"bcast": 0.0}
    assert act["benchmark_s"]["bcast"] > 0 and out.cost == {k: act[k] for k in out.cost}
    assert out.history[-1]["launch_specs"] == want
    lines = cost_lines(act)
    assert f"{want} launches asked for, 0 timed out" in lines[0]
    assert f"{out.summary.launches} launches run" in lines[1]
    # a launch killed at the timeout: counted and charged at it; the points the campaign
    # then gave up on without launching them (consecutive timeouts) are not charged
    sim_backend.settings = _settings(active_max_points=3, timeout=0.001)
    with Store(str(tmp_path / "slow.sqlite")) as slow:
        out = tune_active(sim_backend, slow, sim_backend.settings, ["bcast"], [(2, 2)], [8, 64, 512, 4096],
                          algorithms=ALGS[:1], campaign="timeouts")
        rows = slow.db.execute("SELECT status, check_error FROM measurements").fetchall()
    act = out.table.provenance["active"]
    killed = sum(r[0] == "timeout" and not r[1].startswith("not attempted") for r in rows)
    assert killed > 0 and any(r[1].startswith("not attempted") for r in rows)
    assert act["timeouts"] == {"bcast": killed}
    assert act["timeout_charged_s"] == {"bcast": pytest.approx(killed * 0.001)}
    assert act["benchmark_s"] == {"bcast": 0.0}
    assert f"{killed} timed out (charged 0 s at their timeout)" in cost_lines(act)[0]
