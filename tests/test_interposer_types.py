"""Datatypes with gaps under the interposer, on the real libraries (a correctness
review): an MPI_Allgather receiving ints resized to 8 bytes, whose rank 0 send buffer
lies just before its receive buffer, hung. The overlap check measured the send buffer
with the receive type's extent, so that rank alone took the call for an overlapping
one and called the library while the others ran colltune's algorithm."""
from __future__ import annotations

import json
import os

import pytest

from conftest import REPO, have_mpi, run_cli

APP = os.path.join(REPO, "tests", "data", "interpose", "allgather_gaps.c")


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
@pytest.mark.parametrize("alg", ["ring", "bruck"])
def test_allgather_with_a_gapped_receive_type_runs_on_every_rank(workdir, lib, alg):
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed (make setup)")
    rules = workdir / "r.rules"
    rules.write_text(f"colltune-rules 1\nallgather -> {alg}\n")
    rep = workdir / "rep.jsonl"
    proc = run_cli("run", "--backend", "local", "--mpi", lib, "-n", "3", "--rules", str(rules),
                   "--report", str(rep), "--timeout", "60", "--", APP, "100", check=False)
    assert proc.returncode == 0 and "allgather_gaps: 0 wrong" in proc.stdout, proc.stdout + proc.stderr
    ran = {r["ran"] for r in map(json.loads, rep.read_text().splitlines()) if r["collective"] == "allgather"}
    assert ran == {alg}, ran            # every rank ran it: none went to the library alone
