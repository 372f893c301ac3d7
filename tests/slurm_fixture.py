"""A real Slurm on this machine for the tests: munged, slurmctld and two slurmd
daemons from Debian's packages, in a scratch folder, on free ports.

Two nodes on one host: Debian's slurmd is built with multiple-slurmd support,
so ``NodeName=n1,n2 NodeHostname=<this host> Port=<own port>`` and
``slurmd -N n1`` / ``slurmd -N n2`` give two real compute nodes that Slurm
schedules separately (``srun --nodelist=n2`` runs on n2's slurmd only). Both
have the machine's CPUs (2): four CPU slots over two cores, fine for
correctness, not for timings. ``FirstJobId`` is random: MPICH names its
shared-memory segments after the PMI job (``<job>.<step>`` under srun), and
segments left in /dev/shm by killed ranks of an earlier cluster that also
started at job 1 broke ``MPI_Init`` ("Message truncated"). ``TmpFS=<scratch>/tmp/%n`` gives each node its own
temporary folder: mpi/pmix makes ``<TmpFS>/spmix_appdir_<uid>_<job>.<step>``
per node, and two nodes sharing /tmp collide on it ("File exists").

The daemons run in the foreground as children of the test process and are
stopped by pid (after cancelling every job) when the session ends, failed or
not. ``python tests/slurm_fixture.py`` starts one by hand and prints how to use it.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")


def mpi_libraries():
    """pytest params for the MPI libraries the Slurm tests run, skipped where absent."""
    from colltune import mpi
    found = {impl.name for impl in mpi.discover()}
    return [pytest.param(n, marks=pytest.mark.skipif(n not in found, reason=f"{n} not installed"))
            for n in ("openmpi", "mpich")]
NODES = ("n1", "n2")
# What every job's ranks need here: MPICH's UCX, seeing both "nodes" on one host, puts a
# shared-memory address in its PMI2 business card, which Slurm's pmi2 plugin then got
# mangled at some environment sizes ("value not properly terminated in client request",
# UCX "failed to unpack address"; with `env X=1` in front, or the repo at /tmp/cc: the
# same binary failed at one path and ran at another). TCP, as the netns backend's MPICH.
RANK_ENV = {"UCX_TLS": "tcp,self"}
PARTITION = "debug"
CLUSTER = "colltune-test"

SLURM_CONF = """\
ClusterName={cluster}
FirstJobId={first_job}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
TmpFS={root}/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
KillWait=2
MinJobAge=2
InactiveLimit=0
{nodes}
PartitionName={partition} Nodes={node_list} Default=YES MaxTime=INFINITE State=UP
"""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def missing() -> str | None:
    """Why a Slurm cannot be started here, or None."""
    absent = [d for d in (*DAEMONS, "srun", "sbatch", "salloc", "scontrol", "sinfo")
              if shutil.which(d) is None]
    if absent:
        return f"not installed: {', '.join(absent)} (Debian: slurmctld slurmd slurm-client munge)"
    if os.geteuid() != 0:
        return "starting slurmd/munged needs root"
    return None


class SlurmCluster:
    """A running test cluster; ``env`` is what clients need (SLURM_CONF)."""

    def __init__(self, root: str, cpus: int | None = None):
        self.root = os.path.abspath(root)
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = os.path.join(self.root, "slurm.conf")
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": self.conf, **RANK_ENV}
        for k in [k for k in self.env if k.startswith(("SLURM_JOB", "SLURM_STEP", "SBATCH_"))]:
            del self.env[k]     # never attach to an allocation of the outer world

    # -- start / stop -------------------------------------------------------
    def start(self, wait_s: float = 60.0) -> "SlurmCluster":
        for d in ("munge", "state", "log", *(f"spool/{n}" for n in NODES),
                  *(f"tmp/{n}" for n in NODES)):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        os.chmod(os.path.join(self.root, "munge"), 0o711)
        key = os.path.join(self.root, "munge", "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400), "wb") as fh:
            fh.write(os.urandom(1024))      # our own key: independent of /etc/munge
        ctld, slurmd, *node_ports = _free_ports(2 + len(NODES))
        host = socket.gethostname()
        nodes = "\n".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} "
                          f"CPUs={self.cpus} State=UNKNOWN" for n, p in zip(NODES, node_ports))
        with open(self.conf, "w") as fh:
            fh.write(SLURM_CONF.format(cluster=CLUSTER, host=host, ctld_port=ctld,
                                       slurmd_port=slurmd, root=self.root, nodes=nodes,
                                       first_job=random.randrange(1000, 60_000_000),
                                       partition=PARTITION, node_list=",".join(NODES)))
        try:
            m = os.path.join(self.root, "munge")
            self._spawn("munged", ["munged", "-F", "--force", f"--socket={m}/munge.sock",
                                   f"--key-file={key}", f"--pid-file={m}/munged.pid",
                                   f"--log-file={m}/munged.log", f"--seed-file={m}/seed"])
            self._wait(lambda: os.path.exists(f"{m}/munge.sock"), wait_s, "munged socket")
            self._spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf])
            for n in NODES:
                self._spawn(f"slurmd-{n}", ["slurmd", "-D", "-f", self.conf, "-N", n])
            self._wait(self._all_idle, wait_s, "all nodes idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(os.path.join(self.root, "log", f"{name}.out"), "w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env,
                                            start_new_session=True)
        log.close()

    def _wait(self, ready, wait_s: float, what: str) -> None:
        deadline = time.monotonic() + wait_s
        while not ready():
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"test Slurm in {self.root}: no {what} after {wait_s:.0f} s"
                                   f" (exited: {dead or 'none'}); logs in {self.root}/log\n"
                                   + self.log_tail())
            time.sleep(0.2)

    def _all_idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout.split()
        return len(out) == 2 * len(NODES) and all(s == "idle" for s in out[1::2])

    def stop(self) -> None:
        """Cancel every job, then stop the daemons by pid (newest first)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run(["scancel", "--full", f"--partition={PARTITION}"], check=False)
            deadline = time.monotonic() + 15
            while self.run(["squeue", "-h"], check=False).stdout.strip() \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    # -- helpers --------------------------------------------------------------
    def run(self, argv: list[str], check: bool = True, timeout: float = 60,
            env: dict | None = None, **kw) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}\nstdout:\n"
                                 f"{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
        return proc

    def log_tail(self, lines: int = 15) -> str:
        out = []
        logdir = os.path.join(self.root, "log")
        for name in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
            with open(os.path.join(logdir, name), errors="replace") as fh:
                tail = fh.read().splitlines()[-lines:]
            out.append(f"--- {name}\n" + "\n".join(tail))
        return "\n".join(out)


@pytest.fixture(scope="session")
def slurm_cluster(request):
    why = missing()
    if why:
        pytest.skip(f"no Slurm here: {why}")
    # Not under pytest's basetemp: concurrent pytest runs prune old basetemps.
    root = tempfile.mkdtemp(prefix="colltune-slurm-")
    cluster = SlurmCluster(root)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        if request.session.testsfailed == 0:
            shutil.rmtree(root, ignore_errors=True)     # kept, with its logs, after a failure


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/colltune-slurm"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))    # stop the daemons on kill too
    c = SlurmCluster(root).start()
    print(f"test Slurm running (nodes {', '.join(NODES)}; logs in {root}/log).\n"
          f"  export SLURM_CONF={c.conf}\n  salloc -N2 ...\nCtrl-C stops it.")
    try:
        signal.pause()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        c.stop()
