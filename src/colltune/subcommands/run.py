"""`colltune run`: launch an application under colltune's interposer.

    colltune run [--rules F] [--force SPEC] [-n N | --layout NxP] -- ./app args
    colltune run --backend local --mpi mpich -n 2 --rules F -- app.c args

A C source is compiled first (cached by content and MPI identity): on the sim
backend with smpicc and linked with libcolltune.a, on the local backend with
the library's mpicc. A ready executable runs as is: on the local backend
libcolltune.so (built against the same MPI) is preloaded into the ranks; on
the sim backend it must already be linked with libcolltune.a (`--link-flags`
prints how). The rules file is checked against the catalogue before launch.
SIGTERM / SIGINT / SIGHUP sent to colltune are passed on to the whole job (launcher
and every rank), which is SIGKILLed if still there after a grace period, and
reaped; colltune then exits with 128 + the signal number. The SMPI hostfile goes
to a temporary folder, removed afterwards. docs/interposer.md.

`--deployment DIR` runs under what `colltune deploy` wrote (docs/deploy.md): the
manifest's environment (colltune's rules file, the library's rules file settings)
and, on SMPI, its library arm `--cfg=smpi/coll-selector:NAME`. On the sim backend
`--default-selector NAME` runs the job with that SMPI selector (without it: SMPI's
own `default`); the library default a deployment is compared with is
`--default-selector` of the deployment's selector, without `--deployment`.

`--profile DIR` counts the job's traffic (docs/profile-counting.md): it sets
COLLTUNE_PROFILE=DIR (each rank writes DIR/rank-R.json at MPI_Finalize), adds the
simulator's message trace on sim and pml monitoring on Open MPI, and lists the
ranks whose file is missing afterwards.

`--online STATE_DIR` tunes online (docs/online.md): it sets COLLTUNE_ONLINE=STATE_DIR
(and COLLTUNE_PLATFORM on sim, part of the state's fingerprint); before the job the
state gets predicted priors for the job's layout, after it `colltune online update`
re-derives the state and loads the run's samples into the results store.
"""
from __future__ import annotations

import hashlib
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..proc import Interrupted, run_group


def add_parser(sub) -> None:
    from ..cli import add_globals
    p = sub.add_parser("run", help="run an MPI application under colltune's interposer "
                                   "(rules file or forced algorithms)")
    add_globals(p)
    p.add_argument("--rules", help="colltune rules file (docs/rules.md) -> COLLTUNE_RULES")
    p.add_argument("--deployment", metavar="DIR",
                   help="run under a deployment (`colltune deploy`, docs/deploy.md): its rules "
                        "files and environment, on SMPI its selector")
    p.add_argument("--force", help="COLL:ALG[:k=v,...][;...] -> COLLTUNE_FORCE")
    p.add_argument("--verbose", action="store_true", help="rank 0 logs each new decision")
    p.add_argument("--report", help="rank 0 appends what ran (JSON lines) -> COLLTUNE_REPORT")
    p.add_argument("--profile", metavar="DIR",
                   help="count every rank's traffic per peer into DIR (docs/profile-counting.md) "
                        "-> COLLTUNE_PROFILE")
    p.add_argument("--no-monitoring", action="store_true",
                   help="with --profile on Open MPI: leave pml monitoring off (5.0.11 crashes in "
                        "MPI_Intercomm_create with it when the two groups differ in size)")
    p.add_argument("--online", metavar="STATE_DIR",
                   help="tune online: each call draws an algorithm, the state learns between runs "
                        "(docs/online.md) -> COLLTUNE_ONLINE")
    p.add_argument("-n", "-np", dest="np", type=int, help="number of ranks")
    p.add_argument("--layout", help="NODESxPPN (sim backend), e.g. 4x8")
    p.add_argument("--hosts", help="sim backend: which hosts of the platform the nodes are: "
                                   "'spread' (evenly over the platform), H1,H2,... or @FILE "
                                   "(one per line); default: the first NODES hosts")
    p.add_argument("--link-flags", action="store_true",
                   help="print how to build an application with libcolltune for this backend, and exit")
    t = p.add_argument_group("tune first (per-job tune-then-run, active learning)")
    t.add_argument("--tune-first", action="store_true",
                   help="tune colltune's algorithms for this layout first, then run with the result")
    t.add_argument("--collectives", default="bcast,allreduce", help="collectives to tune")
    t.add_argument("--budget", default="10m", help="tuning time budget: seconds, or 90s / 10m / 1h")
    t.add_argument("--sizes", default="8..1M", help="message sizes to tune (bytes per rank)")
    t.add_argument("--campaign", help="results campaign of the tuning (default: run-<time>)")
    p.add_argument("app", nargs="*", help="-- PROGRAM [ARGS...]; PROGRAM may be a C source")
    p.set_defaults(handler=run)


