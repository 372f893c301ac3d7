"""A block called fewer times per run than the budget (a review of online mode): every
call is a draw, the budget is never spent. tests/data/online/few.c makes two 8-byte
allreduces on MPI_COMM_WORLD (4x4 on SMPI's `small`, deterministic) per run.

Before: the library's arm was never drawn (untimed arms shared about 10 %/t of the
draws), the first colltune arm drawn took p -> 0.99 after a few runs, conservative
exploration skipped the block (its choice, the library, had n = 0), and `online show`
said `-> library` while every run ran rabenseifner, 3x slower than the library.

Now (docs/online.md, "The update rule"): the library's arm is timed first, on every
communicator's first call of the block, while it has n = 0 (a measured block still
without it runs only the library for a run), untimed arms are presumed as good as the
best until timed once, and the block is priced in the conservative bound against the
library.
Checked without any wall-clock timing: after N runs the library was measured, the
block's choice is the arm of lowest measured mean among those eligible, and a run with
COLLTUNE_ONLINE_RISK=0 runs exactly what `online show` says on every rank."""
from __future__ import annotations

import os
import re

from conftest import REPO, run_cli

from colltune.online import state

APP = os.path.join(REPO, "tests", "data", "online", "few.c")
KEY = ("allreduce", 4, 4, 0)


def runs(d, n, **env):
    for _ in range(n):
        proc = run_cli("run", "--layout", "4x4", "--online", str(d), "--", APP, timeout=300,
                       env={**os.environ, **env})
        assert "few: sum 120," in proc.stdout, proc.stdout + proc.stderr


def shown_choice(d) -> str:
    out = run_cli("online", "show", str(d)).stdout
    m = re.search(r"^allreduce nodes=4 ppn=4 bytes=0\.\.16 .* -> (\S+) \(", out, re.M)
    assert m, out
    return m[1]


def ran(d, log) -> set[str]:
    """The arms a run with no exploration (RISK=0) ran in the block, over every rank."""
    runs(d, 1, COLLTUNE_ONLINE_RISK="0", COLLTUNE_ONLINE_LOG=str(log))
    arms = set()
    for f in log.iterdir():
        for line in f.read_text().splitlines():
            _key, coll, cls, _idx, arm = line.split()
            if (coll, cls) == ("allreduce", "0"):
                arms.add(arm)
    assert len(list(log.iterdir())) == 16
    return arms


def check(d, log) -> state.Block:
    b = state.load(str(d / "state.txt")).blocks[KEY]
    lib = b.arm("library")
    assert lib.n >= 1, [(a.arm, a.n) for a in b.arms]           # measured against the library
    eligible = [a for a in b.arms if a.n >= 3 or (a is lib)]
    fastest = min(eligible, key=lambda a: a.mean)
    assert b.best() is fastest, [(a.arm, a.n, a.mean) for a in b.arms]
    assert shown_choice(d) == fastest.arm
    assert ran(d, log) == {fastest.arm}                          # what the job runs
    return b


def test_few_calls_per_run_are_compared_with_the_library(tmp_path, workdir):
    d = tmp_path / "state"
    runs(d, 8)
    b = check(d, tmp_path / "log")
    # the default risk (5 % of the block's time) pays for little exploration of a block
    # this small: the library, the lowest measured mean, runs, not a slower first draw
    assert b.best().arm == "library" or b.best().mean < b.arm("library").mean


def test_few_calls_per_run_converge_to_the_fastest_arm(tmp_path, workdir):
    # a risk that lets exploration run: every arm gets timed within a few runs (untimed
    # arms are not faded with t) and the block settles on the fastest, here faster than
    # the library (recursive doubling on SMPI's default selector)
    d = tmp_path / "state"
    runs(d, 8, COLLTUNE_ONLINE_RISK="100")
    b = check(d, tmp_path / "log")
    assert all(a.n >= 1 for a in b.arms), [(a.arm, a.n) for a in b.arms]
    assert min(b.arms, key=lambda a: a.mean) is b.best()
    assert b.best().arm != "library" and b.best().mean < b.arm("library").mean


def test_a_state_locked_on_a_colltune_arm_goes_back_to_the_library(tmp_path, workdir):
    """The review's state after 8 runs: rabenseifner p=0.987 n=15, the library never timed.
    `online show` says library; the next job runs and times the library, on every rank."""
    d = tmp_path / "state"
    runs(d, 1)                                     # the fingerprint, as this build writes it
    st = state.load(str(d / "state.txt"))
    b = st.blocks[KEY]
    b.runs, b.calls, b.source = 8, 16, "measured"
    for a in b.arms:
        a.n, a.mean, a.m2, a.p = 0, 0.0, 0.0, 0.003
    b.arm("rabenseifner").n, b.arm("rabenseifner").mean, b.arm("rabenseifner").p = 15, 6.54e-6, 0.985
    state.save(st, str(d / "state.txt"))
    assert shown_choice(d) == "library"
    log = tmp_path / "log"
    runs(d, 1, COLLTUNE_ONLINE_LOG=str(log))      # the default risk: no RISK=0 needed
    arms = {line.split()[-1] for f in log.iterdir() for line in f.read_text().splitlines()
            if line.split()[1:3] == ["allreduce", "0"]}
    assert arms == {"library"}
    assert state.load(str(d / "state.txt")).blocks[KEY].arm("library").n >= 1
