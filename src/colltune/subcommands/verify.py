"""`colltune verify`: run the real library with a rules file and prove it is
read and honoured (docs/exporters.md). Exit 0 only when it is; 1 otherwise,
naming the sample points that failed and why."""
from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    from ..cli import add_globals
    p = sub.add_parser("verify", help="prove on the real library that a rules file is read "
                                      "and honoured")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--rules", help="the rules file (from colltune export)")
    what.add_argument("--deployment", help="a folder from colltune deploy: the library's part and "
                                           "colltune's, what ran at each sample point, and the "
                                           "default/deployed time ratio (docs/deploy.md)")
    p.add_argument("--library", help="openmpi or mpich (the installed one runs); with "
                                     "--deployment: the deployment's")
    p.add_argument("--format", dest="fmt", help="rules format (default: guessed from the file)")
    p.add_argument("--table", help="decision table the file was exported from: also check "
                                   "that the file says what the table says")
    p.add_argument("--ranks", type=int, help="ranks to run (default: a tuned comm size of 2-4)")
    p.add_argument("--reps", type=int, default=20, help="timed calls per sample point")
    p.add_argument("--hosts", type=int, help="--deployment with --backend netns: emulated hosts "
                                             "to spread --ranks over (default 2; --platform "
                                             "names the cluster, docs/cluster.md)")
    add_globals(p)
    p.set_defaults(handler=run)


def run(args, cli) -> int:
    from .. import mpi
    from ..backends import trait
    from ..decision import DecisionTable
    from ..errors import BackendError, ConfigError
    from ..session import Session
    from ..verify import VERIFIERS
    session = Session(cli, args.config)
    backend, platform = _where(session.settings)
    if args.deployment:
        return _deployment(args, session, backend, platform)
    if not trait(backend, "real_library") or trait(backend, "emulated_hosts") or args.hosts is not None:
        raise ConfigError(f"verify --rules runs the library on this host: "
                          f"{'--hosts' if args.hosts is not None else f'backend {backend!r}'} is for "
                          f"verify --deployment --backend netns (docs/deploy.md)")
    if not args.library:
        raise ConfigError("--rules needs --library (openmpi or mpich)")
    cls = VERIFIERS.get(args.library)
    try:
        impl = mpi.find(args.library)
    except mpi.MPINotFound as exc:
        raise BackendError(str(exc)) from None
    verifier = cls(impl, session.settings.cache_dir)
    try:
        text = open(args.rules).read()
    except OSError as exc:
        raise ConfigError(f"cannot read --rules {args.rules}: {exc.strerror}") from None
    if not args.fmt:
        _check_library_reads_it(args.rules, text, args.library)
    fmt = args.fmt or verifier.guess_format(text)
    if fmt not in verifier.formats:
        raise ConfigError(f"--format {fmt}: {args.library} reads {', '.join(verifier.formats)}")
    table = DecisionTable.load(args.table) if args.table else None
    others = {r.provider for e in (table.entries if table else ()) for r in e.rules} & \
        (set(VERIFIERS.names()) - {args.library})
    if others:
        raise ConfigError(f"--table {args.table}: measured on {', '.join(sorted(others))}, not "
                          f"{args.library}: {args.library}'s rules files name only its own "
                          f"algorithms, so no file of it can say what this table says (export "
                          f"and deploy refuse it too)")
    if args.ranks is not None and not 2 <= args.ranks <= 8:
        raise ConfigError(f"--ranks {args.ranks}: use 2-8 ranks on this host (on one rank the "
                          f"library runs no algorithm of its own)")
    report = verifier.verify(args.rules, fmt, table, args.ranks, args.reps,
                             session.settings.timeout)
    print(report.render())
    return 0 if report.ok else 1


def _check_library_reads_it(path: str, text: str, library: str) -> None:
    """A file of another library's format (or colltune's own) given with --library
    gave a parse error about its first character: name the file's kind instead."""
    from ..errors import ConfigError
    words = [w for ln in text.splitlines() for w in ln.split("#", 1)[0].split()]
    kind = ("mpich" if text.lstrip().startswith("{") else
            "colltune" if words[:1] == ["colltune-rules"] else "openmpi" if words else None)
    if kind == "colltune":
        raise ConfigError(f"{path}: a colltune rules file: the interposer reads it (`colltune run "
                          f"--rules {path}`, docs/rules.md); verify checks the libraries' own files")
    if kind and kind != library:
        what = "an MPICH CSEL (mpich-json)" if kind == "mpich" else "an Open MPI (coll/tuned or coll/han)"
        raise ConfigError(f"{path}: {what} rules file, not one {library} reads: verify it with "
                          f"--library {kind}")


def _tuned_ranks(deployment: str, hosts: int, hi: int = 4) -> int:
    """verify --deployment's default ranks: the largest comm size the table was tuned on
    that fits 2..hi (at least 2 per host) and spreads evenly over the hosts, else 2 per
    host (a size no tuned layout has proves less: most points then look like the default)."""
    from ..decision import DecisionTable
    from ..errors import ColltuneError
    try:
        table = DecisionTable.load(str(Path(deployment) / "table.json"))
    except (ColltuneError, OSError):
        return 2 * hosts            # verify_deployment names what is wrong with the folder
    sizes = [e.nodes * e.ppn for e in table.entries]
    return max([c for c in sizes if max(2, 2 * hosts) <= c <= max(hi, 2 * hosts) and c % hosts == 0],
               default=2 * hosts)


def _where(settings) -> tuple[str, str | None]:
    """(backend, netns cluster) of a verify run: the backend setting (CLI > environment >
    config file) where one was given, else this host (local); the platform setting names
    the cluster of netns."""
    from ..backends import trait
    from ..backends.netns import cluster_setting
    backend = settings.values["backend"] if settings.source_of("backend") != "default" else "local"
    return backend, cluster_setting(settings) if trait(backend, "emulated_hosts") else None


def _deployment(args, session, backend: str, platform: str | None) -> int:
    from ..backends import trait
    from ..errors import ConfigError
    from ..verify.deployment import verify_deployment
    if args.fmt or args.table or args.library:
        raise ConfigError("--deployment takes its library, rules files and table from the "
                          "deployment's manifest: drop --library / --format / --table")
    if not trait(backend, "real_library"):
        raise ConfigError(f"backend {backend!r} ({session.settings.source_of('backend')}): verify "
                          f"--deployment runs the real library on "
                          f"this host (local) or across emulated hosts (netns)")
    hosts = (args.hosts or 2) if trait(backend, "emulated_hosts") else 1
    if args.hosts is not None and not trait(backend, "emulated_hosts"):
        raise ConfigError("--hosts needs --backend netns (emulated hosts, docs/cluster.md)")
    ranks = args.ranks or _tuned_ranks(args.deployment, hosts)
    if not 2 <= ranks <= 8 or hosts < 1:
        raise ConfigError(f"--ranks {ranks}: use 2-8 ranks in all on this machine")
    if ranks % hosts:
        raise ConfigError(f"--ranks {ranks} cannot be spread evenly over --hosts {hosts}")
    report = verify_deployment(args.deployment, session.settings.cache_dir, ranks,
                               args.reps, session.settings.timeout, hosts, platform)
    print(report.render())
    return 0 if report.ok else 1
