"""What a run takes from the store, on real smpirun: a run that asks for the result
check never reuses an unchecked point (review rev2 F16), `--check only` checks, stored
failures that are skipped are said (F12); min_reps > max_reps is a config error, a tune
with nothing ok fails and an empty table is not exported (F2)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from colltune import config
from colltune.errors import ConfigError

from conftest import CACHE, run_cli

# SMPI's mvapich2_inter_node bcast returns wrong data at every size on 2x4 (README);
# binomial_tree is correct there and slower, so a table made of unchecked times picks
# the broken one
BROKEN, FINE = "mvapich2_inter_node", "binomial_tree"
POINTS = ["--layouts", "2x4", "--sizes", "24,100", "--jobs", "1", "-q"]


def _rows(sql: str) -> list[tuple]:
    with sqlite3.connect(os.environ["COLLTUNE_STORE"]) as db:
        return db.execute(sql).fetchall()


def _jsonl(campaign: str) -> list[dict]:
    out = run_cli("results", "export", "--format", "jsonl", "--campaign", campaign).stdout
    return [json.loads(x) for x in out.splitlines()]


def test_a_checked_run_never_reuses_unchecked_points(workdir):
    """`--check none` points (valid null) are measured again, with the check, by a tune
    that checks (the default, check=first), whichever campaign stored them: the broken
    algorithm is found wrong and the table does not choose it. The campaign that stored
    the unchecked points sees the checked ones. A later `--check none` run reuses the
    checked points (and their failures) without measuring anything."""
    run_cli("bench", "--coll", "bcast", "--algorithms", f"{BROKEN},{FINE}", "--check", "none",
            "--campaign", "nochk", *POINTS)
    assert _rows("SELECT COUNT(*), COUNT(valid) FROM measurements WHERE status='ok'") == [(4, 0)]

    out = run_cli("tune", "--collectives", "bcast", "--algorithms", f"{BROKEN},{FINE}",
                  "--campaign", "nochk2", *POINTS).stdout
    (entry,) = json.load(open(os.path.join(os.environ["COLLTUNE_OUTPUT_DIR"],
                                           "nochk2.table.json")))["entries"]
    assert [r["algorithm"] for r in entry["rules"]] == [FINE], entry["rules"]
    assert "4 stored point(s) measured again: they lacked the result check" in out, out
    recs = {(r["algorithm"], r["msg_size"]): r for r in _jsonl("nochk2")}
    for size in (24, 100):
        assert recs[(BROKEN, size)]["status"] == "wrong_result"
        assert "wrong data" in recs[(BROKEN, size)]["check_error"]
        assert recs[(FINE, size)]["status"] == "ok" and recs[(FINE, size)]["valid"] == 1
    # one row per key: the checked point replaced the unchecked one
    assert _rows("SELECT COUNT(*) FROM measurements WHERE valid IS NULL") == [(0,)]
    keys = [k for (k,) in _rows("SELECT key FROM measurements")]
    assert len(keys) == len(set(keys))
    # the first campaign now reports the checked points
    first = {(r["algorithm"], r["msg_size"]): r["status"] for r in _jsonl("nochk")}
    assert first == {(BROKEN, 24): "wrong_result", (BROKEN, 100): "wrong_result",
                     (FINE, 24): "ok", (FINE, 100): "ok"}

    # --check none may take checked points: nothing measured
    again = run_cli("bench", "--coll", "bcast", "--algorithms", f"{BROKEN},{FINE}", "--check",
                    "none", "--campaign", "nochk3", *POINTS, check=False)
    assert "0 launches, measured {}, 4 points already" in again.stdout, again.stdout
    assert again.returncode == 1 and again.stdout.count("0 wrong_result") == 2
    assert "2 stored failure(s) skipped (2 wrong_result;" in again.stdout


def test_check_only_checks_stored_unchecked_points(workdir):
    """`--check only` after `--check none` runs the checks: the broken algorithm's
    points become wrong_result, the correct one's timed points are kept and marked
    checked; a point only checked (no time) is measured by a later timed run."""
    run_cli("bench", "--coll", "bcast", "--algorithms", f"{BROKEN},{FINE}", "--check", "none",
            "--campaign", "nochk", *POINTS)
    timed = dict(_rows("SELECT msg_size, ttc_median_s FROM measurements m JOIN runs r "
                       f"USING(run_id) WHERE r.algorithm='{FINE}'"))
    proc = run_cli("bench", "--coll", "bcast", "--algorithms", f"{BROKEN},{FINE}", "--check",
                   "only", "--campaign", "chk", "--layouts", "2x4", "--sizes", "24,100,1000",
                   "--jobs", "1", "-q", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr      # a failed check
    recs = {(r["algorithm"], r["msg_size"]): r for r in _jsonl("chk")}
    assert {s: recs[(BROKEN, s)]["status"] for s in (24, 100, 1000)} == \
        {24: "wrong_result", 100: "wrong_result", 1000: "wrong_result"}
    for size in (24, 100):          # checked now, the earlier time kept
        assert recs[(FINE, size)]["valid"] == 1
        assert recs[(FINE, size)]["ttc_median_s"] == timed[size]
    assert recs[(FINE, 1000)]["valid"] == 1 and recs[(FINE, 1000)]["ttc_median_s"] is None

    # a timed run does not take the check-only point as measured
    out = run_cli("bench", "--coll", "bcast", "--algorithms", FINE, "--campaign", "timed",
                  "--layouts", "2x4", "--sizes", "24,100,1000", "--jobs", "1", "-q").stdout
    assert "1 launches, measured {'ok': 1}, 2 points already" in out, out
    recs = {r["msg_size"]: r for r in _jsonl("timed")}
    assert all(recs[s]["valid"] == 1 and recs[s]["ttc_median_s"] > 0 for s in (24, 100, 1000))


def test_skipped_stored_failures_are_said(workdir):
    """A re-run that skips stored failures says how many and how to measure them again.
    SimGrid 3.32's `ompi` bcast crashes (SIGFPE) at count 0: a real, repeatable crash."""
    args = ["bench", "--coll", "bcast", "--algorithms", "ompi", "--layouts", "2x1",
            "--sizes", "0,8", "--campaign", "cr", "-q"]
    first = run_cli(*args, check=False).stdout
    assert "measured {'crashed': 1, 'ok': 1}" in first and "stored failure" not in first
    again = run_cli(*args, check=False).stdout
    assert "1 stored failure(s) skipped (1 crashed; re-measure with --retry-failed)" in again, again
    retried = run_cli(*args, "--retry-failed", check=False).stdout
    assert "measured {'crashed': 1}" in retried and "stored failure" not in retried, retried
    out = run_cli("tune", "--collectives", "bcast", "--algorithms", "binomial_tree",
                  "--baselines", "ompi", "--layouts", "2x1", "--sizes", "0,8", "--campaign", "t",
                  "-q").stdout
    assert "1 stored failure(s) skipped (1 crashed; re-measure with --retry-failed)" in out, out


