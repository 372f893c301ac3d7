"""MPI_THREAD_MULTIPLE under the interposer, on the real libraries (a user's review):
two threads in collectives at once, each on its own communicator, had crashed or hung
colltune's algorithms (their engine's state is per process). Now colltune's algorithms
are off under MPI_THREAD_MULTIPLE, with one warning, unless the job says its collectives
never overlap (COLLTUNE_SERIAL_COLLECTIVES=1)."""
from __future__ import annotations

import json
import os

import pytest

from conftest import REPO, have_mpi, run_cli

APP = os.path.join(REPO, "tests", "data", "interpose", "threads.c")
RULES = "colltune-rules 1\nallreduce -> ring\nbcast -> binomial\nallgather -> ring\n"


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_thread_multiple_goes_to_the_library_unless_collectives_are_serial(workdir, lib):
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed (make setup)")
    rules = workdir / "r.rules"
    rules.write_text(RULES)
    rep = workdir / "rep.jsonl"
    base = ["run", "--backend", "local", "--mpi", lib, "-n", "2", "--rules", str(rules),
            "--report", str(rep), "--timeout", "120", "--", APP]
    proc = run_cli(*base, "concurrent", env={"COLLTUNE_SERIAL_COLLECTIVES": ""})
    assert "threads: concurrent provided=3 failures=0" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stderr.count("MPI_THREAD_MULTIPLE: colltune's algorithms are not thread-safe") == 1
    assert not rep.exists() or {json.loads(x)["ran"] for x in rep.read_text().splitlines()} <= {"library"}
    # the job vouches that its collectives never overlap: the rules hold
    proc = run_cli(*base, "serial", env={"COLLTUNE_SERIAL_COLLECTIVES": "1"})
    assert "threads: serial provided=3 failures=0" in proc.stdout, proc.stdout + proc.stderr
    assert "not thread-safe" not in proc.stderr
    ran = {(r["collective"], r["ran"]) for r in map(json.loads, rep.read_text().splitlines())}
    assert {("allreduce", "ring"), ("bcast", "binomial"), ("allgather", "ring")} <= ran, ran


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
def test_online_under_thread_multiple_is_off_and_the_state_untouched(workdir):
    """Online mode is off under MPI_THREAD_MULTIPLE (its own warning); `run --online`
    then said the update 'failed ... did the job end before it?' although the job had
    finished: it now says the state is unchanged because the job wrote no samples."""
    state = workdir / "state"
    proc = run_cli("run", "--backend", "local", "--mpi", "openmpi", "-n", "2", "--online", str(state),
                   "--timeout", "120", "--", APP, "concurrent")
    assert "threads: concurrent provided=3 failures=0" in proc.stdout
    assert "COLLTUNE_ONLINE: not under MPI_THREAD_MULTIPLE" in proc.stderr, proc.stderr
    assert f"online state {state} unchanged: the job wrote no samples" in proc.stderr
    assert "failed" not in proc.stderr
    assert not (state / "state.txt").exists() and not os.listdir(state / "samples")
