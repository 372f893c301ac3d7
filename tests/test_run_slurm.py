"""`colltune run --backend slurm`: an unmodified MPI program as one srun step inside a
real allocation (the two-node test Slurm of slurm_fixture.py), libcolltune.so
preloaded in the ranks: online mode twice (the state dir learns across runs), a rules
file whose COLLTUNE_REPORT shows the rule's algorithms ran, and the error outside an
allocation."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import CACHE, REPO
from slurm_fixture import NODES, slurm_cluster, mpi_libraries  # noqa: F401  (fixture)

APP = os.path.join(REPO, "src", "colltune", "apps", "collmix.c")
LIBS = mpi_libraries()


@pytest.fixture
def env(slurm_cluster, tmp_path):
    return {**slurm_cluster.env, "COLLTUNE_STORE": str(tmp_path / "store.sqlite"),
            "COLLTUNE_CACHE_DIR": CACHE}


def run_in_allocation(cluster, env, cwd, *args, nodes=2):
    """`salloc -N nodes colltune run --backend slurm ...`."""
    return cluster.run(["salloc", f"--nodes={nodes}", "--exclusive", "--quiet", sys.executable,
                        "-m", "colltune.cli", "run", "--backend", "slurm", *args],
                       check=False, env=env, cwd=cwd, timeout=180)


def ok(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checks, 0 failures" in proc.stdout, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("lib", LIBS)
def test_online_twice_and_rules_as_srun_steps(slurm_cluster, env, tmp_path, lib):
    state = tmp_path / "state"
    for run in (1, 2):
        proc = ok(run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", lib, "--layout",
                                    "2x1", "--online", str(state), "--", APP, "4"))
        assert "srun --job-name=colltune-run-" in proc.stderr
        assert "--nodes=2 --ntasks=2 --ntasks-per-node=1" in proc.stderr
        assert "env LD_PRELOAD=" in proc.stderr and "libcolltune.so" in proc.stderr
        assert f"online state {state}: {run} runs" in proc.stderr      # `online update` ran
        assert len(os.listdir(state / "samples")) == run
        text = (state / "state.txt").read_text()
        assert f"run-count {run}\n" in text and "source=measured" in text
    rules = tmp_path / "r.rules"
    rules.write_text("colltune-rules 1\nallreduce -> ring\nbcast -> binomial\n")
    report = tmp_path / "report.jsonl"
    proc = ok(run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", lib, "--layout", "2x2",
                                "--rules", str(rules), "--report", str(report), "--", APP, "2"))
    assert "--nodes=2 --ntasks=4 --ntasks-per-node=2" in proc.stderr
    ran = {(r["collective"], r["ran"]) for r in map(json.loads, report.read_text().splitlines())}
    assert ran == {("allreduce", "ring"), ("bcast", "binomial")}, ran


def test_outside_an_allocation_or_too_large_layout_is_a_clear_error(slurm_cluster, env,
                                                                     tmp_path):
    proc = slurm_cluster.run([sys.executable, "-m", "colltune.cli", "run", "--backend", "slurm",
                              "--mpi", "mpich", "--layout", "2x1", "--", APP],
                             check=False, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "not inside a Slurm allocation (SLURM_JOB_ID is not set)" in proc.stderr
    assert "salloc -N 2 colltune run --backend slurm" in proc.stderr
    proc = run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", "mpich", "--layout", "2x1",
                             "--", APP, nodes=1)
    assert proc.returncode == 2 and "--layout 2x1: the allocation (job" in proc.stderr, proc.stderr
    assert "has 1 nodes" in proc.stderr


def test_a_plugin_that_starts_singletons_fails_the_run(slurm_cluster, env, tmp_path):
    """srun --mpi=pmi2 does not bootstrap Open MPI 5: two one-rank jobs ran, each alone,
    and run exited 0 (a review; bench caught it, run did not). The interposer now aborts
    when MPI_COMM_WORLD is not the size srun was asked for."""
    from colltune import mpi
    if "openmpi" not in {impl.name for impl in mpi.discover()}:
        pytest.skip("needs Open MPI")
    proc = slurm_cluster.run(["salloc", "--nodes=2", "--exclusive", "--quiet", "env",
                              "COLLTUNE_SLURM_MPI=pmi2", sys.executable, "-m", "colltune.cli",
                              "run", "--backend", "slurm", "--mpi", "openmpi", "--layout", "2x1",
                              "--", APP, "2"], check=False, env=env, cwd=tmp_path, timeout=180)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "the job was started as 2 ranks, but MPI_COMM_WORLD has 1" in proc.stderr, proc.stderr


def test_run_takes_the_allocations_tasks_and_checks_n_against_the_cpus(slurm_cluster, env, tmp_path):
    """salloc -N2 -n4 then `colltune run -- prog` started 2 ranks (SLURM_NTASKS was
    ignored), and -n past the nodes' CPUs was left to srun's own error (a review)."""
    proc = slurm_cluster.run(["salloc", "--nodes=2", "--ntasks=4", "--quiet", sys.executable,
                              "-m", "colltune.cli", "run", "--backend", "slurm", "--mpi", "mpich",
                              "--", APP, "1"], check=False, env=env, cwd=tmp_path, timeout=180)
    assert "--nodes=2 --ntasks=4 --ntasks-per-node=2" in proc.stderr, proc.stderr
    proc = run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", "mpich", "-n", "16",
                             "--", APP, "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "-n 16: 8 rank(s) per node, but the allocation's nodes have" in proc.stderr


def test_run_starts_every_task_of_an_allocation_whose_tasks_do_not_divide(slurm_cluster, env,
                                                                           tmp_path):
    """A review: in `salloc -N2 -n3` (Slurm places 2 + 1) colltune run started 2 ranks,
    silently: 3 did not divide by 2 nodes. All 3 run now, placed by Slurm (no
    --ntasks-per-node); the interposer checks MPI_COMM_WORLD has 3 (COLLTUNE_WORLD)."""
    proc = ok(slurm_cluster.run(["salloc", "--nodes=2", "--ntasks=3", "--quiet", sys.executable,
                                 "-m", "colltune.cli", "run", "--backend", "slurm", "--mpi",
                                 "mpich", "--", APP, "1"], check=False, env=env, cwd=tmp_path,
                                timeout=180))
    line = next(ln for ln in proc.stderr.splitlines() if "srun --job-name=" in ln)
    assert "--nodes=2 --ntasks=3 " in line and "--ntasks-per-node" not in line, line
    assert "COLLTUNE_WORLD=3 " in line, line
    # -n N that does not divide by the nodes: all N too (it had been refused)
    proc = ok(run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", "mpich", "-n", "3",
                                "--", APP, "1"))
    assert "--nodes=2 --ntasks=3 " in proc.stderr and "COLLTUNE_WORLD=3 " in proc.stderr
    # more ranks than the allocation's CPUs: refused before srun, with the numbers
    proc = slurm_cluster.run(["salloc", "--nodes=2", "--ntasks=3", "--quiet", sys.executable,
                              "-m", "colltune.cli", "run", "--backend", "slurm", "--mpi",
                              "mpich", "-n", "5", "--", APP, "1"], check=False, env=env,
                             cwd=tmp_path, timeout=180)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "-n 5: 5 ranks, but the allocation (job" in proc.stderr, proc.stderr
    assert "has 3 CPUs on its 2 nodes" in proc.stderr, proc.stderr


@pytest.mark.parametrize("lib", LIBS[:1])
def test_a_profile_names_slurms_nodes(slurm_cluster, env, tmp_path, lib):
    """The rank files held MPI_Get_processor_name only: where Slurm's NodeName differs
    (here both test nodes run on one host), the profile could not be mapped onto
    topology.conf and both nodes were one host (a review). Under Slurm the hosts are
    its node names, and a note says which host names they replace."""
    from colltune.profile.counts import load_profile
    prof = tmp_path / "prof"
    ok(run_in_allocation(slurm_cluster, env, tmp_path, "--mpi", lib, "--layout", "2x1",
                         "--profile", str(prof), "--", APP, "2"))
    p = load_profile(str(prof))
    nodes = sorted(set(p.hosts))
    assert len(nodes) == 2 and nodes == sorted(NODES), (p.hosts, NODES)
    names = json.loads((prof / "rank-0.json").read_text())
    if names["host"] != names["slurm_node"]:
        assert any("Slurm's node names (SLURMD_NODENAME)" in n for n in p.notes), p.notes
