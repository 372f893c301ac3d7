"""colltune command line: benchmark, tune, deploy and verify MPI collective algorithms;
run applications under the interposer (online tuning, traffic profiles)."""
from __future__ import annotations

import argparse
import os
import sys
import threading

from . import __version__
from .config import DEFAULTS
from .errors import ColltuneError
from .plan import REDUCTION_OPS, SCENARIOS
from .taskmodel.search import SPACES
from .tuners import TUNERS

# Every setting has a global option of the same name (see add_globals).
GLOBAL_KEYS = tuple(DEFAULTS)


def add_globals(p: argparse.ArgumentParser, measuring: bool = True) -> None:
    """The settings options; measuring=False: only those of a command that launches no
    benchmark (the profile subcommands read files)."""
    g = p.add_argument_group("settings (CLI > COLLTUNE_* environment > config file)")
    g.add_argument("--config", help="TOML config file (default: colltune.toml or $COLLTUNE_CONFIG)")
    if not measuring:
        g.add_argument("--cache-dir", dest="cache_dir",
                       help=f"native builds and probes (default {DEFAULTS['cache_dir']})")
        return
    g.add_argument("--store", help="SQLite results database")
    g.add_argument("--output-dir", dest="output_dir", help="where tables and reports go")
    g.add_argument("--backend", help="where benchmarks run (see `colltune info`)")
    g.add_argument("--platform", help="simulated platform: bundled name or XML path")
    g.add_argument("--mpi", help="MPI library of the local, netns and slurm backends: openmpi "
                                 "or mpich")
    g.add_argument("--provider", help="algorithms to measure: library (the backend library's "
                                      "own, default), colltune (its own, via the interposer) or "
                                      "both (one candidate set, docs/deploy.md)")
    g.add_argument("--default-selector", dest="default_selector",
                   help="--provider both: the library's default decision the job runs with "
                        "(SMPI: ompi or mpich; default: the provider's first baseline)")
    g.add_argument("--tune-presets", dest="tune_presets", choices=[True, False],
                   type=lambda v: {"yes": True, "no": False}.get(v, v), metavar="{yes,no}",
                   help="algorithms also with their tuning presets: colltune's catalogue's "
                        "(e.g. ring[segsize=8192]) and Open MPI's segmented ones at the "
                        "segment sizes of its classic fixed decision (pipeline[segsize=131072]); "
                        "default yes")
    g.add_argument("--jobs", type=int, help="launches run concurrently")
    g.add_argument("--timeout", type=float, help="seconds before a launch counts as hung")
    g.add_argument("--warmup", type=int, help=f"untimed calls before the timed ones (default {DEFAULTS['warmup']})")
    g.add_argument("--min-reps", dest="min_reps", type=int,
                   help=f"timed repetitions at least (default {DEFAULTS['min_reps']})")
    g.add_argument("--max-reps", dest="max_reps", type=int,
                   help=f"timed repetitions at most, until --rse is met (default {DEFAULTS['max_reps']})")
    g.add_argument("--rse", type=float, help="stop a point once its median's confidence interval is within +-RSE of it (docs/bench.md)")
    g.add_argument("--check", choices=["none", "first", "only"], help="verify result data")
    g.add_argument("--reduction-op", dest="reduction_op", choices=REDUCTION_OPS,
                   help="reductions: sum (MPI_SUM, default) or charged-sum (a user-defined sum "
                        "charging its arithmetic on SMPI, the library's collectives as colltune's)")
    g.add_argument("--check-memory-mb", dest="check_memory_mb", type=float,
                   help=f"largest total of result data checked per point (MiB, default "
                        f"{DEFAULTS['check_memory_mb']:g}); "
                        "larger points are timed unchecked")
    g.add_argument("--cache-dir", dest="cache_dir",
                   help=f"native builds (per MPI library) and probes (default {DEFAULTS['cache_dir']})")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _strategies_help() -> str:
    """The --strategy help, from the tuner registry (a new tuner lists itself)."""
    lines = [f"{name}: {cls.summary}" if cls.summary else name for name, cls in TUNERS.items()]
    return ("tuning strategy (default: exhaustive); " + "; ".join(lines)).replace("%", "%%")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="colltune", description=__doc__)
    ap.add_argument("--version", action="version", version=f"colltune {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="backends, MPI libraries found, algorithms per collective")
    p.add_argument("--json", action="store_true", help="everything as JSON (with colltune's "
                                                       "catalogue: ids, descriptions, parameters)")
    p.add_argument("-A", "--all-algorithms", action="store_true",
                   help="every colltune algorithm with its id, description, parameters "
                        "(default, range, unit, meaning) and tuning presets (as ucc_info -A)")
    add_globals(p)

    for name, helptext in (("bench", "run scenario benchmarks"), ("tune", "run a tuning campaign")):
        p = sub.add_parser(name, help=helptext)
        add_globals(p)
        p.add_argument("--layouts", help="NODESxPPN list, e.g. 2x4,8x4 (instead of --nodes/--ppn)")
        p.add_argument("--nodes", help="node counts, e.g. 2,3,8; 2-16 every integer, 2..16 the "
                                       "doublings (2,4,8,16) (default 2)")
        p.add_argument("--ppn", help="processes per node, the same list syntax (default 4)")
        p.add_argument("--sizes", default="8..1M", help="bytes per rank: 8..4M (every power of two), "
                                                        "1000,3000, 100-103 (every integer); combined "
                                                        "with commas (default 8..1M)")
        p.add_argument("--campaign", help="results campaign name (resumes if it exists)")
        p.add_argument("--retry-failed", action="store_true", help="re-measure recorded failures")
        p.add_argument("--root", type=int, default=0, help="root rank of rooted collectives "
                                                            "(bcast, reduce, gather, scatter; default 0)")
        if name == "bench":
            p.add_argument("--coll", "--collective", dest="collective", required=True)
            p.add_argument("--algorithms", default="default",
                           help="comma list of algorithm/selector names, or 'all'")
            p.add_argument("--scenario", choices=SCENARIOS, default="plain")
            p.add_argument("--procs", help="participant counts (sub-communicators), e.g. 2-17")
            p.add_argument("--delays-us", help="delayed scenario: delays (default 1..1024)")
            p.add_argument("--delayed-rank", choices=["first", "last"], default="last")
            p.add_argument("--tcalc-us", help="overlap scenario: compute times (default 1..1024)")
            p.add_argument("--dtype", choices=["char", "int", "float", "double"])
        else:
            p.add_argument("--strategy", default="exhaustive", choices=TUNERS.names(),
                           help=_strategies_help())
            p.add_argument("--collectives", default="bcast,allreduce")
            p.add_argument("--algorithms", help="restrict candidates (comma list)")
            p.add_argument("--baselines", help="library default selectors to compare with "
                                                "(default: the provider's, e.g. ompi,mpich)")
            p.add_argument("--table", help="decision table path (default: OUTPUT_DIR/<campaign>.table.json)")
            p.add_argument("--heuristics", nargs="?", const="safe", default=None,
                           help="taskmodel: cheaper task measurements and pruning; alone = safe "
                                "(H1,H3,H4,H5), all, or a subset such as H1,H3 (docs/taskmodel.md)")
            p.add_argument("--han-space", default="han", choices=sorted(SPACES),
                           help="taskmodel: HAN configuration space, han (the paper's), han+flat "
                                "(adds allreduce imod=2: a flat allreduce across the leaders) or "
                                "han+nb (adds smod=3: the library's non-blocking intra-node module)")

    p = sub.add_parser("report", help="render the HTML report of a campaign")
    add_globals(p)
    p.add_argument("--campaign", help="campaign name (default: the latest)")
    p.add_argument("--baselines", help="library default selectors to compare with (default: "
                                       "every one the campaign measured)")
    p.add_argument("-o", "--output", help="HTML path (default: OUTPUT_DIR/<campaign>.html)")
    p.add_argument("--root", type=int, help="the root to report where a rooted collective was "
                                            "measured at several (default: the only one)")
    p.add_argument("--dtype", help="the datatype to report where several were measured "
                                   "(default: the only one)")

    p = sub.add_parser("results", help="list or export stored results")
    add_globals(p)
    rs = p.add_subparsers(dest="results_command", required=True)
    # the settings also after list / export (suppressed defaults keep those given before)
    add_globals(rs.add_parser("list", help="campaigns in the store", argument_default=argparse.SUPPRESS))
    ex = rs.add_parser("export", help="export measurements", argument_default=argparse.SUPPRESS)
    add_globals(ex)
    ex.add_argument("--format", choices=["csv", "jsonl"], required=True)
    ex.add_argument("--campaign", default=None)
    ex.add_argument("-o", "--output", default="-")

    p = sub.add_parser("demo", help="tune bcast and allreduce on the small simulated cluster "
                                    "(SMPI's algorithms vs its selectors, then best of both), "
                                    "deploy, run a program under the deployment vs the default")
    add_globals(p)

    from . import subcommands
    for module in subcommands.modules():
        module.add_parser(sub)
    return ap


def _cli_values(args) -> dict:
    return {k: getattr(args, k, None) for k in GLOBAL_KEYS}


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch system's cancel, `kill`): stopped like Ctrl-C, launches in flight
    killed and not stored, and said so (it had ended silently with 143)."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from . import commands
    import signal
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)    # `run` forwards its own (proc.py)
    try:
        handler = getattr(args, "handler", None) or getattr(commands, "cmd_" + args.command)
        return int(handler(args, _cli_values(args)) or 0)
    except ColltuneError as exc:
        print(f"colltune: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:             # `colltune ... | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141                      # 128 + SIGPIPE, as a shell reports a reader gone
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"colltune: {how}; finished launches are in the store, re-run to resume",
              file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except OSError as exc:
        # a file the command reads or writes (permissions, a missing folder, a folder
        # where a file was wanted): the file and the reason, not a traceback
        if exc.filename is None or os.environ.get("COLLTUNE_DEBUG"):
            raise
        print(f"colltune: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
