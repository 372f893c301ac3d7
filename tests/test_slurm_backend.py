"""The slurm backend on a real Slurm (two slurmd nodes on this machine, see
slurm_fixture.py) with the real Open MPI and MPICH wheels: srun steps, a tuning
campaign, parallel steps on disjoint nodes, a batch job, and the failures."""
from __future__ import annotations

import json
import os
import sqlite3
import sys

import pytest

from conftest import CACHE
from slurm_fixture import NODES, RANK_ENV, slurm_cluster, mpi_libraries  # noqa: F401  (fixture)

from colltune import config

QUICK = ("--min-reps", "3", "--max-reps", "30", "--rse", "0.2", "--timeout", "120", "-q")
# Launching, placement and labels are under test, not timings: checked runs only
# (on this loaded 2-core host a timed point can end with every repetition late).
CHECKED = (*QUICK, "--check", "only")
FORCED = {"openmpi": "binomial", "mpich": "binomial"}     # a bcast algorithm both have


LIBS = mpi_libraries()


@pytest.fixture
def env(slurm_cluster, tmp_path):
    """Client environment: the test Slurm, a private store and output folder."""
    return {**slurm_cluster.env, "COLLTUNE_STORE": str(tmp_path / "store.sqlite"),
            "COLLTUNE_OUTPUT_DIR": str(tmp_path / "out"), "COLLTUNE_CACHE_DIR": CACHE}


def colltune_in_allocation(cluster, env, cwd, *args, nodes=2, timeout=240):
    """`salloc -N nodes colltune ...`: colltune runs inside a real allocation."""
    return cluster.run(["salloc", f"--nodes={nodes}", "--exclusive", "--quiet",
                        sys.executable, "-m", "colltune.cli", *args],
                       check=False, env=env, cwd=cwd, timeout=timeout)


def points(store: str, campaign: str | None = None) -> list[dict]:
    """Measurements joined with their run (started/finished, error)."""
    con = sqlite3.connect(store)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT m.*, r.algorithm, r.nodes, r.ppn, r.backend, r.started, "
                       "r.finished, r.error, r.command FROM measurements m JOIN runs r "
                       "USING (run_id)" + (" WHERE r.campaign = ?" if campaign else ""),
                       (campaign,) if campaign else ()).fetchall()
    con.close()
    out = [dict(r) for r in rows]
    for p in out:
        p["labels"] = json.loads(p["labels_json"] or "{}")
    return out


def step_nodes(cluster, label: str) -> set[str]:
    return set(cluster.run(["scontrol", "show", "hostnames", label]).stdout.split())


@pytest.mark.parametrize("lib", LIBS)
def test_srun_steps_run_the_bench_with_each_library(slurm_cluster, env, tmp_path, lib):
    for attempt in range(3):
        proc = colltune_in_allocation(
            slurm_cluster, env, tmp_path, "bench", "--backend", "slurm", "--mpi", lib,
            "--coll", "bcast", "--algorithms", f"{FORCED[lib]},default", "--layouts", "2x1",
            "--sizes", "8,1000", "--jobs", "1", "--campaign", "b", *CHECKED,
            *(["--retry-failed"] if attempt else []))
        pts = points(env["COLLTUNE_STORE"], "b")
        crashed = [p["check_error"] for p in pts if p["status"] != "ok"]
        # Open MPI's rank segfaulted once in MPI_Init/first call here (load average 12;
        # not reproduced in 25 repeats): a rare library crash is re-measured, anything
        # else fails the test.
        if proc.returncode == 0 or not crashed or \
                not all("Segmentation fault" in c for c in crashed):
            break
    assert proc.returncode == 0, (proc.stdout + proc.stderr, crashed, slurm_cluster.log_tail())
    pts = [p for p in points(env["COLLTUNE_STORE"], "b") if p["status"] == "ok"]
    assert len(pts) == 4 and {p["status"] for p in pts} == {"ok"}
    assert all(p["valid"] == 1 and p["participants"] == 2 for p in pts)
    for p in pts:
        assert p["backend"] == "slurm"
        # one step over both nodes, as Slurm itself reports it inside the step
        assert step_nodes(slurm_cluster, p["labels"]["slurm_nodes"]) == set(NODES)
        assert p["labels"]["slurm_step"].split(".")[0].isdigit()
        assert f"--mpi={'pmix' if lib == 'openmpi' else 'pmi2'}" in p["command"]
    forced = [p for p in pts if p["algorithm"] == FORCED[lib]]
    assert all(p["labels"]["ran"] == FORCED[lib] for p in forced)
    assert all(p["labels"]["forced"] != "none (library default)" for p in forced)
    # each launch is its own step (one more per re-measured launch)
    assert len({p["labels"]["slurm_step"] for p in pts}) >= 2


