"""`colltune run`: launch an application under colltune's interposer.

    colltune run [--rules F] [--force SPEC] [-n N | --layout NxP] -- ./app args
    colltune run --backend local --mpi mpich -n 2 --rules F -- app.c args
    colltune run --backend slurm --mpi openmpi --layout 2x4 --online STATE -- ./app args

Each backend has its runner (colltune/runners/: sim, local, netns, slurm; registered
by name): how it builds, places and launches the job. The slurm runner starts
the job as one srun step inside the current allocation (docs/slurm.md).
A C source is compiled first (cached by content and MPI identity): on the sim
backend with smpicc and linked with libcolltune.a, on the real-MPI backends with
the library's mpicc. A ready executable runs as is: on a real MPI
libcolltune.so (built against the same MPI) is preloaded into the ranks; on
the sim backend it must already be linked with libcolltune.a (`--link-flags`
prints how). The rules file is checked against the catalogue before launch.
SIGTERM / SIGINT / SIGHUP sent to colltune are passed on to the whole job (launcher
and every rank), which is SIGKILLed if still there after a grace period, and
reaped (a Slurm step still there is cancelled); colltune then exits with 128 + the
signal number. Hostfiles go to a temporary folder, removed afterwards. docs/interposer.md.

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

import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from ..proc import Interrupted, run_group
from ..runners.base import compile_app  # noqa: F401  (tests build their programs with it)


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
    p.add_argument("--compare", action="store_true",
                   help="run the program under the library default first (no rules; on SMPI the "
                        "deployment's selector), then as asked, and print the time in each "
                        "intercepted collective and the job's, side by side (COLLTUNE_TIMES)")
    p.add_argument("-n", "-np", dest="np", type=int, help="number of ranks")
    p.add_argument("--layout", help="NODESxPPN, e.g. 4x8 (sim: on the platform; netns: over "
                                    "the emulated hosts; slurm: over the allocation's nodes)")
    p.add_argument("--hosts", help="sim backend: which hosts of the platform the nodes are: "
                                   "'spread' (evenly over the platform), H1,H2,... or @FILE "
                                   "(one per line); default: the first NODES hosts")
    p.add_argument("--link-flags", action="store_true",
                   help="print how to build an application with libcolltune for this backend, and exit")
    t = p.add_argument_group("tune first (per-job tune-then-run, active learning)")
    t.add_argument("--tune-first", action="store_true",
                   help="tune colltune's algorithms for this layout first, then run with the result")
    # defaults in TUNE_FIRST_DEFAULTS: None here tells "given" from "left out"
    t.add_argument("--collectives", help=f"collectives to tune ({TUNE_FIRST_DEFAULTS['collectives']})")
    t.add_argument("--budget", help="tuning time budget: seconds, or 90s / 10m / 1h "
                                    f"({TUNE_FIRST_DEFAULTS['budget']})")
    t.add_argument("--sizes", help=f"message sizes to tune, bytes per rank ({TUNE_FIRST_DEFAULTS['sizes']})")
    t.add_argument("--campaign", help="results campaign of the tuning (default: run-<time>)")
    p.add_argument("app", nargs="*", help="-- PROGRAM [ARGS...]; PROGRAM may be a C source")
    p.set_defaults(handler=run)


TUNE_FIRST_DEFAULTS = {"collectives": "bcast,allreduce", "budget": "10m", "sizes": "8..1M"}


def _tune_first_options(args) -> None:
    """The tune-first group's options mean something with --tune-first only (online
    tuning has its own budget: COLLTUNE_ONLINE_BUDGET); their defaults otherwise."""
    from ..errors import ConfigError
    given = [f"--{k}" for k in (*TUNE_FIRST_DEFAULTS, "campaign") if getattr(args, k) is not None]
    if given and not args.tune_first:
        raise ConfigError(f"{', '.join(given)}: options of --tune-first"
                          + (" (online tuning's budget is COLLTUNE_ONLINE_BUDGET, docs/online.md)"
                             if args.online else ""))
    for k, v in TUNE_FIRST_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def _deployment(args, settings, runner) -> dict:
    """The environment of --deployment DIR (checked against the runner's library);
    its launch variables go to args.deployment_launch."""
    from .. import deploy
    from ..errors import ConfigError
    manifest, d = deploy.load(args.deployment)
    for name in manifest["edited"]:
        print(f"colltune run: warning: {d / name} was edited since `colltune deploy` wrote it; "
              f"`colltune verify --deployment {args.deployment}` checks what it makes the "
              f"library run", file=sys.stderr)
    files = manifest.get("files") or {}
    if files.get("library_rules"):
        deploy.check_library_file(d / files["library_rules"], files.get("library_format"))
    lib = manifest.get("library")
    want = runner.library()
    if lib != want:
        raise ConfigError(f"--deployment {args.deployment}: deployed for {lib}, but the "
                          f"{settings.backend} backend runs {want}")
    rules = (manifest.get("env") or {}).get("COLLTUNE_RULES")
    if rules and not os.path.exists(rules):
        raise ConfigError(f"--deployment {args.deployment}: its rules file {rules} is missing "
                          f"(moved folder? deploy again)")
    args.deployment_launch = manifest.get("launch") or {}
    own = (manifest.get("files") or {}).get("interposer")
    if own and (d / own).is_file():
        args.deployment_interposer = str(d / own)      # what was deployed, not this build
    if rules:
        args.rules = rules                      # checked against the catalogue like --rules
    return dict(manifest.get("env") or {})


def _note_library_settings(args) -> None:
    """The library's own choice of algorithms set in this shell passes on to the program
    (the interposer's does not: mpi.impl.clean_environ); say so, as the library's
    default is then not its own (a sourced env.sh of a deployment sets them)."""
    from ..mpi.impl import inherited_choices, note_dropped
    note_dropped("run", library=False)
    own = set(inherited_choices(os.environ, library=False))
    lib = sorted(set(inherited_choices(os.environ)) - own)
    if lib:
        print(f"colltune run: the library settings of this shell pass on to the program: "
              f"{', '.join(f'{k}={os.environ[k]}' for k in lib)} (they choose its algorithms)",
              file=sys.stderr)


# what --compare compares with the library default: the run's own choice of algorithms
COMPARED_MODES = {"COLLTUNE_RULES", "COLLTUNE_FORCE", "COLLTUNE_ONLINE"}


def _launch(runner, cmd, full_env, settings, who: str) -> tuple[int, bool]:
    """Run the job (a --timeout given is its limit; signals to colltune go to the whole
    job) and let the runner clean up: (exit status, whether the job ran to its end). A
    timeout is status 124, an interruption the signal's status, each said on stderr."""
    timeout = settings.timeout if settings.source_of("timeout") != "default" else None
    rc, ended = 1, False
    try:
        rc = runner.exit_status(run_group(cmd, timeout, forward_signals=True, env=full_env).returncode)
        ended = True
    except subprocess.TimeoutExpired:
        print(f"{who}: timed out after {timeout:g} s", file=sys.stderr)
        rc = 124
    except Interrupted as exc:
        print(f"colltune run: {exc} (exit status {exc.status})", file=sys.stderr)
        rc = exc.status
    runner.finish(ended and rc == 0)
    return rc, ended


def _run_default(runner, program, scratch, times, args, settings, profile: str | None = None) -> int:
    """--compare's first launch: the program with the interposer and no choice of its
    own (every collective goes to the library; on SMPI the run's selector), timed; with
    --profile, profiled into `profile` (DIR-default)."""
    if not args.quiet:
        print("colltune run --compare: [1/2] the library default", file=sys.stderr, flush=True)
    env = {"COLLTUNE_TIMES": times, **(_profile_env(profile, profile, runner) if profile else {})}
    cmd, full_env, ranks = runner.command(env, program, scratch)
    if not args.quiet:                     # as the second run's is
        _print_command(env, cmd)
    rc, ended = _launch(runner, cmd, full_env, settings, "colltune run --compare: the library default's run")
    if profile and ranks:
        _report_profile(profile, ranks)
    if not ended:
        return rc
    if rc != 0:
        print(f"colltune run --compare: the library default's run failed (exit status {rc}); "
              f"nothing compared", file=sys.stderr)
    elif not args.quiet:
        print("colltune run --compare: [2/2] the run as asked", file=sys.stderr, flush=True)
    return rc


def _profile_env(given: str, path: str, runner) -> dict[str, str]:
    """A profiled launch: its folder made ready (_profile_dir), the machine recorded, and
    the variables of its ranks; COLLTUNE_PROFILE_JOB, what every rank file of this run
    names (the reader refuses a folder holding files of two runs)."""
    import uuid
    _profile_dir(given, path)
    _profile_machine(path, runner)
    return {"COLLTUNE_PROFILE": path, "COLLTUNE_PROFILE_JOB": f"colltune-run:{uuid.uuid4().hex[:16]}"}


def _print_command(env: dict, cmd: list[str]) -> None:
    print("colltune run: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
          + " " + shlex.join(cmd), file=sys.stderr, flush=True)


def compare_times(default_path: str, run_path: str, env: dict, label: str = "") -> str:
    """The table --compare prints: per intercepted collective the calls and the time in
    them (the slowest rank's sum), the library default's and this run's, and the job's."""
    import json
    from ..errors import InputError
    try:
        base, mine = (json.load(open(p)) for p in (default_path, run_path))
    except (OSError, ValueError) as exc:
        raise InputError(f"--compare: no timing from the interposer ({exc}); was the program "
                         f"linked with libcolltune?") from None
    mode = ("online" if "COLLTUNE_ONLINE" in env else "rules" if "COLLTUNE_RULES" in env
            else "forced")
    rows = [("collective", "calls", "default", "this run", "default/this run")]
    ratio = (lambda a, b: f"{a / b:.2f}x" if b > 0 else "-")
    for coll, b in base["collectives"].items():
        m = mine["collectives"].get(coll, {})
        if not b["calls"] and not m.get("calls"):
            continue
        rows.append((coll, str(b["calls"]), f"{b['max_s'] * 1e3:.3f} ms", f"{m.get('max_s', 0) * 1e3:.3f} ms",
                     ratio(b["max_s"], m.get("max_s", 0))))
    t0, t1 = base["all_max_s"], mine["all_max_s"]
    rows.append(("all of them", "", f"{t0 * 1e3:.3f} ms", f"{t1 * 1e3:.3f} ms", ratio(t0, t1)))
    rows.append(("job", "", f"{base['job_s'] * 1e3:.3f} ms", f"{mine['job_s'] * 1e3:.3f} ms",
                 ratio(base["job_s"], mine["job_s"])))
    width = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"\ncolltune run --compare: the library default{f' ({label})' if label else ''} vs this "
             f"run ({mode}), {base['ranks']} "
             f"ranks, {base['clock']} time; the slowest rank's time in the calls (of each collective, "
             f"of all of them), and from MPI_Init to MPI_Finalize (job)"]
    lines += ["  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, width)))
              for r in rows]
    if base["clock"] == "wall":
        lines.append("  (wall-clock times of two launches: on a busy or oversubscribed host, noise)")
    return "\n".join(lines)


# in a profile folder: the machine `colltune run --profile` ran on (profile report's
# default --topology)
PROFILE_MACHINE = "colltune-run.json"


def _profile_machine(path: str, runner) -> None:
    """What `profile report` draws on by default (Runner.machine), kept with the profile."""
    import json
    doc = runner.machine()
    if doc is None:
        return
    with open(os.path.join(path, PROFILE_MACHINE), "w") as fh:
        json.dump(doc, fh)
        fh.write("\n")


def _profile_dir(given: str, path: str) -> None:
    """The profile's folder: created, writable, and holding no earlier run's profile
    (its rank files and trace would mix into this one's)."""
    import glob
    from ..errors import ConfigError
    from ..profile.simtrace import TRACE_NAME
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"--profile {given}: is a file, not a folder (the profile is a folder "
                          f"of files: give a new name)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--profile {given}: cannot create it: {exc.strerror}") from None
    old = sorted(os.path.basename(f) for f in glob.glob(os.path.join(path, "rank-*.json"))
                 + [os.path.join(path, n) for n in ("job.json", TRACE_NAME)] if os.path.exists(f))
    if old:
        raise ConfigError(f"--profile {given}: holds an earlier run's profile ({', '.join(old[:3])}"
                          f"{' ...' if len(old) > 3 else ''}); give each run its own folder")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"--profile {given}: not writable")


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


