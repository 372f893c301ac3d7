"""`colltune run` on the sim backend: smpirun on a SimGrid platform, the application
linked with libcolltune.a (a C source is compiled with smpicc)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys

from . import RUNNERS
from .base import Runner, check_choices, compile_app, layout


@RUNNERS.register("sim")
class SimRunner(Runner):
    name = "sim"

    def library(self) -> str:
        return "smpi"

    def default_label(self) -> str:
        # a speed-up over SMPI's naive `default` selector says little about a real library
        sel = run_selector(self.args, self.settings)
        if sel:
            return f"SMPI's {sel} selector"
        return ("SMPI's built-in default selector, naive: --default-selector ompi or mpich "
                "compares with Open MPI's or MPICH's decisions")

    def machine(self) -> dict | None:
        """The platform: a bundled name, or the XML's absolute path."""
        plat = self.settings.platform
        return {"backend": self.name, "platform": os.path.abspath(plat) if plat.endswith(".xml") else plat}

    def online_env(self, state_dir: str) -> dict[str, str]:
        from ..online.job import platform_id, same_selector
        same_selector(state_dir, self.args, self.settings)
        return {"COLLTUNE_PLATFORM": platform_id(self.settings.platform)}

    def _platform(self):
        from .. import platforms
        from ..errors import BackendError
        try:
            return platforms.load(self.settings.platform)
        except platforms.PlatformError as exc:
            raise BackendError(str(exc)) from None

    def world_layout(self) -> tuple[int, int]:
        plat = self._platform()
        return layout(self.args, plat.cores_per_node, plat.nodes)[:2]

    def command(self, env, program, scratch):
        from .. import mpi, platforms
        from ..backends.sim import QUIET_LOGS
        from ..errors import ConfigError
        from ..providers.colltune import link_args
        from .base import interposer
        args, settings = self.args, self.settings
        impl = mpi.find("smpi")
        lib = interposer(args, impl, settings.cache_dir)
        if args.link_flags:
            return ["echo", f"{impl.cc} app.c -o app {shlex.join(link_args(lib))}"], \
                impl.run_env(), 0
        check_choices(impl, settings, args)
        app = program[0]
        if app.endswith(".c"):
            app = str(compile_app(impl, app, settings.cache_dir, link_args(lib)))
        elif _linked(app) is False:
            raise ConfigError(f"{app} is not linked with libcolltune; build it with:\n  "
                              f"{impl.cc} app.c -o app {shlex.join(link_args(lib))}")
        plat = self._platform()
        nodes, ppn, ranks = layout(args, plat.cores_per_node, plat.nodes)
        try:
            hostfile = plat.write_hostfile(nodes, ppn, os.path.join(scratch, "hostfile"),
                                           _placed_hosts(args.hosts, plat, nodes))
        except platforms.PlatformError as exc:     # name the option the user gave
            given = (f"--hosts {args.hosts}" if args.hosts else
                     f"--layout {args.layout}" if args.layout else f"-n {ranks}")
            raise ConfigError(f"{given}: {exc}") from None
        trace = _selector_args(args, settings, impl.launcher, app)
        if "COLLTUNE_PROFILE" in env:          # every message, collectives' internals included
            from ..profile.simtrace import smpirun_args
            trace += smpirun_args(env["COLLTUNE_PROFILE"])
        cmd = [impl.launcher, "-np", str(ranks), "-platform", plat.xml_path, "-hostfile", hostfile,
               *plat.smpirun_cfg_args(), *trace, *QUIET_LOGS, "--log=smpi_colls.thres:warning",
               "--log=smpi_coll.thres:warning", app, *program[1:]]
        self._abort = os.path.join(scratch, "abort-status")     # libcolltune's MPI_Abort writes it
        return cmd, {**plat.charge_env(), **impl.run_env(library_choices=False), **env,
                     "COLLTUNE_ABORT_STATUS": self._abort}, ranks

    def exit_status(self, rc: int) -> int:
        """smpirun exits 0 after an MPI_Abort: the program's error code, as mpirun gives."""
        try:
            with open(getattr(self, "_abort", "")) as fh:
                code = int(fh.read().strip() or 1)
        except (OSError, ValueError):
            return rc
        print(f"colltune run: the program called MPI_Abort (error code {code})", file=sys.stderr)
        return rc or code


def _placed_hosts(spec: str | None, plat, nodes: int) -> list[str] | None:
    """--hosts: None (the first NODES hosts), 'spread' (every k-th host, k = hosts // NODES,
    so a job crosses leaves / dragonfly groups), a comma list or @FILE (one host per line)."""
    from ..errors import ConfigError
    if not spec:
        return None
    if spec == "spread":
        step = max(1, len(plat.hosts) // nodes)
        return list(plat.hosts[::step][:nodes])
    if spec.startswith("@"):
        try:
            with open(spec[1:]) as fh:
                return [ln.split("#")[0].strip() for ln in fh if ln.split("#")[0].strip()]
        except OSError as exc:
            raise ConfigError(f"--hosts {spec}: cannot read it: {exc.strerror}") from None
    return [h.strip() for h in spec.split(",") if h.strip()]


def _linked(program: str) -> bool | None:
    """Does an SMPI program contain the interposer? None when nm cannot tell."""
    try:
        proc = subprocess.run(["nm", "-D", "--defined-only", program], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return "ct_rules_match" in proc.stdout if proc.returncode == 0 else None


def _selectors(args, settings) -> tuple[list[str], str]:
    """(the deployment's --cfg=smpi/coll-selector arguments, --default-selector when given
    or "") of a run on SMPI."""
    dep = (getattr(args, "deployment_launch", None) or {}).get("COLLTUNE_SMPIRUN_ARGS")
    # its selector; the platform's settings beside it are the run's own (smpirun_cfg_args)
    dep = [a for a in shlex.split(dep or "") if a.startswith("--cfg=smpi/coll-selector:")]
    given = settings.source_of("default_selector") != "default"
    return dep, (settings.values.get("default_selector") or "") if given else ""


def run_selector(args, settings) -> str:
    """The SMPI selector a run uses: --default-selector, else the deployment's, else ""
    (SMPI's built-in default)."""
    dep, sel = _selectors(args, settings)
    return sel or (dep[-1].split(":", 1)[1] if dep else "")


def _selector_args(args, settings, smpirun: str, app: str) -> list[str]:
    """smpirun arguments of the SMPI selector: the deployment's, or --default-selector
    (checked against the selectors this SMPI lists: an unknown one aborts smpirun)."""
    from ..errors import ConfigError
    from ..providers.smpi import SMPIProvider
    dep, sel = _selectors(args, settings)
    if sel:
        known = [s.name for s in SMPIProvider(smpirun, app).selectors("bcast")]
        if sel not in known:
            raise ConfigError(f"--default-selector {sel!r} is not an SMPI selector "
                              f"(known: {', '.join(known)})")
        mine = [f"--cfg=smpi/coll-selector:{sel}"]
        if dep and dep != mine:
            raise ConfigError(f"--default-selector {sel} contradicts the deployment's "
                              f"{' '.join(dep)}")
        return mine
    return dep
