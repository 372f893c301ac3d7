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
        """--layout NODESxPPN, or every node of the allocation with -n N / nodes ranks each
        (else the allocation's SLURM_NTASKS spread over its nodes, else
        SLURM_NTASKS_PER_NODE, else 1); checked against the allocation's nodes and CPUs."""
        from .. import slurm
        from ..errors import ConfigError
        alloc, args = self._allocation(), self.args
        if args.layout:
            nodes, ppn, _ = layout(args, 10**6, 10**6)
            what = f"--layout {args.layout}"
        else:
            nodes = len(alloc.nodes)
            tasks = os.environ.get("SLURM_NTASKS", "")
            per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "")
            if args.np:
                total, what = args.np, f"-n {args.np}"
            elif tasks.isdigit() and int(tasks) % nodes == 0:     # salloc -N2 -n4
                total, what = int(tasks), f"the allocation's {tasks} tasks"
            else:
                total = nodes * (int(per_node) if per_node.isdigit() else 1)
                what = f"{total} ranks"
            if total % nodes:
                raise ConfigError(f"-n {args.np}: the allocation (job {alloc.job_id}) has "
                                  f"{nodes} nodes; -n must be a multiple of it, or say "
                                  f"--layout NODESxPPN")
            ppn = total // nodes
        slurm.check_fits(alloc, nodes, ppn, what)
        return nodes, ppn

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
        nodes, ppn = self.world_layout()
        plugin = srun_plugin(impl, settings.values["slurm_mpi"])
        app = program[0]
        if app.endswith(".c"):
            app = str(compile_app(impl, app, settings.cache_dir, []))
        else:
            check_linked_mpi(impl, app)
        # the interposer aborts if MPI_COMM_WORLD is not this size (a plugin that starts
        # singletons: the job ran N times over and exited 0)
        ranks_env = {**preload, **env, "COLLTUNE_WORLD": str(nodes * ppn)}
        if "COLLTUNE_PROFILE" in env and impl.name == "openmpi" and not args.no_monitoring:
            ranks_env["OMPI_MCA_pml_monitoring_enable"] = "1"      # = mpiexec's OMPI_MONITORING
        cmd = srun_command(self.step_name, nodes, ppn, plugin, ranks_env,
                           [app, *program[1:]], extra=srun_extra(settings))
        return cmd, impl.run_env(library_choices=False), nodes * ppn      # the ranks get env through `env`

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
