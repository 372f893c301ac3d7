"""Talking to Slurm: the allocation colltune runs in, its client tools, steps.

Everything is asked of Slurm's own commands (``scontrol``, ``squeue``,
``scancel``, ``srun``) or read from the variables salloc/sbatch set
(``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST``, ``SLURM_JOB_CPUS_PER_NODE``);
nothing is guessed. Errors are BackendError naming what is missing.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

from ..errors import BackendError

TOOL_TIMEOUT = 30.0

# The srun --mpi plugin each library's wheel can bootstrap from: Open MPI 5
# speaks PMIx only (PMI-1/2 support was removed in 5.0). MPICH's built-in PMI
# client speaks PMI-1 by default (MPIR_CVAR_PMI_VERSION=1; its wire shows `cmd=init
# pmi_version=1`) on the PMI_FD socket that Slurm's pmi2 plugin opens, and that plugin
# serves PMI-1 as well as PMI-2 (seen with Debian's slurm 22.05 and the 5.0.2 wheel).
PMI_PLUGIN = {"openmpi": "pmix", "mpich": "pmi2"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackendError(f"Slurm's {name} is not on PATH: install the Slurm client tools "
                           f"(Debian: slurm-client) or load your site's slurm module")
    return path


def run_tool(argv: list[str], what: str, stderr_too: bool = False) -> str:
    """stdout (+ stderr) of a Slurm command; BackendError with its message if it fails."""
    try:
        proc = subprocess.run([tool(argv[0]), *argv[1:]], capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BackendError(f"{what}: `{' '.join(argv)}` did not answer in "
                           f"{TOOL_TIMEOUT:.0f} s (is slurmctld reachable?)") from None
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()[-600:]
        raise BackendError(f"{what}: `{' '.join(argv)}` exited {proc.returncode}: {msg}")
    return proc.stdout + (proc.stderr if stderr_too else "")


def expand_nodelist(nodelist: str) -> list[str]:
    """'n[1-3],gpu7' -> ['n1', 'n2', 'n3', 'gpu7'], by scontrol itself."""
    return run_tool(["scontrol", "show", "hostnames", nodelist],
                    f"expanding node list {nodelist!r}").split()


def cpus_per_node(text: str, count: int) -> list[int]:
    """SLURM_JOB_CPUS_PER_NODE ('2(x3),1') -> one number per node."""
    out: list[int] = []
    for item in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if m is None:
            raise BackendError(f"SLURM_JOB_CPUS_PER_NODE={text!r}: cannot read {item!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    if len(out) != count:
        raise BackendError(f"SLURM_JOB_CPUS_PER_NODE={text!r} describes {len(out)} nodes, "
                           f"the allocation has {count}")
    return out


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]           # per node, same order
    cluster: str
    partition: str


def allocation(environ=None) -> Allocation:
    """The allocation this process runs in (salloc, sbatch), from its variables."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID")
    if not job:
        raise BackendError("not inside a Slurm allocation (SLURM_JOB_ID is not set): run "
                           "colltune under salloc or sbatch, or write a batch script with "
                           "`colltune slurm script -- tune ...` (docs/slurm.md)")
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        nodelist = run_tool(["squeue", "-h", "-j", job, "-o", "%N"],
                            f"node list of job {job}").strip()
    nodes = expand_nodelist(nodelist)
    if not nodes:
        raise BackendError(f"job {job} has no nodes (node list {nodelist!r}); has it ended?")
    cpus_text = env.get("SLURM_JOB_CPUS_PER_NODE")
    cpus = cpus_per_node(cpus_text, len(nodes)) if cpus_text else [1] * len(nodes)
    return Allocation(job, tuple(nodes), tuple(cpus), env.get("SLURM_CLUSTER_NAME", ""),
                      env.get("SLURM_JOB_PARTITION", ""))


# What srun/slurmstepd say when Slurm itself fails rather than the program: the job
# ended (time limit, cancelled), the controller does not answer, a node is gone.
_INFRA = re.compile(r"Unable to create step|Job/step already completing or completed|"
                    r"Invalid job id specified|Slurm job \d+ has expired|Expired or invalid job|Socket timed out|Communication connection "
                    r"failure|Unable to confirm allocation|Zero Bytes were transmitted or "
                    r"received|DUE TO TIME LIMIT|DUE TO NODE FAILURE|Kill task failed")