def test_tune_campaign_through_slurm_stores_results_and_table(slurm_cluster, env, tmp_path):
    # the emulated nodes share this host's 2 cores with whatever else runs: a start
    # late by a scheduler time slice is noise here, not a failure of what is tested
    env = {**env, "COLLTUNE_LATE_TOLERANCE_US": "20000"}
    table = tmp_path / "t.json"
    tune = ("tune", "--backend", "slurm", "--mpi", "mpich", "--collectives", "allreduce",
            "--algorithms", "recursive_doubling,ring", "--baselines", "default",
            "--layouts", "2x1", "--sizes", "8,4096", "--campaign", "t", "--table", str(table),
            "--jobs", "2", *QUICK)
    for attempt in range(3):    # a loaded host can leave a point with no timed repetition
        proc = colltune_in_allocation(slurm_cluster, env, tmp_path, *tune,
                                      *(["--retry-failed"] if attempt else []))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        pts = points(env["COLLTUNE_STORE"], "t")
        if all(p["status"] == "ok" for p in pts):
            break
        assert {p["check_error"] for p in pts if p["status"] != "ok"} == {"no time reported"}
    else:
        pytest.fail(f"points still without a timed repetition after 3 tries: {pts}")
    pts = [p for p in pts if p["status"] == "ok"]
    assert {p["algorithm"] for p in pts} == {"recursive_doubling", "ring", "default"}
    assert {p["msg_size"] for p in pts} == {8, 4096}
    assert all(p["labels"].get("slurm_nodes") for p in pts)
    data = json.loads(table.read_text())
    assert data["provenance"]["backend"] == "slurm"
    assert data["provenance"]["srun_mpi"] == "pmi2"
    assert data["provenance"]["platform"] == "colltune-test"     # the cluster's name
    assert data["entries"][0]["nodes"] == 2
    # resume: the same campaign again measures nothing
    again = colltune_in_allocation(slurm_cluster, env, tmp_path, *tune)
    assert again.returncode == 0 and "0 launches" in again.stdout, again.stdout


