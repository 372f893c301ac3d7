"""Per-job tune-then-run: `colltune run --tune-first` tunes colltune's algorithms
for the run's layout with the active learner (real smpirun), writes colltune's
rules file, and runs an unmodified MPI program under the interposer with it."""
from __future__ import annotations

import glob
import json
import os

import pytest

from conftest import REPO, run_cli
from colltune.errors import ConfigError
from colltune.tunefirst import parse_budget

APP = os.path.join(REPO, "tests", "data", "interpose", "collcheck.c")


def test_budget_parsing():
    assert parse_budget("90") == 90 and parse_budget("90s") == 90
    assert parse_budget("10m") == 600 and parse_budget("1.5h") == 5400
    with pytest.raises(ConfigError, match="bad --budget '10 minutes'"):
        parse_budget("10 minutes")


def test_tune_first_then_run_under_smpi(workdir):
    proc = run_cli("run", "--tune-first", "--budget", "120", "--collectives", "allreduce,bcast",
                   "--sizes", "8..4K", "--layout", "2x2", "--campaign", "tf", "-q", "--", APP)
    assert "collcheck:" in proc.stdout and " 0 failures" in proc.stdout, proc.stdout
    rules = glob.glob(str(workdir / "out" / "tf.rules"))
    assert rules, os.listdir(workdir / "out")
    from colltune.exporters.colltune_rules import read_rules
    text = open(rules[0]).read()
    assert text.count("\nallreduce ") >= 1 and text.count("\nbcast ") >= 1, text
    read_rules(rules[0])            # valid colltune rules (raises with file:line otherwise)
    table = (workdir / "out" / "tf.table.json").read_text()
    assert '"tuner": "active"' in table
    # the tuning measured colltune's algorithms against the library's default decision
    # (provider both: the selector the job runs with, SMPI's own), stored in the campaign
    proc = run_cli("results", "export", "--format", "csv", "--campaign", "tf")
    assert ",colltune," in proc.stdout and ",default," in proc.stdout
    prov = json.loads(table)["provenance"]["arms"]
    assert prov["provider"] == "both" and prov["library_default"] == "default"


def test_tune_first_refuses_explicit_rules(workdir, tmp_path):
    proc = run_cli("run", "--tune-first", "--rules", str(tmp_path / "x.rules"), "--layout", "2x2",
                   "--", APP, check=False)
    assert proc.returncode == 2 and "--tune-first writes the rules itself" in proc.stderr
