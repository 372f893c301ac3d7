"""libcolltune's guard (COLLTUNE_GUARD=N): per communicator and (collective, bytes),
the rules file's algorithm and the library's collective take turns, N timed calls
each, and the faster runs for the rest of the job. On SMPI (deterministic) the
verdict is checked both ways; on every library the adversarial onlinecheck
program (data-dependent calls on split communicators) must still agree on every
rank and give correct results; bad values warn once and leave the guard off."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from conftest import CACHE, REPO, have_mpi

from colltune import mpi, platforms
from colltune.backends.local import oversubscribe_args
from colltune.providers.colltune import libcolltune, link_args, preload_args
from colltune.subcommands.run import compile_app

LOOP = os.path.join(REPO, "tests", "data", "interpose", "guardloop.c")
ONLINECHECK = os.path.join(REPO, "native", "tests", "onlinecheck.c")


class Launcher:
    """A program under libcolltune: SMPI linked in (4 hosts x 2 of `small`), else preloaded."""

    def __init__(self, name, app, tmp):
        self.impl, self.tmp = mpi.find(name), tmp
        lib = libcolltune(self.impl, CACHE)
        if name == "smpi":
            self.app = compile_app(self.impl, app, CACHE, link_args(lib))
            plat = platforms.load("small")
            hosts = plat.write_hostfile(4, 2, tmp / "hosts")
            self.prefix = lambda n, cfg: [self.impl.launcher, "-np", str(n), "-platform",
                                          plat.xml_path, "-hostfile", hosts,
                                          *plat.smpirun_cfg_args(), *cfg,
                                          "--log=root.thres:critical"]
        else:
            self.app = compile_app(self.impl, app, CACHE, [])
            self.prefix = lambda n, cfg: [self.impl.launcher, *oversubscribe_args(self.impl, n),
                                          *preload_args(self.impl, lib), "-n", str(n)]

    def __call__(self, n, rules, env, *args, cfg=()):
        rules_path = self.tmp / f"r{len(os.listdir(self.tmp))}.rules"
        rules_path.write_text("colltune-rules 1\n" + rules)
        report = self.tmp / f"{rules_path.stem}.jsonl"
        proc = subprocess.run([*self.prefix(n, cfg), str(self.app), *args], capture_output=True,
                              text=True, timeout=300, cwd=self.tmp,
                              env={**self.impl.run_env(), "COLLTUNE_RULES": str(rules_path),
                                   "COLLTUNE_REPORT": str(report), **env})
        lines = [json.loads(x) for x in report.read_text().splitlines()] if report.exists() else []
        return proc, lines


def warnings(proc):
    return [line for line in proc.stderr.splitlines() if line.startswith("colltune: warning")]


def origins(rep, coll):
    return [(r["origin"], r["ran"]) for r in rep if r["collective"] == coll]


@pytest.fixture(scope="module")
def smpi_loop(tmp_path_factory):
    return Launcher("smpi", LOOP, tmp_path_factory.mktemp("guard-smpi"))


def test_guard_keeps_the_library_where_the_rule_is_slower(smpi_loop):
    """A linear bcast of 256 KiB to 8 ranks against SMPI's default: the library wins."""
    proc, rep = smpi_loop(8, "bcast -> linear\n", {"COLLTUNE_GUARD": "2"}, "65536", "12")
    assert proc.returncode == 0 and "guardloop ok: 192 calls, 0 failures" in proc.stdout, proc.stderr
    assert not warnings(proc)
    seen = origins(rep, "bcast")
    assert ("rules line 2, guard trying", "linear") in seen
    assert ("rules line 2, guard trying", "library") in seen
    assert ("rules line 2, guard: library faster", "library") in seen
    assert {r.get("guard") for r in rep if r["collective"] == "bcast"} == {"trying", "library"}
    assert not any(o == "rules line 2, guard kept it" for o, _ in seen)


def test_guard_keeps_the_rule_where_the_library_is_slower(smpi_loop):
    """The library forced to a flat tree (smpi/bcast:flattree), the rule a binomial tree."""
    proc, rep = smpi_loop(8, "bcast -> binomial\n", {"COLLTUNE_GUARD": "2"}, "65536", "12",
                          cfg=["--cfg=smpi/bcast:flattree"])
    assert proc.returncode == 0 and "guardloop ok: 192 calls, 0 failures" in proc.stdout, proc.stderr
    seen = origins(rep, "bcast")
    assert ("rules line 2, guard kept it", "binomial") in seen
    assert not any(o == "rules line 2, guard: library faster" for o, _ in seen)


def test_without_the_guard_the_rule_runs(smpi_loop):
    proc, rep = smpi_loop(8, "bcast -> linear\n", {}, "65536", "12")
    assert proc.returncode == 0 and "0 failures" in proc.stdout, proc.stderr
    assert set(origins(rep, "bcast")) == {("rules line 2", "linear")}
    assert all("guard" not in r for r in rep)


@pytest.mark.parametrize("value", ["abc", "-1", "100001"])
def test_bad_value_warns_once_and_leaves_the_guard_off(smpi_loop, value):
    proc, rep = smpi_loop(8, "bcast -> linear\n", {"COLLTUNE_GUARD": value}, "100", "8")
    assert proc.returncode == 0 and "0 failures" in proc.stdout, proc.stderr
    assert warnings(proc) == [f"colltune: warning: COLLTUNE_GUARD={value} is not an integer in "
                              f"[0, 100000] (on some rank); the guard is off"]
    assert set(origins(rep, "bcast")) == {("rules line 2", "linear")}


RULES_ALL = """bcast bytes=..999 -> binomial
bcast -> scatter_ring_allgather
reduce -> binomial
allreduce bytes=..400 -> recursive_doubling
allreduce -> ring
allgather -> ring
"""


@pytest.mark.parametrize("name", ["smpi", "openmpi", "mpich"])
def test_ranks_agree_on_data_dependent_calls_and_split_communicators(name, tmp_path):
    """onlinecheck: blocks explored and decided on communicators only some groups use,
    counts drawn at run time; a disagreement would hang or give wrong results."""
    if name != "smpi" and not have_mpi(name):
        pytest.skip(f"{name} not installed")
    run = Launcher(name, ONLINECHECK, tmp_path)
    n = 8 if name == "smpi" else 4
    proc, rep = run(n, RULES_ALL, {"COLLTUNE_GUARD": "1"}, "40")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"onlinecheck ok: [1-9]\d* calls, 0 failures", proc.stdout), proc.stdout
    assert not warnings(proc)
    decided = {r["origin"].split(", ", 1)[1] for r in rep if "guard" in r["origin"]}
    assert "guard trying" in decided and decided & {"guard kept it", "guard: library faster"}