def test_parallel_steps_run_on_disjoint_nodes(slurm_cluster, env, tmp_path):
    algs = "binomial,scatter_recursive_doubling_allgather,scatter_ring_allgather,default"
    proc = colltune_in_allocation(
        slurm_cluster, env, tmp_path, "bench", "--backend", "slurm", "--mpi", "mpich",
        "--coll", "bcast", "--algorithms", algs, "--layouts", "1x1",
        "--sizes", "8,64,512,4096", "--jobs", "2", "--campaign", "p", *CHECKED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = {}
    for p in points(env["COLLTUNE_STORE"], "p"):
        steps[p["labels"]["slurm_step"]] = (p["started"], p["finished"],
                                            step_nodes(slurm_cluster, p["labels"]["slurm_nodes"]))
    assert len(steps) == 4
    assert all(len(nodes) == 1 for _, _, nodes in steps.values())
    overlapping = [(a, b) for a in steps for b in steps if a < b
                   and steps[a][0] < steps[b][1] and steps[b][0] < steps[a][1]]
    assert overlapping, f"no two steps ran at the same time: {steps}"
    for a, b in overlapping:
        assert not steps[a][2] & steps[b][2], f"steps {a} and {b} shared nodes: {steps}"
    assert set().union(*(n for _, _, n in steps.values())) == set(NODES)


def test_batch_script_runs_a_campaign_to_completion(slurm_cluster, env, tmp_path):
    proc = slurm_cluster.run(
        [sys.executable, "-m", "colltune.cli", "slurm", "submit", "--wait", "--time", "5",
         "--", "bench", "--mpi", "mpich", "--coll", "bcast",
         "--algorithms", "binomial,default", "--layouts", "2x1",
         "--sizes", "8", "--campaign", "sb", "--jobs", "1", *CHECKED],
        check=False, env=env, cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr + slurm_cluster.log_tail()
    job = proc.stdout.split("as job ")[1].split()[0]
    script = (tmp_path / "out" / "colltune-sb.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --time=5" in script
    assert "--backend slurm" in script
    log = (tmp_path / "out" / f"slurm-colltune-sb-{job}.out").read_text()
    assert f"colltune: job {job}" in log and "campaign sb" in log, log
    pts = points(env["COLLTUNE_STORE"], "sb")
    assert len(pts) == 2 and {p["status"] for p in pts} == {"ok"}, pts
    assert {p["labels"]["slurm_step"].split(".")[0] for p in pts} == {job}


# -- failures ------------------------------------------------------------------
def test_submit_wait_names_the_job_and_why_it_cannot_start(slurm_cluster, env, tmp_path):
    """A review: with --jobs 2 a 2x1 campaign asks for 4 nodes, more than the partition
    has; `submit --wait` then waited silently, without even the job id. The id comes at
    once, and Slurm's pending reason with what to change."""
    import subprocess
    import time
    proc = subprocess.Popen(
        [sys.executable, "-m", "colltune.cli", "slurm", "submit", "--wait", "--", "tune",
         "--mpi", "mpich", "--collectives", "bcast", "--layouts", "2x1", "--sizes", "8",
         "--jobs", "2"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    assert "as job " in first and "(4 node(s), 1 task(s) per node)" in first, first
    job = first.split("as job ")[1].split()[0]
    deadline, err = time.time() + 60, ""
    try:
        while time.time() < deadline and "is pending:" not in err:
            err += proc.stderr.readline()
    finally:
        slurm_cluster.run(["scancel", job], env=env, check=False)
    out, rest = proc.communicate(timeout=60)
    assert f"job {job} is pending: PartitionNodeLimit (it asks for 4 node(s)" in err, err + rest
    assert f"job {job} ended" in out



def test_outside_an_allocation_is_a_clear_error(slurm_cluster, env, tmp_path):
    proc = slurm_cluster.run([sys.executable, "-m", "colltune.cli", "bench", "--backend",
                              "slurm", "--coll", "bcast", "--layouts", "1x1", "--sizes", "8"],
                             check=False, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "not inside a Slurm allocation (SLURM_JOB_ID is not set)" in proc.stderr


def test_without_srun_is_a_clear_error(slurm_cluster, env, tmp_path):
    proc = slurm_cluster.run([sys.executable, "-m", "colltune.cli", "bench", "--backend",
                              "slurm", "--coll", "bcast", "--layouts", "1x1", "--sizes", "8"],
                             check=False, env={**env, "PATH": str(tmp_path),
                                               "SLURM_JOB_ID": "1"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Slurm's srun is not on PATH" in proc.stderr


def test_unknown_mpi_plugin_and_too_many_nodes_are_refused(slurm_cluster, env, tmp_path):
    proc = colltune_in_allocation(slurm_cluster, env, tmp_path, "bench", "--backend", "slurm",
                                  "--mpi", "mpich", "--slurm-mpi", "bogus", "--coll", "bcast",
                                  "--layouts", "1x1", "--sizes", "8", nodes=1)
    assert proc.returncode == 2 and "srun offers MPI plugins" in proc.stderr
    assert "'bogus'" in proc.stderr and "pmi2" in proc.stderr
    proc = colltune_in_allocation(slurm_cluster, env, tmp_path, "tune", "--backend", "slurm",
                                  "--mpi", "mpich", "--collectives", "bcast",
                                  "--layouts", "2x1", "--sizes", "8", nodes=1)
    assert proc.returncode == 2 and "layout 2x1: the allocation (job" in proc.stderr
    assert "has 1 nodes (salloc/sbatch -N 2 or more)" in proc.stderr
    # ranks per node past the CPUs the job has on a node (no --exclusive: 1 here)
    proc = slurm_cluster.run(["salloc", "--nodes=1", "--ntasks=1", "--quiet", sys.executable,
                              "-m", "colltune.cli", "tune", "--backend", "slurm", "--mpi",
                              "mpich", "--collectives", "bcast", "--layouts", "1x2", "--sizes",
                              "8"], check=False, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "CPUs for this job (ask salloc/sbatch for more, e.g. --exclusive)" in proc.stderr


def test_failed_steps_are_recorded_per_point(slurm_cluster, env, tmp_path):
    # a step srun refuses: Slurm's failure, not the algorithm's; the campaign stops
    # and stores nothing (it had stored a crash a resumed campaign then skipped)
    proc = colltune_in_allocation(
        slurm_cluster, env, tmp_path, "bench", "--backend", "slurm", "--mpi", "mpich",
        "--coll", "bcast", "--layouts", "2x1", "--sizes", "8", "--campaign", "bad",
        "--slurm-srun-args=--constraint=nosuchfeature", *QUICK)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Slurm could not run step" in proc.stderr and "Unable to create step" in proc.stderr
    assert "this launch is not stored" in proc.stderr
    # a step whose plugin does not bootstrap the library: the run itself is wrong
    proc = colltune_in_allocation(
        slurm_cluster, env, tmp_path, "bench", "--backend", "slurm", "--mpi", "mpich",
        "--coll", "bcast", "--layouts", "2x1", "--sizes", "8", "--campaign", "single",
        "--slurm-mpi", "none", *QUICK)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert points(env["COLLTUNE_STORE"], "bad") == []
    single = points(env["COLLTUNE_STORE"], "single")
    assert [p["status"] for p in single] == ["crashed"]
    assert "MPI saw a world of 1" in single[0]["error"]


def test_hung_step_times_out_and_is_cancelled(slurm_cluster, monkeypatch, tmp_path):
    """In-process: the backend in an allocation made with salloc --no-shell."""
    from colltune.backends.base import Launch
    from colltune.backends.slurm import SlurmBackend
    from colltune.slurm import steps
    out = slurm_cluster.run(["salloc", "-N1", "--no-shell", "--exclusive"]).stderr
    job = out.split("Granted job allocation ")[1].split()[0]
    try:
        for k, v in {"SLURM_CONF": slurm_cluster.conf, "SLURM_JOB_ID": job,
                     "SLURM_JOB_NODELIST": slurm_cluster.run(
                         ["squeue", "-h", "-j", job, "-o", "%N"]).stdout.strip(),
                     "SLURM_JOB_CPUS_PER_NODE": "2"}.items():
            monkeypatch.setenv(k, v)
        b = SlurmBackend(config.load({"backend": "slurm", "mpi": "mpich", "cache_dir": CACHE},
                                     environ={}))
        b.prepare()
        # the late rank sleeps 3 s per repetition: hangs far past the 2 s timeout
        launch = Launch(1, 1, ["--coll", "bcast", "--scenario", "delayed", "--sizes", "8",
                               "--delays-us", "3000000", "--min-reps", "5"],
                        b.provider().force(b.provider().lookup("bcast", "default")), 2.0)
        result = b.run(launch, str(tmp_path / "w"))
        assert result.timed_out and not result.clean and result.exit_code is None, \
            (result.exit_code, result.wall_s, result.output_tail, slurm_cluster.log_tail(40))
        assert "colltune: cancelled step" in result.output_tail
        assert steps(job) == {}         # the step is gone, the allocation still there
        # the nodes went back to the pool: the next step runs
        ok = b.run(Launch(1, 2, ["--coll", "bcast", "--sizes", "8", "--check", "only"],
                          b.provider().force(b.provider().lookup("bcast", "default")), 60.0),
                   str(tmp_path / "w2"))
        assert ok.clean and len(ok.records) == 1
        assert ok.records[0]["labels"]["slurm_step"].startswith(f"{job}.")
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def test_sbatch_refusal_is_a_clear_error(slurm_cluster, env, tmp_path):
    proc = slurm_cluster.run([sys.executable, "-m", "colltune.cli", "slurm", "submit",
                              "--partition", "nosuchpartition", "--", "tune",
                              "--layouts", "1x1", "--sizes", "8"],
                             check=False, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "--parsable" in proc.stderr and "exited 1" in proc.stderr, proc.stderr
    assert "invalid partition" in proc.stderr.lower(), proc.stderr    # sbatch's words


def test_an_ended_allocation_stops_the_campaign_and_stores_nothing(slurm_cluster, env, tmp_path):
    """A review: after the allocation's time limit (or with the controller or a node
    gone) every remaining launch was stored as a crashed algorithm, and a resumed
    campaign skipped them. Here the job colltune is told it runs in has ended."""
    ended = slurm_cluster.run(["salloc", "--nodes=1", "--quiet", "sh", "-c", "echo $SLURM_JOB_ID"],
                              env=env, cwd=tmp_path).stdout.split()[-1]
    proc = slurm_cluster.run(
        ["salloc", "--nodes=2", "--exclusive", "--quiet", "sh", "-c",
         f'SLURM_JOB_ID={ended} SLURM_JOBID={ended} exec "$@"', "colltune",
         sys.executable, "-m", "colltune.cli", "bench", "--backend", "slurm", "--mpi", "mpich",
         "--coll", "bcast", "--layouts", "2x1", "--sizes", "8", "--campaign", "ended", *QUICK],
        check=False, env=env, cwd=tmp_path, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"Slurm could not run step" in proc.stderr and f"job {ended}" in proc.stderr, proc.stderr
    assert points(env["COLLTUNE_STORE"], "ended") == []


def test_colltunes_own_algorithms_are_refused_on_slurm(slurm_cluster, env, tmp_path):
    """--provider colltune was ignored on slurm (the library's algorithms were tuned,
    and run --tune-first then failed after its whole budget): refused by name."""
    proc = colltune_in_allocation(slurm_cluster, env, tmp_path, "tune", "--backend", "slurm",
                                  "--mpi", "mpich", "--provider", "colltune", "--collectives",
                                  "bcast", "--layouts", "2x1", "--sizes", "8", *QUICK)
    assert proc.returncode == 2
    assert "provider 'colltune' does not run on backend 'slurm'" in proc.stderr


APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "src", "colltune", "apps", "collmix.c")


@pytest.mark.parametrize("lib", LIBS)
def test_a_batch_job_submitted_with_export_none_measures_and_runs(slurm_cluster, env,
                                                                 tmp_path, lib):
    """A review: in a job of `sbatch --export=NONE` (common at HPC centres) srun inherits
    SLURM_EXPORT_ENV=NONE, so every step's tasks had no environment: Open MPI's bench
    stopped in MPI_Init (no HOME, no OPAL_PREFIX) and was stored as a crashed point, and
    `colltune run`'s tasks could not even find `env` (execve(): No such file or
    directory). Every srun of colltune now says --export=ALL."""
    store = tmp_path / "store.sqlite"
    script = tmp_path / "job.sh"
    # --export=NONE: nothing of this process reaches the job, so the script sets it all
    script.write_text("#!/bin/bash\nset -eu\n"
                      f"cd {tmp_path}\n"
                      f"export COLLTUNE_STORE={store} COLLTUNE_CACHE_DIR={CACHE} "
                      f"COLLTUNE_OUTPUT_DIR={tmp_path / 'out'} "
                      + " ".join(f"{k}={v}" for k, v in RANK_ENV.items()) + "\n"
                      'echo "export=$SLURM_EXPORT_ENV"\n'
                      f"{sys.executable} -m colltune.cli bench --backend slurm --mpi {lib} "
                      "--coll bcast --algorithms default --layouts 2x1 --sizes 8 "
                      f"--campaign none --jobs 1 {' '.join(CHECKED)}\n"
                      f"{sys.executable} -m colltune.cli run --backend slurm --mpi {lib} "
                      f"--layout 2x1 -- {APP} 1\n")
    log = tmp_path / "job.out"
    proc = slurm_cluster.run(["sbatch", "--wait", "--export=NONE", "--nodes=2", "--exclusive",
                              f"--output={log}", str(script)], check=False, env=env,
                             cwd=tmp_path, timeout=240)
    text = log.read_text() if log.exists() else ""
    assert "export=NONE" in text, (proc.stdout, proc.stderr, text)    # what the review met
    pts = points(str(store), "none")
    assert [(p["status"], p["error"]) for p in pts] == [("ok", None)], (pts, text)
    assert "checks, 0 failures" in text and "execve()" not in text, text
    assert "--export=ALL" in pts[0]["command"]       # the recorded command replays as well
    assert proc.returncode == 0, (proc.stdout, proc.stderr, text)


@pytest.mark.parametrize("lib", LIBS)
def test_a_step_whose_tasks_get_no_environment_is_slurms_failure(slurm_cluster, env,
                                                                 tmp_path, lib):
    """--export=NONE given back through slurm_srun_args (the last --export wins): the
    tasks lack the library's environment. Not the algorithm's failure (it had been stored
    as a crash, or for MPICH measured without the user's settings): the campaign stops
    and stores nothing."""
    proc = colltune_in_allocation(
        slurm_cluster, env, tmp_path, "bench", "--backend", "slurm", "--mpi", lib,
        "--coll", "bcast", "--algorithms", "default", "--layouts", "2x1", "--sizes", "8",
        "--campaign", "noenv", "--jobs", "1", "--slurm-srun-args=--export=NONE", *CHECKED)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Slurm could not run step" in proc.stderr, proc.stderr
    assert "srun gave the task no environment" in proc.stderr, proc.stderr
    assert "--export=NONE" in proc.stderr and "this launch is not stored" in proc.stderr
    assert points(env["COLLTUNE_STORE"], "noenv") == []


def test_slurmstepds_execve_failure_is_told_as_slurms(slurm_cluster, env, tmp_path):
    """slurmstepd's own words when a task's program cannot be started (here: no PATH in a
    task of srun --export=NONE) name Slurm's failure, with why, not the algorithm's."""
    from colltune.slurm import slurm_failure
    proc = slurm_cluster.run(["salloc", "--nodes=1", "--quiet", "srun", "--export=NONE",
                              "env", "true"], check=False, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and "execve(): env: No such file or directory" in proc.stderr, \
        proc.stderr
    why = slurm_failure(proc.stdout + proc.stderr)
    assert why is not None and "execve(): env: No such file or directory" in why, proc.stderr
    assert "could not start env" in why and "--export=NONE" in why, why
