"""One deployment verified across emulated hosts (docs/deploy.md, issue 18):
a mixed table whose 2-node entry mixes the library's algorithms, its default
decision and colltune's algorithms in one collective is deployed for the real
Open MPI and MPICH and verified with `verify --deployment --backend netns
--hosts 2 --ranks 4`: the library accepts its file and runs it (its own
evidence), the interposer reports the table's 2x2 rules on 2 nodes, and the
default/deployed ratios are printed."""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import emulated_cluster, have_mpi, run_cli

from colltune.decision import DecisionTable

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
NAME, SUBNET = "cdv", "10.213.81.0/24"
# 2x2 bcast: two of the library's algorithms that send differently on 4 ranks
LIB_ALGS = {"openmpi": ("basic_linear", "binomial"), "mpich": ("scatter_ring_allgather", "binomial")}


def two_node_table(path, lib):
    first, last = LIB_ALGS[lib]
    layouts = {
        # what 1-node communicators get: colltune only, other algorithms than 2x2's
        (1, 2): [("bcast", [(0, "pipeline", "colltune")]),
                 ("allreduce", [(0, "ring", "colltune")])],
        (2, 2): [("bcast", [(0, first, lib), (1000, "binomial", "colltune"), (100000, last, lib)]),
                 ("allreduce", [(0, "recursive_doubling", "colltune"), (4096, "default", lib),
                                (65536, "ring", lib)])],
    }
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "netns", "platform": NAME, "mpi_library": lib, "mpi_version": "x",
                       "arms": {"provider": "both", "library": lib, "colltune": "colltune",
                                "library_default": "default",
                                "library_algorithms_deployable": True}},
        "entries": [{"collective": c, "nodes": n, "ppn": p,
                     "rules": [{"min_size": s, "algorithm": a, "provider": pr, "params": {}}
                               for s, a, pr in rules]}
                    for (n, p), colls in layouts.items() for c, rules in colls]}).save(str(path))
    return str(path)


@pytest.fixture(scope="module")
def emulated():
    with emulated_cluster(2, NAME, SUBNET) as c:
        yield c


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_mixed_deployment_verified_across_two_emulated_hosts(emulated, tmp_path, lib):
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed (make setup)")
    out = tmp_path / "dep"
    run_cli("deploy", "--table", two_node_table(tmp_path / "t.json", lib), "--library", lib,
            "-o", str(out))
    m = json.loads((out / "deployment.json").read_text())
    assert m["table"]["rules"] == {"colltune": 4, "library": 3, "default": 1}
    proc = run_cli("verify", "--deployment", str(out), "--backend", "netns", "--platform", NAME,
                   "--hosts", "2", "--ranks", "4", "--reps", "2", check=False, timeout=400)
    text = proc.stdout
    assert proc.returncode == 0, text + proc.stderr
    assert "4 ranks on 2 emulated hosts of cluster cdv (2 per host)" in text
    # (1) the library accepted its file and ran it, the default decision included
    assert "(1) file accepted: yes" in text
    lib_points = [ln for ln in text.splitlines() if re.match(r"      (ok|FAIL)", ln)]
    assert lib_points and all(ln.lstrip().startswith("ok") for ln in lib_points), text
    assert any("default" in ln and "allreduce" in ln for ln in lib_points)
    assert "(the interposer's COLLTUNE_REPORT; it saw 2x2 (nodes x ranks per node)" in text
    # (2) the 2x2 entry was sampled (not 1x2's pipeline / ring) and ran as the table says
    points = [ln for ln in text.splitlines() if re.match(r"  (ok|FAIL) ", ln)]
    assert len(points) == 10 and all(ln.startswith("  ok") for ln in points), text
    assert any("table: colltune:binomial" in ln and "ran: binomial" in ln for ln in points)
    assert any(f"table: {lib}:default" in ln and "its default decision" in ln for ln in points)
    assert any(f"table: {lib}:{LIB_ALGS[lib][0]}" in ln and "its rules file" in ln for ln in points)
    assert not any("pipeline" in ln for ln in points)
    # (3) the ratios
    assert re.search(r"\(3\) default/deployed time ratio: median [0-9.]+ over 10 points", text)
    assert text.rstrip().endswith("RESULT: PASS")
