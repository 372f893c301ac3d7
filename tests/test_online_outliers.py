"""Online mode and outliers (docs/online-native.md, "Outliers"): a call stalled inside
the collective (native/tests/onlinenoise.c: the program's own reduction op sleeps on
chosen calls, simulated time under SMPI) is left out of its arm's statistics when it is
rare and far; an arm stalled often keeps its stalls, which are its cost. Deterministic:
SMPI, one seed, a fresh state per run, so every run draws the same arms per call."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import CACHE, REPO

from colltune import mpi, platforms
from colltune.providers.colltune import libcolltune, link_args
from colltune.subcommands.run import compile_app

APP = os.path.join(REPO, "native", "tests", "onlinenoise.c")
CALLS, COUNT, STALL_US = 96, 700, 20000
NS = 1e-8


@pytest.fixture(scope="module")
def noise(tmp_path_factory):
    impl = mpi.find("smpi")
    app = compile_app(impl, APP, CACHE, link_args(libcolltune(impl, CACHE)))
    plat = platforms.load("small")
    tmp = tmp_path_factory.mktemp("noise")
    hosts = plat.write_hostfile(2, 3, tmp / "hosts")

    def run(name: str, first: int, every: int = 0) -> dict:
        state = tmp / name
        argv = [impl.launcher, "-np", "6", "-platform", plat.xml_path, "-hostfile", hosts,
                *plat.smpirun_cfg_args(), "--log=root.thres:critical", str(app),
                str(CALLS), str(COUNT), str(STALL_US), str(first), str(every)]
        env = {**impl.run_env(), "COLLTUNE_ONLINE": str(state), "COLLTUNE_ONLINE_BUDGET": str(CALLS),
               "COLLTUNE_ONLINE_SEED": "7"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
        assert proc.returncode == 0 and "onlinenoise ok" in proc.stdout, proc.stdout + proc.stderr
        stalls = int(re.search(r"(\d+) stalls", proc.stdout)[1])
        (path,) = (state / "samples").iterdir()
        data = json.loads(path.read_text())
        (block,) = [b for b in data["blocks"] if b["collective"] == "allreduce" and b["nodes"] == 2]
        return {"stalls": stalls, "block": block, "arms": {a["arm"]: a for a in block["arms"]},
                "records": [r for r in data["records"] if r[0] == "allreduce" and r[3] == 6],
                "state": (state / "state.txt").read_text()}
    return run


def same(a: list, b: list) -> bool:
    """The same call in two runs: SMPI's clock 20 ms later rounds a few ns otherwise
    (surf/precision 1e-9)."""
    return a[:6] == b[:6] and abs(a[6] - b[6]) <= NS


def test_a_rare_stall_is_left_out_of_its_arms_mean(noise):
    calm, stalled = noise("calm", -1), noise("one-stall", 40)
    assert calm["stalls"] == 0 and stalled["stalls"] == 1
    assert all(a["outliers"] == 0 for a in calm["arms"].values()), calm["arms"]
    assert calm["block"]["outlier_s"] == 0
    # the same draws: the stalled call is the one record that differs (beyond the
    # rounding of simulated clocks 20 ms later)
    assert len(calm["records"]) == len(stalled["records"]) == CALLS
    assert [r[:6] for r in calm["records"]] == [r[:6] for r in stalled["records"]]
    slow = [(a, b) for a, b in zip(calm["records"], stalled["records"]) if not same(a, b)]
    assert len(slow) == 1 and slow[0][1][6] >= STALL_US * 1e-6, slow
    arm = slow[0][1][5]
    hit, before = stalled["arms"][arm], calm["arms"][arm]
    assert hit["outliers"] == 1 and hit["n"] == before["n"] - 1, (hit, before)
    assert stalled["block"]["outlier_s"] == pytest.approx(slow[0][1][6], rel=1e-6)
    # the arm's mean is the calm run's without that call, not 20 ms / n above it
    calm_costs = [r[6] for r, s in zip(calm["records"], stalled["records"]) if r[5] == arm and same(r, s)]
    assert hit["mean"] == pytest.approx(sum(calm_costs) / len(calm_costs), abs=NS)
    assert hit["mean"] < 2 * before["mean"]
    for name, a in stalled["arms"].items():     # the other arms are untouched
        if name != arm:
            other = calm["arms"][name]
            assert (a["n"], a["outliers"]) == (other["n"], 0), name
            assert a["mean"] == pytest.approx(other["mean"], abs=NS), name
    # the state merged the run without the outlier: its n for the arm is the run's
    line = next(x for x in stalled["state"].splitlines() if x.strip().startswith(f"arm {arm} "))
    assert f" n={hit['n']} " in line + " ", line


def test_a_frequent_stall_is_the_arms_cost(noise):
    """Every third call stalls: about a third of each arm's calls, far above the 10 %
    an outlier may be; they stay in the means."""
    often = noise("every-third", 0, 3)
    assert often["stalls"] == CALLS // 3
    assert all(a["outliers"] == 0 for a in often["arms"].values()), often["arms"]
    assert often["block"]["outlier_s"] == 0
    learnt = sum(a["n"] * a["mean"] for a in often["arms"].values())
    assert learnt >= often["stalls"] * STALL_US * 1e-6