def _tune_first(args, cli, runner) -> str:
    from ..session import new_campaign_name
    from ..sizes import parse_list
    from ..tunefirst import parse_budget, tune_rules
    layout = runner.world_layout()
    colls = [c.strip() for c in args.collectives.split(",") if c.strip()]
    path, _ = tune_rules(cli, args.config, colls, layout, parse_list(args.sizes, "message size", 0),
                         parse_budget(args.budget), args.campaign or new_campaign_name("run"),
                         not args.quiet)
    if not args.quiet:
        print(f"colltune run: tuned {','.join(colls)} for {layout[0]}x{layout[1]}: {path}",
              file=sys.stderr, flush=True)
    return path


def _samples_now(state_dir: str) -> set[str]:
    """The samples files in an online state folder (a run adds one at MPI_Finalize)."""
    try:
        return set(os.listdir(os.path.join(state_dir, "samples")))
    except OSError:
        return set()


def run(args, cli) -> int:
    from ..errors import ConfigError
    from ..runners import RUNNERS
    from ..session import Session
    settings = Session(cli, args.config).settings
    if settings.backend not in RUNNERS.names():
        raise ConfigError(f"colltune run supports the backends {', '.join(RUNNERS.names())}, "
                          f"not {settings.backend!r}")
    runner = RUNNERS.get(settings.backend)(args, settings)
    program = [a for a in args.app]
    if not program and not args.link_flags:
        raise ConfigError("no program: colltune run [options] -- PROGRAM [ARGS...]")
    if program and not (os.path.exists(program[0]) or program[0].endswith(".c")):
        raise ConfigError(f"program {program[0]!r} not found")
    _tune_first_options(args)
    for opt in ("online", "profile", "report", "rules", "deployment"):
        if getattr(args, opt, None) == "":      # an empty $VAR must not turn the mode off
            raise ConfigError(f"--{opt}: empty path")
    env = {}
    if args.deployment:
        if args.rules or args.tune_first:
            raise ConfigError("--deployment brings its own rules: drop --rules / --tune-first")
        env.update(_deployment(args, settings, runner))
    for var, value in (("COLLTUNE_RULES", args.rules and os.path.abspath(args.rules)),
                       ("COLLTUNE_FORCE", args.force), ("COLLTUNE_VERBOSE", args.verbose and "1"),
                       ("COLLTUNE_REPORT", args.report and os.path.abspath(args.report)),
                       ("COLLTUNE_PROFILE", args.profile and os.path.abspath(args.profile))):
        if value:
            env[var] = value
    if args.profile and not args.link_flags:
        env.update(_profile_env(args.profile, env["COLLTUNE_PROFILE"], runner))
    if args.online and not args.link_flags:
        from ..online.job import prepare
        env.update(prepare(args, settings, runner))
    if args.tune_first:
        if args.rules or args.force:
            raise ConfigError("--tune-first writes the rules itself: drop --rules / --force")
        env["COLLTUNE_RULES"] = os.path.abspath(_tune_first(args, cli, runner))
    if args.compare and (args.link_flags or not (set(env) & COMPARED_MODES)):
        raise ConfigError("--compare: nothing to compare the library default with (give "
                          "--rules, --deployment, --force, --tune-first or --online)"
                          if not args.link_flags else "--compare builds and runs nothing with --link-flags")
    _note_library_settings(args)
    # hostfiles and --compare's COLLTUNE_TIMES files, which rank 0 writes where it runs:
    # under the build cache, which every node sees (docs/slurm.md), not this node's /tmp
    runs_dir = os.path.join(os.path.abspath(settings.cache_dir), "runs")
    os.makedirs(runs_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="run-", dir=runs_dir)
    try:
        if args.compare:
            default_times = os.path.join(scratch, "times-default.json")
            default_profile = None
            if args.profile:                 # both runs profiled, side by side
                default_profile = env["COLLTUNE_PROFILE"].rstrip("/") + "-default"
            rc = _run_default(runner, program, scratch, default_times, args, settings,
                              default_profile)
            if rc != 0:
                return rc
            env["COLLTUNE_TIMES"] = os.path.join(scratch, "times.json")
        cmd, full_env, ranks = runner.command(env, program, scratch)
        if not args.quiet and not args.link_flags:        # that command only echoes them
            _print_command(env, cmd)
        before = _samples_now(args.online) if args.online else set()
        rc, ended = _launch(runner, cmd, full_env, settings, "colltune run")
        if args.profile and ranks:
            _report_profile(env["COLLTUNE_PROFILE"], ranks)
        if ended and args.online and not args.link_flags:
            from ..online.job import finish
            if _samples_now(args.online) - before:
                finish(args, settings)
            elif rc == 0:       # nothing to update: not a failure of the update
                print(f"colltune run: online state {args.online} unchanged: the job wrote no "
                      f"samples (online mode was off in it: see its warning above)",
                      file=sys.stderr)
        if ended and args.compare and rc == 0:
            print(compare_times(default_times, env["COLLTUNE_TIMES"], env,
                                runner.default_label()), flush=True)
            if default_profile:
                print(f"profiles: {default_profile} (the library default) and "
                      f"{env['COLLTUNE_PROFILE']} (as asked); both drawn on one colour scale:\n"
                      f"  colltune profile report {shlex.quote(env['COLLTUNE_PROFILE'])} --compare "
                      f"{shlex.quote(default_profile)} --label asked --label default -o compare.html",
                      flush=True)
        return rc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
