"""MPICH's own algorithms as online arms ("mpich:<name>", native/intercept/online_libarms.c,
docs/online-native.md "MPICH's algorithms as arms") on the real MPICH wheel, 4 ranks here:

- the name -> value mapping libcolltune recovers through MPI_T (from the control variable's
  description) is the one MPICH's own environment parser uses;
- evidence that the value written through MPI_T selects the algorithm of that very call:
  with MPIR_CVAR_COLLECTIVE_FALLBACK=error and MPI_ERRORS_RETURN, an arm whose algorithm
  MPICH cannot run for the arguments (ring and reduce_scatter_gather need a commutative op,
  recursive-doubling allgather a power-of-two communicator) returns an error, while the same
  call under the `library` arm, the same collective with MPI_SUM under the same arm, and a
  PMPI call right after it succeed (the variable is back at its initial value); with the
  default fallback (silent) every result is correct;
- random draws among MPICH and colltune arms on split communicators: every rank's choice log
  is identical per communicator, results are correct, MPICH arms were drawn."""
from __future__ import annotations

import collections
import json
import subprocess

import pytest

from conftest import CACHE, have_mpi

from colltune.providers.colltune import rules_tool_command
from colltune.subcommands.run import compile_app
from test_online_native import Job, check_logs, check_state_dir, ok, warnings

pytestmark = pytest.mark.skipif(not have_mpi("mpich"), reason="mpich not installed (make setup)")

COLLS = ("bcast", "reduce", "allreduce", "allgather")
CLASSES = ("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576", "1048577..")

