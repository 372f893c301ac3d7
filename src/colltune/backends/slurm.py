"""Real Open MPI or MPICH as ``srun`` steps inside a Slurm allocation.

colltune runs inside an allocation (salloc, or a batch script from
``colltune slurm script``). Every launch is one job step on whole nodes of the
allocation, chosen from a pool so that concurrent launches (``--jobs``) run on
disjoint node sets:

    srun --job-name=colltune-<id> --nodes=N --ntasks=N*PPN --ntasks-per-node=PPN
         --nodelist=<nodes> --exclusive --kill-on-bad-exit=1 --mpi=<plugin>
         --export=ALL ... /bin/sh -c '<no HOME: fail>; exec "$@" --label ...'
         colltune-step env K=V ... colltune-bench <args>

srun starts the ranks itself and the library bootstraps through Slurm's PMI
plugin (``slurm_mpi``; ``auto`` = pmix for Open MPI 5, pmi2 for MPICH): no
mpiexec. The forcing variables of the algorithm provider go into the ranks'
environment (``env K=V``; MPICH's ``-genv LD_PRELOAD shim`` too, so srun itself
is not preloaded); the library's own (OPAL_PREFIX, PATH) is srun's, exported to the
tasks with --export=ALL whatever SLURM_EXPORT_ENV says (`sbatch --export=NONE` jobs set
it to NONE). The bench writes its JSON records on rank 0's stdout, which
srun forwards to this host: no shared folder is needed for results. Every point
is labelled with the nodes Slurm really gave the step (``slurm_nodes``) and the
step id (``slurm_step``). A launch that hangs is cancelled with scancel, and its
nodes go back to the pool only once the step is gone.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any

from .. import native, slurm
from ..errors import BackendError, ConfigError
from . import BACKENDS
from .base import (Backend, Launch, LaunchResult, choose_provider, end_launch, read_records,
                   start_launch)
from .local import LIBRARY, make_provider

# Runs in every task: adds the node list and step id that Slurm gave the step. A task
# without HOME got none of srun's environment (an --export=NONE in slurm_srun_args or a
# site's srun defaults beats ours): it stops with words slurm.slurm_failure knows, as
# Slurm's failure, not the algorithm's (Open MPI had died in MPI_Init, stored as a crash;
# MPICH ran without the user's variables). HOME, not a variable of colltune's own: the
# recorded command replays from any login shell.
STEP_WRAPPER = ('[ -n "${HOME-}" ] || { echo "' + slurm.NO_ENVIRONMENT + ' (no HOME in task '
                '$SLURM_PROCID on $SLURMD_NODENAME): an --export=NONE or an --export list '
                'without ALL, in slurm_srun_args or the site srun defaults, overrides the '
                '--export=ALL of colltune; the ranks need the environment of srun" >&2; '
                'exit 127; }; '
                'exec "$@" --label slurm_nodes="$SLURM_STEP_NODELIST" '
                '--label slurm_step="$SLURM_JOB_ID.$SLURM_STEP_ID"')
# mpiexec options that only set a rank's environment (all a provider uses).
_ENV_OPTIONS = ("-genv", "-env")


def rank_env(launcher_args: list[str]) -> dict[str, str]:
    """Provider launcher options (mpiexec syntax: -genv/-env NAME VALUE, Open MPI's
    -x NAME=VALUE) as rank environment for srun."""
    env, args = {}, list(launcher_args)
    while args:
        if args[0] in _ENV_OPTIONS and len(args) >= 3:
            env[args[1]] = args[2]
            args = args[3:]
        elif args[0] == "-x" and len(args) >= 2 and "=" in args[1]:
            name, _, value = args[1].partition("=")
            env[name] = value
            args = args[2:]
        else:
            raise BackendError(f"the slurm backend cannot pass mpiexec options {args} to srun "
                               f"(only {'/'.join(_ENV_OPTIONS)} NAME VALUE, -x NAME=VALUE)")
    return env


def srun_extra(settings) -> list[str]:
    """The setting slurm_srun_args as words (ConfigError naming it when it does not parse)."""
    try:
        return shlex.split(settings.values["slurm_srun_args"])
    except ValueError as exc:
        raise ConfigError(f"setting slurm_srun_args from "
                          f"{settings.source_of('slurm_srun_args')}: {exc}") from None


def srun_plugin(impl, setting: str) -> str:
    """The srun --mpi plugin that bootstraps impl (setting slurm_mpi; auto: PMI_PLUGIN),
    checked against the plugins srun offers."""
    plugin = slurm.PMI_PLUGIN[impl.name] if setting == "auto" else setting
    offered = slurm.mpi_plugins()
    if plugin not in offered:
        raise BackendError(
            f"srun offers MPI plugins {', '.join(offered) or '(none)'}, not "
            f"{plugin!r} needed for {LIBRARY[impl.name]} (setting slurm_mpi="
            f"{setting}); Debian's slurm loads pmix only with libpmix-dev installed")
    return plugin


def srun_command(step_name: str, nodes: int, ppn: int, plugin: str, env: dict[str, str],
                 argv: list[str], nodelist: list[str] | None = None, extra: list[str] = (),
                 wrapper: list[str] = (), ntasks: int | None = None) -> list[str]:
    """One srun step of nodes x ppn tasks running ``[*wrapper] env K=V ... argv``: the
    ranks' environment set by env(1) in the tasks, not in srun itself. ntasks: a total
    that nodes do not divide, placed by Slurm (no --ntasks-per-node; ppn unused)."""
    tasks = ([f"--ntasks={nodes * ppn}", f"--ntasks-per-node={ppn}"] if ntasks is None
             else [f"--ntasks={ntasks}"])
    # --export=ALL: an `sbatch --export=NONE` job leaves SLURM_EXPORT_ENV=NONE to srun,
    # whose tasks then get no environment. On the line, not as SLURM_EXPORT_ENV=ALL in
    # srun's environment: the recorded line then replays as run. Before extra, so that
    # slurm_srun_args can say --export=ALL,VAR=value.
    return [slurm.tool("srun"), f"--job-name={step_name}", f"--nodes={nodes}", *tasks,
            *([f"--nodelist={','.join(nodelist)}"] if nodelist else []),
            "--exclusive", "--kill-on-bad-exit=1", f"--mpi={plugin}", "--export=ALL",
            f"--chdir={os.getcwd()}", *extra, *wrapper,
            "env", *(f"{k}={v}" for k, v in env.items()), *argv]


class NodePool:
    """Whole nodes of the allocation, lent to one step at a time."""

    def __init__(self, nodes: tuple[str, ...]):
        self.nodes = nodes
        self._free = set(nodes)
        self._cv = threading.Condition()

    @contextmanager
    def take(self, count: int):
        with self._cv:
            self._cv.wait_for(lambda: len(self._free) >= count)
            got = [n for n in self.nodes if n in self._free][:count]
            self._free.difference_update(got)
        try:
            yield got
        finally:
            with self._cv:
                self._free.update(got)
                self._cv.notify_all()


@BACKENDS.register("slurm")
class SlurmBackend(Backend):
    name = "slurm"
    description = ("real Open MPI or MPICH (--mpi) as srun steps inside a Slurm allocation; "
                   "concurrent launches on disjoint nodes")

    def __init__(self, settings, platform: str | None = None):
        self.settings = settings
        self.mpi_name = settings.values["mpi"]
        self.alloc = self.impl = self.bench = self.pool = self._provider = None
        self.plugin = self.slurm_version = None
        self.srun_extra = srun_extra(settings)

    def prepare(self) -> None:
        from .. import mpi
        if self.mpi_name not in LIBRARY:
            raise BackendError(f"the slurm backend runs {' or '.join(LIBRARY)}, "
                               f"not {self.mpi_name!r} (setting mpi)")
        slurm.tool("srun")
        self.alloc = slurm.allocation()
        try:
            self.impl = mpi.find(self.mpi_name)
        except mpi.MPINotFound as exc:
            raise BackendError(str(exc)) from None
        self.plugin = srun_plugin(self.impl, self.settings.values["slurm_mpi"])
        self.slurm_version = slurm.version()
        self.bench = native.build(self.impl, "bench", self.settings.cache_dir)
        self.pool = NodePool(self.alloc.nodes)

    def provider(self):
        if self._provider is None:
            # the setting provider (colltune, both) is refused here by name, not ignored
            self._provider = choose_provider(self, make_provider(self.impl, self.settings))
        return self._provider

    def max_nodes(self) -> int:
        return len(self.alloc.nodes)

    def check_layout(self, launch: Launch) -> None:
        """The layout against the allocation, in its words (job, nodes, CPUs per node)."""
        slurm.check_fits(self.alloc, launch.nodes, launch.ppn, f"layout {launch.nodes}x{launch.ppn}")

    def max_ppn(self) -> int:
        return min(self.alloc.cpus)

    def provenance(self) -> dict[str, Any]:
        # No job id or node names: results stay reusable across allocations of the
        # same cluster; each point's labels say where it ran.
        return {
            "backend": self.name,
            "platform": self.alloc.cluster or "slurm",
            "partition": self.alloc.partition,
            "mpi_library": LIBRARY[self.impl.name],
            "mpi_version": self.impl.version,
            "mpi_flavour": self.impl.flavour,
            "mpi_cc": self.impl.cc,
            "slurm_version": self.slurm_version,
            "srun_mpi": self.plugin,
            "note": "one srun step per launch on whole nodes; labels slurm_nodes/slurm_step "
                    "say where each point ran",
        }

    def command(self, launch: Launch, nodes: list[str], step_name: str) -> list[str]:
        env = {**launch.mods.env, **rank_env(launch.mods.launcher_args)}
        return srun_command(step_name, launch.nodes, launch.ppn, self.plugin, env,
                            [str(self.bench), *launch.bench_args, *self.late_tolerance_args()],
                            nodelist=nodes, extra=self.srun_extra,
                            wrapper=["/bin/sh", "-c", STEP_WRAPPER, "colltune-step"])

    def late_tolerance_args(self) -> list[str]:
        """The setting late_tolerance_us (0: the clock's own); the records carry it."""
        tol = self.settings.values.get("late_tolerance_us") or 0.0
        return ["--late-tolerance-us", f"{tol:g}"] if tol > 0 else []

    def run(self, launch: Launch, workdir: str) -> LaunchResult:
        self.check_layout(launch)
        os.makedirs(workdir, exist_ok=True)
        step_name = f"colltune-{uuid.uuid4().hex[:10]}"
        with self.pool.take(launch.nodes) as nodes:
            result = self._srun(self.command(launch, nodes, step_name), launch, workdir,
                                step_name)
        label = getattr(launch.mods, "label", None)
        if callable(label):
            for rec in result.records:
                rec["labels"] = {**(rec.get("labels") or {}), **label(rec)}
        return result

    def _srun(self, cmd: list[str], launch: Launch, workdir: str, step_name: str) -> LaunchResult:
        """srun with rank 0's stdout (the JSON records) and srun's stderr in separate
        files; on a timeout the step is cancelled before its nodes are given back."""
        json_path = os.path.join(workdir, "records.jsonl")
        log_path = os.path.join(workdir, "launch.log")
        start = time.monotonic()
        with open(json_path, "w") as out, open(log_path, "w") as log:
            # registered: a stopped campaign kills srun, and the step is cancelled below
            proc = start_launch(cmd, stdout=out, stderr=log, stdin=subprocess.DEVNULL,
                                env=self.impl.run_env(), cwd=workdir)
            timed_out = False
            try:
                proc.wait(timeout=launch.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._cancel(step_name, log)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            finally:
                end_launch(proc)
            if not timed_out and proc.returncode != 0:
                self._cancel(step_name, log)     # srun died: never leave its step behind
        with open(log_path, errors="replace") as fh:
            tail = fh.read()[-4000:]
        infra = slurm.slurm_failure(tail)
        if infra and not timed_out:
            # Slurm itself failed (the allocation ended, the controller or a node is gone):
            # not the algorithm's doing, so nothing of this launch is stored and the
            # campaign stops; a re-run in a live allocation resumes it
            raise BackendError(f"Slurm could not run step {step_name} of job "
                               f"{self.alloc.job_id}: {infra}; the campaign stops here, this "
                               f"launch is not stored (re-run in a live allocation to resume)")
        header, records, done = read_records(json_path)
        nprocs = launch.nodes * launch.ppn
        if header and header.get("world_size") != nprocs:
            # Wrong --mpi plugin: every task is a singleton MPI_COMM_WORLD of size 1.
            tail += (f"\ncolltune: srun started {nprocs} tasks but MPI saw a world of "
                     f"{header.get('world_size')}: the srun --mpi={self.plugin} plugin does not "
                     f"bootstrap {LIBRARY[self.impl.name]} (setting slurm_mpi)")
            records, done = [], False
        # One shell-quoted word: the run's recorded command replays by copy and paste.
        return LaunchResult([shlex.join(cmd)], None if timed_out else proc.returncode, timed_out,
                            time.monotonic() - start, header, records, done, tail)

    def _cancel(self, step_name: str, log) -> None:
        try:
            sid = slurm.cancel_step(self.alloc.job_id, step_name)
        except BackendError as exc:
            sid, why = None, f" ({exc})"
        else:
            why = ""
        if why:         # it was not cancelled: say so, not "cancelled"
            log.write(f"\ncolltune: could not cancel step {step_name}{why}\n")
        elif sid:
            log.write(f"\ncolltune: cancelled step {sid}\n")
        log.flush()