def test_min_reps_above_max_reps_is_a_config_error(workdir):
    """Whatever the sources, min_reps > max_reps is refused up front, naming both values
    and where each came from (it used to make every launch 'crash')."""
    with pytest.raises(ConfigError) as exc:
        config.load({"min_reps": 10}, environ={"COLLTUNE_MAX_REPS": "5"})
    assert str(exc.value) == ("setting min_reps from command line: 10 is above setting "
                              "max_reps 5 from environment COLLTUNE_MAX_REPS (min_reps must "
                              "be <= max_reps)")
    cfg = workdir / "site.toml"
    cfg.write_text("max_reps = 3\n")
    with pytest.raises(ConfigError, match=rf"min_reps from default: 5 is above setting "
                                          rf"max_reps 3 from file {cfg}"):
        config.load({}, environ={"COLLTUNE_CONFIG": str(cfg)})
    assert config.load({"min_reps": 5, "max_reps": 5}, environ={}).min_reps == 5
    proc = run_cli("tune", "--collectives", "bcast", "--layouts", "2x4", "--sizes", "8",
                   "--campaign", "cfg", env={"COLLTUNE_MIN_REPS": "10", "COLLTUNE_MAX_REPS": "5"},
                   check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == ("colltune: error: setting min_reps from environment COLLTUNE_MIN_REPS: "
                           "10 is above setting max_reps 5 from environment COLLTUNE_MAX_REPS "
                           "(min_reps must be <= max_reps)\n")
    assert not os.path.exists(os.environ["COLLTUNE_STORE"])       # nothing launched


# The CLI in a subprocess with every launch hanging for real (colltune-bench
# --hang-at-size: rank 0 blocks in pause() before the point): a short --timeout alone is
# no hang, SMPI runs a 2x2 bcast point in a few ms and a busy waiter may find it done.
HANGING_CLI = """
import sys
from colltune.backends.sim import SimBackend
real_run = SimBackend.run
def run(self, launch, workdir):
    sizes = launch.bench_args[launch.bench_args.index("--sizes") + 1]
    launch.bench_args = [*launch.bench_args, "--hang-at-size", sizes]
    return real_run(self, launch, workdir)
SimBackend.run = run
from colltune.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_tune_with_nothing_ok_fails(workdir):
    """A tune in which every point failed (here every launch hangs and times out) exits
    non-zero, says why and writes no table; so does one whose only algorithm returned
    wrong data."""
    out_dir = os.environ["COLLTUNE_OUTPUT_DIR"]
    proc = subprocess.run(
        [sys.executable, "-c", HANGING_CLI, "tune", "--collectives", "bcast", "--algorithms",
         "binomial_tree", "--layouts", "2x2", "--sizes", "8,64", "--timeout", "1",
         "--campaign", "f", "-q"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLLTUNE_CACHE_DIR": CACHE})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed points (excluded from 'best'): {'timeout': 6}" in proc.stdout, \
        proc.stdout + proc.stderr
    assert "colltune: error: campaign f: every point failed ({'timeout': 6}); the decision " \
           "table would have no entries, none written" in proc.stderr, proc.stderr
    assert not os.path.exists(os.path.join(out_dir, "f.table.json"))
    proc = run_cli("tune", "--collectives", "bcast", "--algorithms", BROKEN, "--layouts", "2x4",
                   "--sizes", "24", "--campaign", "w", "-q", check=False)
    assert proc.returncode == 1 and "campaign w: no algorithm measured ok (failed points: " \
        "{'wrong_result': 1})" in proc.stderr, proc.stdout + proc.stderr


def test_an_empty_table_is_not_exported(workdir):
    """`export` refuses a table with no entries instead of writing an empty rules file
    (and an environment to run with) with exit status 0."""
    out_dir = os.environ["COLLTUNE_OUTPUT_DIR"]
    run_cli("tune", "--collectives", "bcast", "--algorithms", "binomial_tree", "--layouts", "2x2",
            "--sizes", "16", "--campaign", "ok", "-q")
    table = json.load(open(os.path.join(out_dir, "ok.table.json")))
    table["entries"] = []
    empty = workdir / "empty.table.json"
    empty.write_text(json.dumps(table))
    rules = workdir / "empty.rules"
    for fmt in ("openmpi-tuned", "colltune"):
        proc = run_cli("export", "--table", str(empty), "--format", fmt, "-o", str(rules),
                       check=False)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        assert f"colltune: error: {empty}: the decision table has no entries" in proc.stderr
        assert "nothing to export" in proc.stderr and not rules.exists()
