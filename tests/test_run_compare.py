"""`colltune run --compare`: the program under the library default, then as asked, and
the time in each intercepted collective side by side (COLLTUNE_TIMES, the interposer's
own clock: SimGrid's on SMPI, so the numbers are the simulation's)."""
from __future__ import annotations

import os
import re

import pytest

from conftest import CACHE, REPO, have_mpi, run_cli

APP = os.path.join(REPO, "src", "colltune", "apps", "collmix.c")


def _table(stdout: str) -> dict[str, list[str]]:
    head = stdout.index("colltune run --compare: the library default")
    return {ln.split()[0] if not ln.strip().startswith("all of them") else "all":
            ln.split() for ln in stdout[head:].splitlines()[2:] if ln.strip()}


def test_compare_on_smpi_prints_both_runs_side_by_side(workdir):
    rules = workdir / "r.rules"
    rules.write_text("colltune-rules 1\nbcast bytes=100000.. -> han\nallreduce bytes=1000.. -> multileader\n")
    proc = run_cli("run", "--layout", "2x4", "--rules", str(rules), "--compare", "--", APP, "3")
    assert proc.stdout.count("0 failures") == 2, proc.stdout      # the program ran twice, correct
    # rank 0 writes the timings under the build cache, which a cluster's nodes share (a
    # review: in the batch node's /tmp, a compute node's rank 0 could not write them)
    times = re.search(r"COLLTUNE_TIMES=(\S+)", proc.stderr).group(1)
    assert times.startswith(os.path.join(os.path.abspath(CACHE), "runs", "run-")), times
    # both launches' command lines are shown (the first one's had not been)
    launched = [ln for ln in proc.stderr.splitlines() if ln.startswith("colltune run: COLLTUNE_")]
    assert len(launched) == 2 and "times-default.json" in launched[0] and "COLLTUNE_RULES" in launched[1]
    # which default: no --default-selector on SMPI is its naive built-in selector, said so
    assert "the library default (SMPI's built-in default selector, naive" in proc.stdout
    rows = _table(proc.stdout)
    # collmix, 3 iterations: 2 bcasts each and a 1 MiB one in the first, 4 allreduces each,
    # and its own report's allreduce and 2 reduces (its own collectives count too)
    assert (rows["bcast"][1], rows["allreduce"][1], rows["reduce"][1]) == ("7", "13", "2"), rows
    for key in ("bcast", "allreduce", "all", "job"):
        default, this = (float(x) for x in re.findall(r"([\d.]+) ms", " ".join(rows[key])))
        ratio = float(rows[key][-1].rstrip("x"))
        assert default > 0 and this > 0 and abs(ratio - default / this) < 0.01 + 0.001 * ratio
    # the rules' algorithms beat SMPI's default selector here (bcast 1 MiB: HAN)
    assert float(rows["bcast"][-1].rstrip("x")) > 1


def test_compare_with_profile_profiles_both_runs(workdir):
    """--profile DIR under --compare: the library default's run into DIR-default (it had
    not been profiled, and nothing said so), and the command that draws both."""
    from colltune.profile.counts import load_profile
    rules = workdir / "r.rules"
    rules.write_text("colltune-rules 1\nbcast -> linear\n")
    out = workdir / "prof"
    proc = run_cli("run", "--layout", "2x2", "--rules", str(rules), "--compare", "--profile",
                   str(out), "-q", "--", APP, "1")
    assert f"profile report {out} --compare {out}-default" in proc.stdout, proc.stdout
    mine, default = load_profile(out), load_profile(f"{out}-default")
    assert mine.size == default.size == 4
    # colltune's linear bcast: every rank's from the root; the library's (SMPI's ompi) differs
    assert mine.visibility("run", "bcast") == "exact" and default.visibility("run", "bcast") == "simulator"


def test_compare_needs_something_to_compare(workdir):
    proc = run_cli("run", "--layout", "2x2", "--compare", "--", APP, "1", check=False)
    assert proc.returncode == 2 and "--compare: nothing to compare the library default with" in proc.stderr


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
def test_compare_on_real_open_mpi(workdir):
    rules = workdir / "r.rules"
    rules.write_text("colltune-rules 1\nallreduce -> ring\n")
    proc = run_cli("run", "--backend", "local", "--mpi", "openmpi", "-n", "2", "--rules", str(rules),
                   "--compare", "-q", "--", APP, "2")
    rows = _table(proc.stdout)
    assert rows["allreduce"][1] == "9" and "wall time" in proc.stdout and "noise" in proc.stdout
