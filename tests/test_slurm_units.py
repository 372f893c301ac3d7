"""Pieces of the Slurm support that need no running Slurm: parsing Slurm's
variables, the node pool, provider options for srun, batch script contents."""
from __future__ import annotations

import threading
import time

import pytest

from colltune import config
from colltune.backends.slurm import NodePool, rank_env
from colltune.errors import BackendError, ColltuneError, ConfigError
from colltune.slurm import allocation, cpus_per_node
from colltune.slurm.script import batch_script


def test_cpus_per_node_reads_slurms_compressed_form():
    assert cpus_per_node("2(x3),1", 4) == [2, 2, 2, 1]
    assert cpus_per_node("48", 1) == [48]
    with pytest.raises(BackendError, match="describes 3 nodes, the allocation has 2"):
        cpus_per_node("2(x3)", 2)
    with pytest.raises(BackendError, match="cannot read 'x'"):
        cpus_per_node("2,x", 2)


def test_no_allocation_says_how_to_get_one():
    with pytest.raises(BackendError, match="SLURM_JOB_ID is not set.*salloc or sbatch"):
        allocation({})


def test_provider_env_options_become_rank_environment():
    assert rank_env(["-genv", "LD_PRELOAD", "/x/shim.so"]) == {"LD_PRELOAD": "/x/shim.so"}
    assert rank_env([]) == {}
    with pytest.raises(BackendError, match="cannot pass mpiexec options"):
        rank_env(["--bind-to", "core"])


def test_node_pool_lends_disjoint_nodes_and_waits_when_empty():
    pool = NodePool(("a", "b", "c"))
    held: list[set] = []
    overlap = []
    lock = threading.Lock()

    def step(count):
        with pool.take(count) as nodes:
            with lock:
                overlap.extend(s & set(nodes) for s in held)
                held.append(set(nodes))
            time.sleep(0.05)
            with lock:
                held.remove(set(nodes))

    threads = [threading.Thread(target=step, args=(n,)) for n in (2, 1, 2, 3, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(overlap)
    with pool.take(3) as nodes:        # everything came back
        assert nodes == ["a", "b", "c"]


def _settings(**cli):
    return config.load(cli, environ={"COLLTUNE_STORE": "/data/s.sqlite"})


def test_batch_script_sizes_the_allocation_from_the_campaign(tmp_path):
    s = _settings(slurm_partition="batch", slurm_account="hpc42", slurm_time="1:30:00",
                  slurm_sbatch_args="--qos=long --constraint='ib&skylake'",
                  output_dir=str(tmp_path / "out"))
    script = batch_script(["tune", "--layouts", "2x4,4x8", "--jobs", "3", "--campaign", "c1"],
                          s, cwd=str(tmp_path), python="/opt/py")
    text = script.text
    assert (script.nodes, script.ppn) == (12, 8)        # 4 nodes x 3 concurrent steps
    for line in ("#SBATCH --nodes=12", "#SBATCH --ntasks-per-node=8", "#SBATCH --exclusive",
                 "#SBATCH --partition=batch", "#SBATCH --account=hpc42",
                 "#SBATCH --time=1:30:00", "#SBATCH --qos=long",
                 "#SBATCH '--constraint=ib&skylake'",      # sbatch strips quotes (checked)
                 "#SBATCH --job-name=colltune-c1",
                 f"cd {tmp_path}", "export COLLTUNE_STORE=/data/s.sqlite",
                 "exec /opt/py -m colltune.cli tune --layouts 2x4,4x8 --jobs 3 "
                 "--campaign c1 --backend slurm"):
        assert line in text.splitlines(), (line, text)
    assert (tmp_path / "out").is_dir()             # sbatch would not create it
    assert batch_script(["bench", "--coll", "bcast", "--layouts", "2x1"], s,
                        nodes=5, cwd=str(tmp_path)).nodes == 5


def test_batch_script_refuses_what_cannot_run(tmp_path):
    s = _settings(output_dir=str(tmp_path))
    with pytest.raises(ColltuneError, match="runs one of: tune, bench"):
        batch_script(["report"], s)
    with pytest.raises(ColltuneError, match="runs the slurm backend, not --backend sim"):
        batch_script(["tune", "--backend", "sim", "--layouts", "1x1"], s)
    with pytest.raises(ColltuneError, match="largest layout needs 4 nodes"):
        batch_script(["tune", "--layouts", "4x1"], s, nodes=2)
    with pytest.raises(ConfigError, match="slurm_sbatch_args from command line"):
        batch_script(["tune", "--layouts", "1x1"], _settings(slurm_sbatch_args="--x='open"))
    with pytest.raises(ConfigError, match="slurm_time from environment"):
        config.load({}, environ={"COLLTUNE_SLURM_TIME": "2 hours"})


def test_settings_given_to_the_script_command_hold_in_the_job(tmp_path):
    s = config.load({"jobs": 3, "slurm_mpi": "pmix", "backend": "sim",
                     "output_dir": str(tmp_path)}, environ={"COLLTUNE_MIN_REPS": "7"})
    lines = batch_script(["tune", "--layouts", "2x1"], s, cwd=str(tmp_path)).text.splitlines()
    assert "#SBATCH --nodes=6" in lines                  # 2 nodes x 3 concurrent steps
    for line in ("export COLLTUNE_JOBS=3", "export COLLTUNE_SLURM_MPI=pmix",
                 "export COLLTUNE_MIN_REPS=7"):
        assert line in lines
    assert not any("COLLTUNE_BACKEND" in line for line in lines)
    # the campaign command's own option wins (and sizes the allocation)
    text = batch_script(["tune", "--layouts", "2x1", "--jobs", "1"], s, cwd=str(tmp_path)).text
    assert "#SBATCH --nodes=2" in text.splitlines()


def test_slurm_failures_are_told_from_the_programs():
    """srun's and slurmstepd's words that Slurm itself failed stop a campaign unstored;
    the same words from the program (its own errors are the algorithm's) do not."""
    from colltune.slurm import slurm_failure
    for line in ("srun: error: Unable to create step for job 9: Job/step already completing or completed",
                 "srun: error: Slurm job 5 has expired",
                 "srun: error: slurm_receive_msg: Socket timed out on send/recv operation",
                 "slurmstepd-n1: error: *** STEP 9.3 ON n1 CANCELLED AT 2026-11-27T21:00:00 DUE TO TIME LIMIT ***"):
        assert slurm_failure("some output\n" + line + "\nmore") == line
    for line in ("srun: error: n1: task 0: Segmentation fault (core dumped)",
                 "[1700000000.1] ucx: Socket timed out", "rank 0: Unable to create step",
                 "env: '/x/colltune-bench': No such file or directory"):
        assert slurm_failure(line) is None
    # the step wrapper's words in a task without srun's environment, also after srun
    # --label's "1: " (slurmstepd's execve line: test_slurm_backend.py, real srun)
    said = "colltune-step: srun gave the task no environment (no HOME in task 1 on n2): x"
    assert slurm_failure("1: " + said) == said
