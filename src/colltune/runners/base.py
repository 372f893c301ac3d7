"""The runner interface of `colltune run` and what runners share (layouts, building
a C source, checking a rules file)."""
from __future__ import annotations

import hashlib
import math
import os
import shlex
import subprocess
from pathlib import Path

# Open MPI's pml monitoring with collective messages in its MPI_T counters (2 filters
# them out; `--mca pml ob1,monitoring` alone does not load the component)
OMPI_MONITORING = ["--mca", "pml_monitoring_enable", "1"]


class Runner:
    """One backend of `colltune run`, made once per run with its arguments and settings.

    ``command`` gives the launch (argv, environment, ranks); ``run`` then starts it with
    colltune's signal forwarding and timeout and calls ``finish`` afterwards."""
    name = ""

    def __init__(self, args, settings):
        self.args, self.settings = args, settings

    def library(self) -> str:
        """The MPI library the ranks run (a deployment must have been made for it)."""
        return self.settings.mpi

    def world_layout(self) -> tuple[int, int]:
        """(nodes, ppn) of the job's world communicator (online priors, --tune-first)."""
        raise NotImplementedError

    def command(self, env: dict, program: list[str], scratch: str) -> tuple[list[str], dict, int]:
        """(argv, its environment, ranks); with --link-flags an argv that prints how to
        build an application for this backend. env: colltune's variables for the ranks;
        scratch: a temporary folder removed after the job."""
        raise NotImplementedError

    def finish(self, clean: bool) -> None:
        """After the job; clean is False after a timeout, a signal or a failed launcher
        (leftovers of the job to remove)."""

    def default_label(self) -> str:
        """What --compare's first run ran as the library default."""
        return "the library untouched"

    def machine(self) -> dict | None:
        """What `profile report` draws this run's traffic on ({"backend", "platform", ...},
        kept with the profile), None where the backend knows no machine."""
        return None

    def online_env(self, state_dir: str) -> dict[str, str]:
        """Online mode's variables for this backend beyond COLLTUNE_ONLINE (checks that the
        state dir suits the run)."""
        return {}

    def exit_status(self, rc: int) -> int:
        """The job's exit status from the launcher's (a launcher that hides an
        MPI_Abort overrides it)."""
        return rc


def layout(args, cores: int, max_nodes: int) -> tuple[int, int, int]:
    """(nodes, ppn, ranks) of --layout NODESxPPN or -n N (N ranks, `cores` a node)."""
    from ..errors import ConfigError
    if args.layout:
        try:
            n, p = (int(x) for x in args.layout.lower().split("x"))
        except ValueError:
            raise ConfigError(f"bad --layout {args.layout!r}: expected NODESxPPN, e.g. 4x8") from None
        if args.np and args.np != n * p:
            raise ConfigError(f"-n {args.np} contradicts --layout {args.layout} ({n * p} ranks)")
        return n, p, n * p
    if not args.np or args.np < 1:
        raise ConfigError("say how many ranks: -n N or --layout NODESxPPN")
    ppn = min(args.np, cores)
    nodes = math.ceil(args.np / ppn)
    if nodes > max_nodes:
        raise ConfigError(f"-n {args.np} needs {nodes} nodes of {cores} cores; the platform has {max_nodes}")
    return nodes, ppn, args.np


def compile_app(impl, source: str, cache_dir: str, extra: list[str]) -> Path:
    """Build a C source with impl's compiler (+ extra link arguments), cached."""
    from ..errors import BuildError
    src = Path(source).resolve()
    h = hashlib.sha256(src.read_bytes() + "\0".join(extra).encode())
    for arg in extra:       # a linked file's content, not only its path: a deployment's
        if os.path.isfile(arg):   # lib/libcolltune.a is rewritten in place by a new deploy
            h.update(Path(arg).read_bytes())
    key = h.hexdigest()[:12]
    out = Path(cache_dir).resolve() / f"run-{impl.name}-{impl.identity()}" / f"{src.stem}-{key}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        cmd = [impl.cc, "-O2", str(src), "-o", str(tmp), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=impl.run_env())
        if proc.returncode != 0:
            raise BuildError(f"compiling {source} failed:\n$ {shlex.join(cmd)}\n{proc.stderr[-3000:]}")
        os.replace(tmp, out)
    return out


