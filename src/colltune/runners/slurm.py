"""`colltune run` on the slurm backend: the application as one srun step inside the
current allocation (salloc / sbatch), libcolltune.so preloaded into the ranks
through the step's environment (``env LD_PRELOAD=... COLLTUNE_...=... app``, so srun
itself is not preloaded); a C source is compiled with the library's mpicc. The
srun line is the slurm backend's (backends/slurm.py: srun_command, srun_plugin)."""
from __future__ import annotations

import os
import shlex
import sys
import uuid

from . import RUNNERS
from .base import Runner, check_choices, check_linked_mpi, compile_app, find_mpi, layout


@RUNNERS.register("slurm")
class SlurmRunner(Runner):
    name = "slurm"

    def __init__(self, args, settings):
        super().__init__(args, settings)
        self.alloc = None
        self.step_name = f"colltune-run-{uuid.uuid4().hex[:10]}"

    def _allocation(self):
        from .. import slurm
        from ..errors import BackendError
        if self.alloc is None:
            slurm.tool("srun")
            if not os.environ.get("SLURM_JOB_ID"):
                raise BackendError(
                    "not inside a Slurm allocation (SLURM_JOB_ID is not set): colltune run "
                    "--backend slurm starts the application as a step of the current job; "
                    "run it under salloc (`salloc -N 2 colltune run --backend slurm ...`) or "
                    "in a batch script (sbatch), or use --backend local (docs/slurm.md)")
            self.alloc = slurm.allocation()
        return self.alloc

    def world_layout(self) -> tuple[int, int]:
        """(nodes, ppn) of the job's world (ppn: the most ranks on a node, as the
        interposer counts them)."""
        return self.world()[:2]

    def world(self) -> tuple[int, int, int]:
        """(nodes, ppn, ranks): --layout NODESxPPN, or every node of the allocation with
        -n N ranks, else the allocation's SLURM_NTASKS, else SLURM_NTASKS_PER_NODE per
        node, else 1 per node; checked against the allocation's nodes and CPUs. Ranks that
        the nodes do not divide (salloc -N2 -n3) all run, placed by Slurm: ppn is then the
        largest node's under srun's block placement, ceil(ranks / nodes)."""
        from .. import slurm
        from ..errors import ConfigError
        alloc, args = self._allocation(), self.args
        if args.layout:
            nodes, ppn, _ = layout(args, 10**6, 10**6)
            slurm.check_fits(alloc, nodes, ppn, f"--layout {args.layout}")
            return nodes, ppn, nodes * ppn
        nodes = len(alloc.nodes)
        tasks = os.environ.get("SLURM_NTASKS", "")
        per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "")
        if args.np:
            total, what = args.np, f"-n {args.np}"
        elif tasks.isdigit():                                   # salloc -N2 -n4, -N2 -n3
            total, what = int(tasks), f"the allocation's {tasks} tasks"
        else:
            total = nodes * (int(per_node) if per_node.isdigit() else 1)
            what = f"{total} ranks"
        if total < 1:
            raise ConfigError(f"{what}: at least 1 rank")
        nodes = min(nodes, total)         # srun refuses a node without a task
        if total % nodes == 0:
            slurm.check_fits(alloc, nodes, total // nodes, what)
            return nodes, total // nodes, total
        # here nodes are all the allocation's; a --ntasks-per-node of total // nodes had
        # silently dropped the remainder's ranks (a review)
        cpus = sum(alloc.cpus)
        if total > cpus:
            raise ConfigError(f"{what}: {total} ranks, but the allocation (job {alloc.job_id}) "
                              f"has {cpus} CPUs on its {nodes} nodes (ask salloc/sbatch for "
                              f"more, e.g. --exclusive, or say --layout NODESxPPN)")
        return nodes, -(-total // nodes), total

    def command(self, env, program, scratch):
        from .. import slurm
        from ..backends.slurm import rank_env, srun_command, srun_extra, srun_plugin
        from ..errors import BackendError
        from ..providers.colltune import preload_args
        from .base import interposer
        args, settings = self.args, self.settings
        impl = find_mpi(settings)
        if impl.name not in slurm.PMI_PLUGIN:
            raise BackendError(f"the slurm backend runs {' or '.join(slurm.PMI_PLUGIN)}, "
                               f"not {impl.name!r} (setting mpi)")
        lib = interposer(args, impl, settings.cache_dir)
        preload = rank_env(preload_args(impl, lib))
        if args.link_flags:
            plugin = settings.values.get("slurm_mpi") or "auto"
            plugin = slurm.PMI_PLUGIN[impl.name] if plugin == "auto" else plugin
            return ["echo", f"{impl.cc} app.c -o app; srun --mpi={plugin} ... env "
                            f"{shlex.join(f'{k}={v}' for k, v in preload.items())} ./app   "
                            f"(or link: {impl.cc} app.c -o app {lib})"], impl.run_env(), 0
        check_choices(impl, settings, args)
        nodes, ppn, ranks = self.world()
        plugin = srun_plugin(impl, settings.values["slurm_mpi"])
        app = program[0]
        if app.endswith(".c"):
            app = str(compile_app(impl, app, settings.cache_dir, []))
        else:
            check_linked_mpi(impl, app)
        # the interposer aborts if MPI_COMM_WORLD is not this size (a plugin that starts
        # singletons: the job ran N times over and exited 0)
        ranks_env = {**preload, **env, "COLLTUNE_WORLD": str(ranks)}
        if "COLLTUNE_PROFILE" in env and impl.library.pml_monitoring and not args.no_monitoring:
            ranks_env["OMPI_MCA_pml_monitoring_enable"] = "1"      # = mpiexec's OMPI_MONITORING
        cmd = srun_command(self.step_name, nodes, ppn, plugin, ranks_env,
                           [app, *program[1:]], extra=srun_extra(settings),
                           ntasks=None if ranks == nodes * ppn else ranks)
        return cmd, impl.run_env(library_choices=False), ranks      # the ranks get env through `env`

    def finish(self, clean: bool) -> None:
        """After an unclean end (timeout, signal, srun failed) cancel the step if Slurm
        still has it, so the allocation's nodes are free for the next one."""
        from .. import slurm
        from ..errors import BackendError
        if clean or self.alloc is None:
            return
        try:
            sid = slurm.cancel_step(self.alloc.job_id, self.step_name)
        except BackendError as exc:
            print(f"colltune run: warning: cannot cancel step {self.step_name}: {exc}",
                  file=sys.stderr)
            return
        if sid:
            print(f"colltune run: cancelled step {sid}", file=sys.stderr)