# the steps' calls; 4 longs or 8 ints (32 B) are size class 1, 2 ints and one int per rank
# class 0. MPICH's checks: ring and reduce_scatter_gather need a commutative op,
# reduce_scatter_allgather count >= the power of two below the communicator size, recursive
# doubling allgather a power-of-two size.
EVIDENCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#define P 65521L
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    long *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        long a1 = x[i] >> 32, b1 = x[i] & 0xffffffffL, a2 = y[i] >> 32, b2 = y[i] & 0xffffffffL;
        y[i] = (a2 * a1 % P) << 32 | ((a2 * b1 + b2) % P);
    }
}
static int rank;
/* rc on every calling rank -> "ok" / "error" / "mixed"; correct: on every rank */
static void report_of(const char *step, int rc, int correct, int called)
{
    int in[3] = {called && rc != MPI_SUCCESS, called ? -(rc != MPI_SUCCESS) : -1, !correct}, out[3];
    PMPI_Allreduce(in, out, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s %s\n", step, out[0] && out[1] == -1 ? "error" : !out[0] ? "ok" : "mixed",
               out[2] ? "wrong" : "right");
}
#define report(step, rc, correct) report_of(step, rc, correct, 1)
int main(int argc, char **argv)
{
    MPI_Op nc;
    MPI_Comm three;
    long a[4], b[4], r[4];
    int size, ia[8], ib[8], ir[8];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Op_create(compose, 0, &nc);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 3, rank, &three);
    MPI_Comm_set_errhandler(three, MPI_ERRORS_RETURN);
    for (int i = 0; i < 4; i++) a[i] = ((long)(rank + 2 + i) << 32) | (rank * 31 + i), ia[i] = ia[i + 4] = rank * 10 + i;
    for (int k = 0; k < 2; k++) {
        int rc = MPI_Allreduce(a, b, 4, MPI_LONG, nc, MPI_COMM_WORLD);
        PMPI_Allreduce(a, r, 4, MPI_LONG, nc, MPI_COMM_WORLD);
        report(k ? "allreduce-noncommutative-again" : "allreduce-noncommutative", rc, rc || !memcmp(b, r, sizeof b));
    }
    int rc = MPI_Allreduce(ia, ib, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(ia, ir, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    report("allreduce-sum", rc, rc || !memcmp(ib, ir, sizeof ib));
    rc = PMPI_Allreduce(a, b, 4, MPI_LONG, nc, MPI_COMM_WORLD);
    report("pmpi-allreduce-noncommutative", rc, 1);
    rc = MPI_Allreduce(ia, ib, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);    /* 2 < 4 ranks */
    PMPI_Allreduce(ia, ir, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    report("allreduce-sum-2-ints", rc, rc || !memcmp(ib, ir, 2 * sizeof *ib));
    rc = MPI_Reduce(a, b, 4, MPI_LONG, nc, 0, MPI_COMM_WORLD);
    PMPI_Reduce(a, r, 4, MPI_LONG, nc, 0, MPI_COMM_WORLD);
    report("reduce-noncommutative", rc, rc || rank || !memcmp(b, r, sizeof b));
    rc = MPI_SUCCESS;
    int good = 1;
    if (rank < 3) {
        rc = MPI_Allgather(ia, 1, MPI_INT, ib, 1, MPI_INT, three);
        for (int i = 0; i < 3; i++) good &= ib[i] == i * 10;
    }
    report_of("allgather-3-ranks", rc, rc || good, rank < 3);
    MPI_Op_free(&nc);
    MPI_Comm_free(&three);
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return Job("mpich", tmp_path_factory.mktemp("mpich-arms"))


def online_arms(job, tmp_path, env=None):
    cmd = rules_tool_command(job.impl, CACHE, str(tmp_path)) + ["online-arms"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120, cwd=tmp_path,
                         env={**job.impl.run_env(), **(env or {})}).stdout
    return json.loads(out)


def test_arms_listed_and_mapping_is_mpichs_own(job, tmp_path):
    doc = online_arms(job, tmp_path)
    lib = doc["library_arms"]
    assert lib["library"] == "mpich" and lib["note"] == ""
    expect = {"bcast": {"binomial", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"},
              "reduce": {"binomial", "reduce_scatter_gather"},
              "allreduce": {"recursive_doubling", "reduce_scatter_allgather", "ring"},
              "allgather": {"recursive_doubling", "brucks", "ring"}}
    for coll in COLLS:
        listed = [a for a in doc["arms"][coll] if a.startswith("mpich:")]
        assert {a[6:] for a in listed} == expect[coll] and doc["arms"][coll][0] == "library"
        info = lib["collectives"][coll]
        assert info["initial"] == 0 and set(info["values"]) == set(listed)
        for arm, value in info["values"].items():       # MPICH's own parser of the name agrees
            got = online_arms(job, tmp_path, {info["cvar"]: arm[6:]})
            assert got["library_arms"]["collectives"][coll]["initial"] == value, (coll, arm)
            assert got["fingerprint"] == doc["fingerprint"]


def write_state(state, fp, blocks):
    lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 1"]
    for (coll, nodes, ppn, rng), arms in blocks.items():
        lines.append(f"block {coll} nodes={nodes} ppn={ppn} bytes={rng} calls=0 source=prior")
        lines += [f"arm {a} p={p}" for a, p in arms.items()]
    state.mkdir(parents=True, exist_ok=True)
    (state / "state.txt").write_text("\n".join(lines) + "\n")


def evidence_run(job, tmp_path, arm_of, fallback, cliques=1):
    """The evidence program at budget 0 with a state giving each step's block one arm
    (cliques: MPICH's fake nodes, MPIR_CVAR_NUM_CLIQUES; the blocks for every layout)."""
    name = f"{'mpich' if arm_of['allreduce'] != 'library' else 'library'}-{fallback}-{cliques}"
    state, log = tmp_path / f"state-{name}", tmp_path / f"log-{name}"
    blocks = {}
    for nodes in (1, 2):
        for ppn in (1, 2, 3, 4):
            blocks.update({("allreduce", nodes, ppn, "17..256"): {arm_of["allreduce"]: 1},
                           ("allreduce", nodes, ppn, "0..16"): {arm_of["allreduce-small"]: 1},
                           ("reduce", nodes, ppn, "17..256"): {arm_of["reduce"]: 1},
                           ("allgather", nodes, ppn, "0..16"): {arm_of["allgather"]: 1}})
    write_state(state, online_arms(job, tmp_path)["fingerprint"], blocks)
    src = tmp_path / "mpicharms_evidence.c"
    src.write_text(EVIDENCE)
    app = compile_app(job.impl, str(src), CACHE, [])
    env = {**job.env(state, log, budget=0)}
    if fallback:
        env["MPIR_CVAR_COLLECTIVE_FALLBACK"] = fallback
    if cliques > 1:
        env["MPIR_CVAR_NUM_CLIQUES"] = str(cliques)
    proc = subprocess.run([job.impl.launcher, *job.pre, "-n", "4", str(app)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and not warnings(proc), proc.stdout + proc.stderr
    steps = {x.split()[0]: tuple(x.split()[1:]) for x in proc.stdout.splitlines() if x.count(" ") == 2}
    ran = collections.Counter()
    for r in range(4):
        for line in (log / f"choices-{r}.txt").read_text().splitlines():
            _, coll, _, _, arm = line.split()
            ran[coll, arm] += 1
    return steps, ran


MPICH_ARMS = {"allreduce": "mpich:ring", "allreduce-small": "mpich:reduce_scatter_allgather",
              "reduce": "mpich:reduce_scatter_gather", "allgather": "mpich:recursive_doubling"}
EXPECT = {"allreduce-noncommutative": ("error", "right"),
          "allreduce-noncommutative-again": ("error", "right"),
          "allreduce-sum": ("ok", "right"),                   # ring runs MPI_SUM
          "pmpi-allreduce-noncommutative": ("ok", "right"),   # the variable is back after the arm
          "allreduce-sum-2-ints": ("error", "right"),
          "reduce-noncommutative": ("error", "right"),
          "allgather-3-ranks": ("error", "right")}


def test_written_algorithm_is_used_at_that_call(job, tmp_path):
    steps, ran = evidence_run(job, tmp_path, MPICH_ARMS, "error")
    assert steps == EXPECT, steps
    # 4 allreduces x 4 ranks, 1 reduce x 4, 1 allgather x 3 ranks: all drawn as the MPICH arms
    assert ran == {("allreduce", "mpich:ring"): 12, ("allreduce", "mpich:reduce_scatter_allgather"): 4,
                   ("reduce", "mpich:reduce_scatter_gather"): 4,
                   ("allgather", "mpich:recursive_doubling"): 3}, ran
    # the same calls under the library arm: no error
    steps, ran = evidence_run(job, tmp_path, dict.fromkeys(MPICH_ARMS, "library"), "error")
    assert set(steps.values()) == {("ok", "right")} and len(steps) == len(EXPECT), steps
    assert {arm for _, arm in ran} == {"library"}
    # MPICH's default fallback (silent): the MPICH arms' results are all correct
    steps, _ = evidence_run(job, tmp_path, MPICH_ARMS, None)
    assert set(steps.values()) == {("ok", "right")} and len(steps) == len(EXPECT), steps


def test_arm_runs_on_the_whole_communicator_across_nodes(job, tmp_path):
    """Two fake nodes (MPIR_CVAR_NUM_CLIQUES=2): ch4's composition would run a commutative
    allreduce as intra-node and inter-node parts (2 ranks each: 2 ints pass the check);
    with MPIR_CVAR_DEVICE_COLLECTIVES=none during the arm the algorithm runs on the 4 ranks."""
    steps, _ = evidence_run(job, tmp_path, MPICH_ARMS, "error", cliques=2)
    assert steps == EXPECT, steps


def test_random_mpich_and_colltune_arms_agree_on_every_rank(job, tmp_path):
    """onlinecheck (split communicators, data-dependent calls, a non-commutative op) with a state
    listing MPICH arms beside colltune arms for MPI_COMM_WORLD's blocks (the sub-communicators
    draw from the presets, which list the MPICH arms too)."""
    doc = online_arms(job, tmp_path)
    blocks = {}
    for coll in COLLS:
        mine = ["library", doc["arms"][coll][1]] + [a for a in doc["arms"][coll] if a.startswith("mpich:")]
        for rng in CLASSES:
            blocks[coll, 1, 4, rng] = {a: round(1 / len(mine), 6) for a in mine}
    state, log = tmp_path / "state", tmp_path / "log"
    write_state(state, doc["fingerprint"], blocks)
    proc = job(4, state, "30", log=log)
    assert ok(proc) and not warnings(proc)
    seqs = check_logs(log, 4)
    drawn = collections.Counter()
    for by_rank in seqs.values():
        for coll, _, _, arm in next(iter(by_rank.values())):
            drawn[coll, arm] += 1
    for coll in COLLS:
        for arm in (a for a in doc["arms"][coll] if a.startswith("mpich:")):
            assert drawn[coll, arm] > 0, (coll, arm, drawn)
    st = check_state_dir(state, runs=2)
    measured = {a for arms in st["blocks"].values() for a, (_, n, _) in arms.items() if n and a.startswith("mpich:")}
    assert len(measured) >= 6, measured