def check_choices(impl, settings, args) -> None:
    """--rules and --force against the catalogue of libcolltune built for impl, before
    the launch: the interposer would only warn and send every collective to the library."""
    from ..errors import ConfigError
    from ..exporters.colltune_rules import HEADER, VERSION, RulesError, catalogue_index, parse_rules, read_rules
    from ..providers.colltune import catalogue
    if not (args.rules or args.force):
        return
    cat = catalogue_index(catalogue(impl, settings.cache_dir))
    if args.rules:
        read_rules(args.rules, cat)
    # --force COLL:ALG[:k=v,...][;...] (ct_force_parse): each item read as the rule
    # "COLL -> ALG k=v ..." would be
    given: dict[str, int] = {}
    for n, item in enumerate((s.strip() for s in (args.force or "").split(";")), 1):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            raise ConfigError(f"--force {args.force!r}: item {n} {item!r}: expected COLL:ALG[:k=v,...]")
        if parts[0] in given:     # the interposer refuses it (the first had won, silently)
            raise ConfigError(f"--force {args.force!r}: item {n} {item!r}: {parts[0]} given twice "
                              f"(item {given[parts[0]]} too): one algorithm per collective")
        given[parts[0]] = n
        params = parts[2].replace(",", " ") if len(parts) == 3 else ""
        try:
            parse_rules(f"{HEADER} {VERSION}\n{parts[0]} -> {parts[1]} {params}\n", "--force", cat)
        except RulesError as exc:
            raise ConfigError(f"--force {args.force!r}: item {n} {item!r}: "
                              f"{str(exc).split(': ', 1)[-1]}") from None


def find_mpi(settings):
    """The real MPI library of the setting mpi (BackendError when absent)."""
    from .. import mpi
    from ..errors import BackendError
    try:
        return mpi.find(settings.mpi)
    except mpi.MPINotFound as exc:
        raise BackendError(str(exc)) from None


def interposer(args, impl, cache_dir: str):
    """The libcolltune a run uses: the deployment's own copy under `run --deployment`
    (what was deployed and verified), else this colltune's build for impl."""
    from ..providers.colltune import libcolltune
    own = getattr(args, "deployment_interposer", None)
    return Path(own) if own else libcolltune(impl, cache_dir)


# the libmpi SONAME a program built with each family needs (MPICH's ABI: also Intel MPI)
LIBMPI_SONAME = {"openmpi": "libmpi.so.40", "mpich": "libmpi.so.12"}


def check_linked_mpi(impl, app: str) -> None:
    """A prebuilt program linked with the other MPI family than the run's crashes in
    MPI_Init (the interposer and the launcher are the run's): refuse it up front.
    Unknown (no ldd, a static build): let it run."""
    from ..errors import ConfigError
    want = LIBMPI_SONAME.get(impl.name)
    if not want:
        return
    try:
        out = subprocess.run(["ldd", app], capture_output=True, text=True, timeout=30,
                             env=impl.run_env()).stdout
    except (OSError, subprocess.SubprocessError):
        return
    libs = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
    if any(n.startswith("libsimgrid.so") for n in libs):      # smpicc's
        raise ConfigError(f"{app} was built with smpicc (it links libsimgrid): it runs only "
                          f"under SimGrid (--backend sim); for {impl.name} build it with {impl.cc}")
    needs = [n for n in libs if n.startswith("libmpi.so.")]
    other = [n for n in needs if n in LIBMPI_SONAME.values() and n != want]
    if other and want not in needs:
        family = next(k for k, v in LIBMPI_SONAME.items() if v == other[0])
        raise ConfigError(f"{app} is linked with {other[0]} ({family}'s), but this run uses "
                          f"{impl.name} {impl.version}: build it with {impl.cc} (or run it with "
                          f"--mpi {family})")
