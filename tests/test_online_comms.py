"""Online mode and communicators that come and go (native/tests/onlinecomms.c: split,
used, freed, round after round, as miniAMR does). At most 64 communicators in use at
once are tracked per rank; a freed one gives its slot back (MPI_Comm_free: few samples
stay raw on its timing ranks, more are reduced over its members then and kept by its
rank 0, for MPI_Finalize). Before, the
65th communicator of a run and every later one ran the library untuned and unsampled.
On SMPI, Open MPI and MPICH (the interposer's MPI_Comm_free preloaded)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import CACHE, REPO, have_mpi

from colltune.providers.colltune import libcolltune, link_args
from colltune.subcommands.run import compile_app

from test_online_native import Job, warnings

APP = f"{REPO}/native/tests/onlinecomms.c"
CALLS, BUDGET = 3, 50
FULL = "tracks at most 64 communicators in use at once"


def samples(state):
    (path,) = (state / "samples").iterdir()
    return json.loads(path.read_text())


def half_blocks(doc, size):
    """The blocks of the split halves (the world's are larger)."""
    return [b for b in doc["blocks"] if b["nodes"] * b["ppn"] < size]


@pytest.fixture(scope="module")
def smpi(tmp_path_factory):
    job = Job("smpi", tmp_path_factory.mktemp("comms"))
    job.app = compile_app(job.impl, APP, CACHE, link_args(libcolltune(job.impl, CACHE)))
    return job


def run(job, layout, state, rounds, live, calls=CALLS, **env):
    proc = job(layout, state, str(rounds), str(calls), str(live), budget=BUDGET, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"onlinecomms ok: (\d+) communicators, (\d+) calls, (\d+) failures", proc.stdout)
    assert m and m[3] == "0", proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("rounds,calls", [(100, CALLS), (70, 20)])
def test_freed_communicators_give_their_slot_back(smpi, tmp_path, rounds, calls):
    """More communicators one after another than there are slots, per half: every call of
    every one is tuned and sampled. 3 calls of each collective per communicator: its 6
    samples stay raw on every timing rank until MPI_Finalize; 20: its 40 are reduced
    over its members when it is freed (past RETIRE_RAW_MAX, 32)."""
    proc = run(smpi, (2, 3), tmp_path / "state", rounds, 0, calls)
    assert not any(FULL in w for w in warnings(proc)), proc.stderr
    doc = samples(tmp_path / "state")
    halves = half_blocks(doc, 6)
    for coll in ("allreduce", "bcast"):
        blocks = [b for b in halves if b["collective"] == coll]
        # both halves' communicators, every round: 2 x rounds x calls calls, all sampled
        assert sum(b["calls"] for b in blocks) == 2 * rounds * calls, blocks
        assert sum(b["sampled"] for b in blocks) == 2 * rounds * calls, blocks
        assert len([r for r in doc["records"] if r[0] == coll and r[3] == 3]) == 2 * rounds * calls
    assert all(r[6] > 0 for r in doc["records"])
    # every rank of a half timed its calls; 40 samples were reduced when it was freed
    assert {r[7] for r in doc["records"] if r[3] == 3} == ({3} if calls == CALLS else {None})


def test_capped_samplers_from_the_node_map_and_from_asking(smpi, tmp_path):
    """COLLTUNE_ONLINE_SAMPLERS=2: only the first two node leaders of a communicator time
    its calls. A leader's place is counted from the world node map, or, where there is none
    (COLLTUNE_NODE_MAP=0, the way of very large jobs), by an exscan over the members: both
    ways every call of the uneven halves (2 nodes, ppn 2) is sampled and has a cost from
    the clocks of exactly two ranks (a second leader that counted itself third timed
    nothing), with the same blocks and calls (the costs differ in the last digits: asking
    the members shifts the ranks' arrival)."""
    seen = {}
    for node_map in ("1", "0"):
        state = tmp_path / f"state-{node_map}"
        run(smpi, (2, 3), state, 10, 0, COLLTUNE_ONLINE_SAMPLERS="2", COLLTUNE_NODE_MAP=node_map)
        doc = samples(state)
        assert doc["job"]["max_samplers"] == 2
        halves = half_blocks(doc, 6)
        assert {(b["nodes"], b["ppn"]) for b in halves} == {(2, 2)}, halves
        for coll in ("allreduce", "bcast"):
            blocks = [b for b in halves if b["collective"] == coll]
            assert sum(b["sampled"] for b in blocks) == 2 * 10 * CALLS, blocks
        assert all(r[6] > 0 for r in doc["records"])
        assert {r[7] for r in doc["records"]} == {2}, doc["records"][:4]
        seen[node_map] = sorted(tuple(r[:6]) for r in doc["records"])
    assert seen["1"] == seen["0"]


def test_more_than_64_in_use_at_once_still_go_to_the_library(smpi, tmp_path):
    """70 kept alive: the 65th and later run the library (one warning); the 64 tracked
    ones, freed at the end, still bring their samples."""
    proc = run(smpi, (2, 3), tmp_path / "state", 70, 70)
    assert any(FULL in w for w in warnings(proc)), proc.stderr
    halves = half_blocks(samples(tmp_path / "state"), 6)
    for coll in ("allreduce", "bcast"):
        blocks = [b for b in halves if b["collective"] == coll]
        assert sum(b["calls"] for b in blocks) == 2 * 64 * CALLS, blocks


@pytest.mark.parametrize("name", ["openmpi", "mpich"])
def test_real_mpi_reuses_freed_slots(tmp_path, name):
    if not have_mpi(name):
        pytest.skip(f"{name} not installed")
    job = Job(name, tmp_path)
    job.app = compile_app(job.impl, APP, CACHE, [])
    proc = run(job, 4, tmp_path / "state", 80, 0)
    assert not any(FULL in w for w in warnings(proc)), proc.stderr
    halves = half_blocks(samples(tmp_path / "state"), 4)
    for coll in ("allreduce", "bcast"):
        assert sum(b["calls"] for b in halves if b["collective"] == coll) == 2 * 80 * CALLS
