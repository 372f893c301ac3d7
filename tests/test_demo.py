"""`make demo`'s last part (README, "What `make demo` does"): the unmodified demo
program (src/colltune/apps/collmix.c) under the library default
(`colltune run --default-selector`) and under an SMPI deployment
(`colltune run --deployment DIR`), on real smpirun; the demo's parser of the
program's report. The whole demo is run by CI (`make demo`), not here."""
from __future__ import annotations

import json
import os
from importlib import resources

import pytest

from conftest import run_cli

from colltune.commands import _parse_collmix
from colltune.decision import DecisionTable
from colltune.errors import ColltuneError

APP = str(resources.files("colltune") / "apps" / "collmix.c")


def both_table(path, selector="ompi"):
    """A `--provider both` table for SMPI at 2x2: colltune's binomial bcast below
    40000 B, the selector above; colltune's ring allreduce from 2048 B."""
    rules = {"bcast": [(0, "binomial", "colltune"), (40000, selector, "smpi")],
             "allreduce": [(0, selector, "smpi"), (2048, "ring", "colltune")]}
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "sim", "platform": "small", "mpi_library": "smpi",
                       "mpi_version": "x",
                       "arms": {"provider": "both", "library": "smpi", "colltune": "colltune",
                                "library_default": selector,
                                "library_algorithms_deployable": False}},
        "entries": [{"collective": c, "nodes": 2, "ppn": 2,
                     "rules": [{"min_size": s, "algorithm": a, "provider": p, "params": {}}
                               for s, a, p in r]} for c, r in rules.items()]}).save(str(path))
    return str(path)


def test_parse_collmix_report():
    out = ("collmix: bcast           64 B x   20 calls  0.000033932 s\n"
           "collmix: allreduce        8 B x   40 calls  0.000758547 s\n"
           "collmix: total 0.000792479 s in collectives, 1920 checks, 0 failures\n")
    r = _parse_collmix(out, "x")
    assert r["calls"] == {("bcast", 64): (20, 0.000033932), ("allreduce", 8): (40, 0.000758547)}
    assert (r["total"], r["checks"], r["failures"]) == (0.000792479, 1920, 0)
    with pytest.raises(ColltuneError, match="no collmix report"):
        _parse_collmix("collmix: nothing\n", "x")


def test_collmix_default_vs_deployment(workdir):
    table = both_table(workdir / "both.json")
    dep = str(workdir / "dep")
    run_cli("deploy", "--table", table, "--library", "smpi", "-o", dep)

    base = run_cli("run", "--default-selector", "ompi", "--layout", "2x2", "--", APP, "3")
    assert "--cfg=smpi/coll-selector:ompi" in base.stderr          # the library default
    assert "COLLTUNE_RULES" not in base.stderr
    b = _parse_collmix(base.stdout, "default")
    assert b["failures"] == 0 and b["checks"] == 4 * (6 * 3 + 1)  # 6 calls an iteration + 1 MiB
    assert b["calls"][("bcast", 1048576)][0] == 1                  # every 5th iteration: it 0

    report = workdir / "ran.jsonl"
    deployed = run_cli("run", "--deployment", dep, "--report", str(report), "--layout", "2x2",
                       "--", APP, "3")
    assert "--cfg=smpi/coll-selector:ompi" in deployed.stderr       # the deployment's selector
    assert f"COLLTUNE_RULES={dep}/colltune.rules" in deployed.stderr
    d = _parse_collmix(deployed.stdout, "deployed")
    assert d["failures"] == 0 and d["calls"].keys() == b["calls"].keys()
    ran = {(r["collective"], r["bytes"]): r["ran"] for r in map(json.loads, report.open())}
    assert ran[("bcast", 64)] == "binomial" and ran[("bcast", 40000)] == "library"
    assert ran[("allreduce", 8)] == "library" and ran[("allreduce", 96000)] == "ring"
    # SMPI time is deterministic: the same run twice gives the same numbers
    again = _parse_collmix(run_cli("run", "--deployment", dep, "--layout", "2x2", "--", APP,
                                   "3").stdout, "again")
    assert again == d


def test_run_deployment_errors(workdir):
    table = both_table(workdir / "both.json")
    dep = str(workdir / "dep")
    run_cli("deploy", "--table", table, "--library", "smpi", "-o", dep)
    p = run_cli("run", "--deployment", dep, "--default-selector", "mpich", "--layout", "2x2",
                "--", APP, check=False)
    assert p.returncode == 2 and "contradicts the deployment's --cfg=smpi/coll-selector:ompi" in p.stderr
    p = run_cli("run", "--deployment", dep, "--rules", os.path.join(dep, "colltune.rules"),
                "--layout", "2x2", "--", APP, check=False)
    assert p.returncode == 2 and "--deployment brings its own rules" in p.stderr
    p = run_cli("run", "--backend", "local", "--mpi", "openmpi", "--deployment", dep, "-n", "2",
                "--", APP, check=False)
    assert p.returncode == 2 and "deployed for smpi, but the local backend runs openmpi" in p.stderr
    p = run_cli("run", "--deployment", str(workdir / "nowhere"), "--layout", "2x2", "--", APP,
                check=False)
    assert p.returncode == 2 and "deployment manifest" in p.stderr


def test_both_campaign_uses_points_another_campaign_measured(workdir):
    """The demo's part 2 reuses part 1's points (same store keys): the reused
    selector points must count in the both table (its library-default arm)."""
    space = ["--collectives", "bcast", "--layouts", "2x2", "--sizes", "8,65536"]
    run_cli("tune", *space, "--algorithms", "binomial_tree", "--campaign", "lib", "-q")
    out = run_cli("tune", "--provider", "both", *space, "--algorithms", "colltune:binomial",
                  "--campaign", "both", "-q", "--table", str(workdir / "both.json")).stdout
    assert "reused from the store" in out and ", 0 reused" not in out
    assert "vs the library default it deploys with (smpi ompi)" in out      # ompi's points count
    t = DecisionTable.load(str(workdir / "both.json"))
    from colltune.results import Results
    from colltune.store import Store
    with Store(str(workdir / "store.sqlite")) as store:
        launched = store.query_points("both")
        results = Results.from_store(store, "both")
    assert {p["provider"] for p in launched} == {"colltune"}   # only colltune's were measured here
    assert set(results.points["provider"]) == {"colltune", "smpi"}     # its results: the reused too
    assert {(r.provider, r.algorithm) for e in t.entries for r in e.rules} <= {
        ("colltune", "binomial"), ("smpi", "ompi")}
