"""`colltune run` on the local backend: the real library's mpiexec on this host,
libcolltune.so preloaded into the ranks (a C source is compiled with its mpicc)."""
from __future__ import annotations

import shlex

from . import RUNNERS
from .base import OMPI_MONITORING, Runner, check_choices, check_linked_mpi, compile_app, find_mpi, layout


@RUNNERS.register("local")
class LocalRunner(Runner):
    name = "local"
    hosts = 1                 # how many hosts mpiexec may place ranks on

    def world_layout(self) -> tuple[int, int]:
        return 1, layout(self.args, 10**6, 1)[2]

    def command(self, env, program, scratch):
        from ..backends.local import oversubscribe_args
        from ..errors import ConfigError
        from ..providers.colltune import preload_args
        from .base import interposer
        args, settings = self.args, self.settings
        impl = find_mpi(settings)
        lib = interposer(args, impl, settings.cache_dir)
        if args.link_flags:
            return ["echo", f"{impl.cc} app.c -o app; mpiexec {shlex.join(preload_args(impl, lib))} "
                            f"-n N ./app   (or link: {impl.cc} app.c -o app {lib})"], \
                impl.run_env(), 0
        check_choices(impl, settings, args)
        if self.hosts == 1 and args.layout and not args.layout.lower().startswith("1x"):
            raise ConfigError(f"the local backend runs on this one host: --layout {args.layout}")
        _, _, ranks = layout(args, 10**6, self.hosts)
        app = program[0]
        if app.endswith(".c"):
            app = str(compile_app(impl, app, settings.cache_dir, []))
        else:
            check_linked_mpi(impl, app)
        cmd = [impl.launcher, *preload_args(impl, lib), "-n", str(ranks),
               *oversubscribe_args(impl, ranks)]
        if "COLLTUNE_PROFILE" in env and impl.library.pml_monitoring and not args.no_monitoring:
            cmd += OMPI_MONITORING
        return cmd + [app, *program[1:]], {**impl.run_env(library_choices=False), **env}, ranks