def _layout(args, cores: int, max_nodes: int) -> tuple[int, int, int]:
    """(nodes, ppn, ranks)."""
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


def compile_app(impl, source: str, cache_dir: str, extra: list[str]) -> Path:
    """Build a C source with impl's compiler (+ extra link arguments), cached."""
    from ..errors import BuildError
    src = Path(source).resolve()
    key = hashlib.sha256(src.read_bytes() + "\0".join(extra).encode()).hexdigest()[:12]
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


def _linked(program: str) -> bool | None:
    """Does an SMPI program contain the interposer? None when nm cannot tell."""
    try:
        proc = subprocess.run(["nm", "-D", "--defined-only", program], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return "ct_rules_match" in proc.stdout if proc.returncode == 0 else None


def _check_rules(impl, settings, path: str) -> None:
    from ..exporters.colltune_rules import catalogue_index, read_rules
    from ..providers.colltune import catalogue
    read_rules(path, catalogue_index(catalogue(impl, settings.cache_dir)))


def _sim(args, settings, env: dict, program: list[str], scratch: str) -> tuple[list[str], dict]:
    from .. import mpi, platforms
    from ..backends.sim import QUIET_LOGS
    from ..errors import BackendError, ConfigError
    from ..providers.colltune import libcolltune, link_args
    impl = mpi.find("smpi")
    lib = libcolltune(impl, settings.cache_dir)
    if args.link_flags:
        return ["echo", f"{impl.cc} app.c -o app {shlex.join(link_args(lib))}"], impl.run_env()
    if args.rules:
        _check_rules(impl, settings, args.rules)
    app = program[0]
    if app.endswith(".c"):
        app = str(compile_app(impl, app, settings.cache_dir, link_args(lib)))
    elif _linked(app) is False:
        raise ConfigError(f"{app} is not linked with libcolltune; build it with:\n  "
                          f"{impl.cc} app.c -o app {shlex.join(link_args(lib))}")
    try:
        plat = platforms.load(settings.platform)
    except platforms.PlatformError as exc:
        raise BackendError(str(exc)) from None
    nodes, ppn, ranks = _layout(args, plat.cores_per_node, plat.nodes)
    try:
        hostfile = plat.write_hostfile(nodes, ppn, os.path.join(scratch, "hostfile"),
                                       _placed_hosts(args.hosts, plat, nodes))
    except platforms.PlatformError as exc:
        raise ConfigError(f"--hosts {args.hosts}: {exc}") from None
    trace = _selector_args(args, settings)
    if "COLLTUNE_PROFILE" in env:          # every message, collectives' internals included
        from ..profile.simtrace import smpirun_args
        trace += smpirun_args(env["COLLTUNE_PROFILE"])
    cmd = [impl.launcher, "-np", str(ranks), "-platform", plat.xml_path, "-hostfile", hostfile,
           *plat.smpirun_cfg_args(), *trace, *QUIET_LOGS, "--log=smpi_colls.thres:warning",
           "--log=smpi_coll.thres:warning", app,
           *program[1:]]
    return cmd, {**impl.run_env(), **env}, ranks


def _selector_args(args, settings) -> list[str]:
    """smpirun arguments of the SMPI selector: the deployment's, or --default-selector."""
    from ..errors import ConfigError
    dep = (getattr(args, "deployment_launch", None) or {}).get("COLLTUNE_SMPIRUN_ARGS")
    dep = shlex.split(dep) if dep else []
    sel = settings.values.get("default_selector") or ""
    if sel and settings.source_of("default_selector") != "default":
        mine = [f"--cfg=smpi/coll-selector:{sel}"]
        if dep and dep != mine:
            raise ConfigError(f"--default-selector {sel} contradicts the deployment's "
                              f"{' '.join(dep)}")
        return mine
    return dep


def _deployment(args, settings) -> dict:
    """The environment of --deployment DIR (checked against the backend's library);
    its launch variables go to args.deployment_launch."""
    from .. import deploy
    from ..errors import ConfigError
    manifest, d = deploy.load(args.deployment)
    lib = manifest.get("library")
    want = "smpi" if settings.backend == "sim" else settings.mpi
    if lib != want:
        raise ConfigError(f"--deployment {args.deployment}: deployed for {lib}, but the "
                          f"{settings.backend} backend runs {want}")
    rules = (manifest.get("env") or {}).get("COLLTUNE_RULES")
    if rules and not os.path.exists(rules):
        raise ConfigError(f"--deployment {args.deployment}: its rules file {rules} is missing "
                          f"(moved folder? deploy again)")
    args.deployment_launch = manifest.get("launch") or {}
    if rules:
        args.rules = rules                      # checked against the catalogue like --rules
    return dict(manifest.get("env") or {})


def _local(args, settings, env: dict, program: list[str], scratch: str,
           hosts: int = 1) -> tuple[list[str], dict]:
    from .. import mpi
    from ..backends.local import oversubscribe_args
    from ..errors import BackendError, ConfigError
    from ..providers.colltune import libcolltune, preload_args
    try:
        impl = mpi.find(settings.mpi)
    except mpi.MPINotFound as exc:
        raise BackendError(str(exc)) from None
    lib = libcolltune(impl, settings.cache_dir)
    if args.link_flags:
        return ["echo", f"{impl.cc} app.c -o app; mpiexec {shlex.join(preload_args(impl, lib))} "
                        f"-n N ./app   (or link: {impl.cc} app.c -o app {lib})"], impl.run_env()
    if args.rules:
        _check_rules(impl, settings, args.rules)
    if hosts == 1 and args.layout and not args.layout.lower().startswith("1x"):
        raise ConfigError(f"the local backend runs on this one host: --layout {args.layout}")
    _, _, ranks = _layout(args, 10**6, hosts)
    app = program[0]
    if app.endswith(".c"):
        app = str(compile_app(impl, app, settings.cache_dir, []))
    cmd = [impl.launcher, *preload_args(impl, lib), "-n", str(ranks),
           *oversubscribe_args(impl, ranks)]
    if "COLLTUNE_PROFILE" in env and impl.name == "openmpi" and not args.no_monitoring:
        cmd += OMPI_MONITORING
    return cmd + [app, *program[1:]], {**impl.run_env(), **env}, ranks


def _netns(args, settings, env: dict, program: list[str], scratch: str) -> tuple[list[str], dict]:
    """Real Open MPI / MPICH across the hosts of an emulated cluster (`colltune cluster up`):
    the launcher runs on its first host with the netns backend's placement and transport."""
    from .. import cluster as emu
    from ..backends.netns import PLACEMENT, find_cluster
    from ..errors import ConfigError
    cmd, full_env, ranks = _local(args, settings, env, program, scratch, hosts=10**6)
    if args.link_flags:
        return cmd, full_env, ranks
    impl_name = settings.mpi
    if impl_name not in PLACEMENT:
        raise ConfigError(f"the netns backend runs {' or '.join(PLACEMENT)}, not {impl_name!r}")
    explicit = settings.source_of("platform") != "default"
    c = find_cluster(settings.platform if explicit else None)
    if not args.layout:
        raise ConfigError(f"the netns backend needs --layout NODESxPPN (cluster {c.name!r} has "
                          f"{len(c.hosts)} hosts)")
    nodes, ppn, ranks = _layout(args, 10**6, len(c.hosts))
    if nodes > len(c.hosts):
        raise ConfigError(f"--layout {args.layout}: cluster {c.name!r} has {len(c.hosts)} hosts")
    line, options = PLACEMENT[impl_name]
    hostfile = os.path.join(scratch, "hostfile")
    with open(hostfile, "w") as fh:
        fh.writelines(line(h.name, ppn) + "\n" for h in c.hosts[:nodes])
    placement = options(c, hostfile, ranks)
    if OMPI_MONITORING[-2] in cmd:            # monitoring is a pml component: let it load
        placement = ["ob1,monitoring" if a == "ob1" else a for a in placement]
    n = cmd.index("-n")                       # the local command: launcher, preload, -n N, ...
    cmd = [*emu.exec_argv(c, c.hosts[0].name), cmd[0], *cmd[1:n], *placement,
           "-n", str(ranks), *cmd[n + 2:]]
    return cmd, full_env, ranks


RUNNERS = {"sim": _sim, "local": _local, "netns": _netns}
# Open MPI's pml monitoring with collective messages in its MPI_T counters (2 filters
# them out; `--mca pml ob1,monitoring` alone does not load the component)
OMPI_MONITORING = ["--mca", "pml_monitoring_enable", "1"]


def missing_ranks(out_dir: str, ranks: int) -> list[int]:
    """World ranks that wrote no DIR/rank-R.json (crashed or killed)."""
    return [r for r in range(ranks) if not os.path.exists(os.path.join(out_dir, f"rank-{r}.json"))]


def _report_profile(out_dir: str, ranks: int) -> None:
    gone = missing_ranks(out_dir, ranks)
    if gone:
        shown = ", ".join(map(str, gone[:20])) + (" ..." if len(gone) > 20 else "")
        print(f"colltune run: profile {out_dir}: {len(gone)} of {ranks} rank files missing "
              f"(ranks {shown}); their traffic is unknown", file=sys.stderr)
    else:
        print(f"colltune run: profile {out_dir}: all {ranks} rank files written", file=sys.stderr)


def _world_layout(args, settings) -> tuple[int, int]:
    """(nodes, ppn) of the job's world communicator."""
    if settings.backend == "local":
        return 1, _layout(args, 10**6, 1)[2]
    if settings.backend == "netns":               # its --layout is required, hosts checked there
        return _layout(args, 10**6, 10**6)[:2]
    from .. import platforms
    plat = platforms.load(settings.platform)
    return _layout(args, plat.cores_per_node, plat.nodes)[:2]


def _tune_first(args, cli, settings) -> str:
    from ..session import new_campaign_name
    from ..sizes import parse_list
    from ..tunefirst import parse_budget, tune_rules
    layout = _world_layout(args, settings)
    colls = [c.strip() for c in args.collectives.split(",") if c.strip()]
    path, _ = tune_rules(cli, args.config, colls, layout, parse_list(args.sizes, "message size", 0),
                         parse_budget(args.budget), args.campaign or new_campaign_name("run"),
                         not args.quiet)
    if not args.quiet:
        print(f"colltune run: tuned {','.join(colls)} for {layout[0]}x{layout[1]}: {path}",
              file=sys.stderr, flush=True)
    return path


def run(args, cli) -> int:
    from ..errors import ConfigError
    from ..session import Session
    settings = Session(cli, args.config).settings
    runner = RUNNERS.get(settings.backend)
    if runner is None:
        raise ConfigError(f"colltune run supports the backends {', '.join(RUNNERS)}, "
                          f"not {settings.backend!r}")
    program = [a for a in args.app]
    if not program and not args.link_flags:
        raise ConfigError("no program: colltune run [options] -- PROGRAM [ARGS...]")
    if program and not (os.path.exists(program[0]) or program[0].endswith(".c")):
        raise ConfigError(f"program {program[0]!r} not found")
    env = {}
    if args.deployment:
        if args.rules or args.tune_first:
            raise ConfigError("--deployment brings its own rules: drop --rules / --tune-first")
        env.update(_deployment(args, settings))
    for var, value in (("COLLTUNE_RULES", args.rules and os.path.abspath(args.rules)),
                       ("COLLTUNE_FORCE", args.force), ("COLLTUNE_VERBOSE", args.verbose and "1"),
                       ("COLLTUNE_REPORT", args.report and os.path.abspath(args.report)),
                       ("COLLTUNE_PROFILE", args.profile and os.path.abspath(args.profile))):
        if value:
            env[var] = value
    if args.profile and not args.link_flags:
        try:
            os.makedirs(env["COLLTUNE_PROFILE"], exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--profile {args.profile}: cannot create it: {exc.strerror}") from None
    if args.online and not args.link_flags:
        from ..online.job import prepare
        env.update(prepare(args, settings, _world_layout(args, settings)))
    if args.tune_first:
        if args.rules or args.force:
            raise ConfigError("--tune-first writes the rules itself: drop --rules / --force")
        env["COLLTUNE_RULES"] = os.path.abspath(_tune_first(args, cli, settings))
    scratch = tempfile.mkdtemp(prefix="colltune-run-")     # the SMPI hostfile
    try:
        cmd, full_env, *ranks = runner(args, settings, env, program, scratch)
        if not args.quiet:
            print("colltune run: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                  + " " + shlex.join(cmd), file=sys.stderr, flush=True)
        timeout = settings.timeout if settings.source_of("timeout") != "default" else None
        try:
            rc = run_group(cmd, timeout, forward_signals=True, env=full_env).returncode
            if args.profile and ranks:
                _report_profile(env["COLLTUNE_PROFILE"], ranks[0])
            if args.online and not args.link_flags:
                from ..online.job import finish
                finish(args, settings)
            return rc
        except subprocess.TimeoutExpired:
            print(f"colltune run: timed out after {timeout:g} s", file=sys.stderr)
            if args.profile and ranks:
                _report_profile(env["COLLTUNE_PROFILE"], ranks[0])
            return 124
        except Interrupted as exc:
            print(f"colltune run: {exc} (exit status {exc.status})", file=sys.stderr)
            if args.profile and ranks:
                _report_profile(env["COLLTUNE_PROFILE"], ranks[0])
            return exc.status
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