_SLURM_LINE = re.compile(r"^\s*(srun|slurmstepd(-[\w.-]+)?):")
# slurmstepd could not start the task's program: a task with no PATH (srun --export=NONE)
# or a program not on that node
_EXECVE = re.compile(r"^\s*slurmstepd(?:-([\w.-]+))?: error: execve\(\): (.+?): "
                     r"No such file or directory")
# The start of what the slurm backend's step wrapper says in a task that got none of
# srun's environment (backends/slurm.py: STEP_WRAPPER)
NO_ENVIRONMENT = "colltune-step: srun gave the task no environment"


def slurm_failure(log: str) -> str | None:
    """The line of an srun log in which srun or slurmstepd (not the program, whose own
    errors are the algorithm's) says Slurm itself failed, or in which the step wrapper
    says the task got no environment (with why, where the line alone does not), or None."""
    for line in log.splitlines():
        if NO_ENVIRONMENT in line:            # after srun --label's "0: " too
            return line[line.index(NO_ENVIRONMENT):].strip()
        m = _EXECVE.match(line)
        if m:
            node = f"node {m.group(1)}" if m.group(1) else "the node"
            return (f"{line.strip()}: the task could not start {m.group(2)}: srun gave it no "
                    f"environment (no PATH: srun --export=NONE, or SLURM_EXPORT_ENV=NONE as in "
                    f"an `sbatch --export=NONE` job, without --export=ALL), or {m.group(2)} "
                    f"is not on a file system {node} sees")
        if _SLURM_LINE.match(line) and _INFRA.search(line):
            return line.strip()
    return None


def pending_reason(job: str) -> str | None:
    """Why a pending job waits (squeue's reason, e.g. PartitionNodeLimit), None when it
    is not pending or squeue cannot tell."""
    try:
        out = run_tool(["squeue", "-h", "-j", job, "-o", "%T %r"], f"state of job {job}")
    except BackendError:
        return None
    state, _, reason = out.strip().partition(" ")
    return reason.strip() or None if state == "PENDING" else None


def check_fits(alloc: "Allocation", nodes: int, ppn: int, what: str) -> None:
    """A step of nodes x ppn ranks fits the allocation, or a ConfigError in its words
    (`what`: the layout as the user gave it)."""
    from ..errors import ConfigError
    if not 1 <= nodes <= len(alloc.nodes):
        raise ConfigError(f"{what}: the allocation (job {alloc.job_id}) has {len(alloc.nodes)} "
                          f"nodes (salloc/sbatch -N {nodes} or more)")
    if not 1 <= ppn <= min(alloc.cpus):
        raise ConfigError(f"{what}: {ppn} rank(s) per node, but the allocation's nodes have "
                          f"{min(alloc.cpus)} CPUs for this job (ask salloc/sbatch for more, "
                          f"e.g. --exclusive)")


def mpi_plugins() -> list[str]:
    """The --mpi plugin types srun offers (``srun --mpi=list``)."""
    out = run_tool(["srun", "--mpi=list"], "listing srun's MPI plugins", stderr_too=True)
    names = []
    for line in out.splitlines():
        line = line.strip()
        if line and not line.endswith(":") and " " not in line and "..." not in line:
            names.append(line.removeprefix("srun: "))
    return names


def version() -> str:
    """'22.05.8' from `srun --version` ('slurm-wlm 22.05.8')."""
    return run_tool(["srun", "--version"], "asking srun for its version").split()[-1]


def steps(job_id: str) -> dict[str, str]:
    """{step name: step id} of a job's running steps."""
    out = run_tool(["squeue", "-h", "-s", "-j", job_id, "-o", "%i|%j"],
                   f"listing the steps of job {job_id}")
    return {name: sid for sid, _, name in (ln.partition("|") for ln in out.splitlines()) if sid}


def cancel_step(job_id: str, name: str, wait_s: float = 30.0) -> str | None:
    """scancel the job's step called name and wait until it is gone, so its
    nodes are free for the next step; returns the step id (None if not running)."""
    sid = steps(job_id).get(name)
    if sid is None:
        return None
    subprocess.run([tool("scancel"), "--quiet", sid], capture_output=True, timeout=TOOL_TIMEOUT)
    deadline = time.monotonic() + wait_s
    while name in steps(job_id):
        if time.monotonic() > deadline:
            raise BackendError(f"step {sid} is still listed {wait_s:.0f} s after scancel "
                               f"(its nodes may not be free yet)")
        time.sleep(0.2)
    return sid
