"""`colltune online show|update|export STATE_DIR` (docs/online.md)."""
from __future__ import annotations

import os
import sys


def add_parser(sub) -> None:
    from ..cli import add_globals
    from ..exporters import EXPORTERS
    p = sub.add_parser("online", help="online tuning state: show, update (re-derive, priors, "
                                      "records), export (docs/online.md)")
    osub = p.add_subparsers(dest="online_command", required=True)
    s = osub.add_parser("show", help="per block: arms, probabilities, n, mean; runs so far")
    s.add_argument("state_dir")
    u = osub.add_parser("update", help="re-derive the state from every samples file, add priors "
                                       "for blocks never sampled, load samples into the store")
    u.add_argument("state_dir")
    u.add_argument("--layout", action="append", default=[],
                   help="NODESxPPN to add predicted priors for (repeatable)")
    u.add_argument("--fingerprint", help="the state's fingerprint (default: the newest run's)")
    u.add_argument("--campaign", help="results campaign of the samples (default: online-<fingerprint>)")
    add_globals(u)
    e = osub.add_parser("export", help="the current choices as a library's file")
    e.add_argument("state_dir")
    e.add_argument("--format", required=True, help=f"one of: {', '.join(EXPORTERS.names())}")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--table", help="also write the decision table (JSON) here")
    e.add_argument("--target", help="library version the file is for")
    e.add_argument("--allow-substitute", action="store_true",
                   help="an arm with no equivalent in the library is left to the library's own "
                        "selection there (colltune's algorithms exist only under the interposer; "
                        "MPICH's only in MPICH's file)")
    e.add_argument("--library", choices=("openmpi", "mpich", "smpi"),
                   help="the library the state was learnt on (default: the samples' job "
                        "provenance); its default decision is the `library` arm's rule")
    e.add_argument("--library-default", metavar="SELECTOR",
                   help="SMPI: the selector the jobs ran (`run --default-selector`, the "
                        "platform's smpi/coll-selector); not recorded by the samples")
    p.set_defaults(handler=run)


def parse_layout(text: str) -> tuple[int, int]:
    from ..errors import ConfigError
    try:
        n, p = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ConfigError(f"bad layout {text!r}: expected NODESxPPN, e.g. 24x12") from None
    return n, p


def show(state_dir: str, out=sys.stdout) -> int:
    from ..errors import InputError
    from ..online.statedir import STATE
    from ..online.state import load
    path = os.path.join(state_dir, STATE)
    if not os.path.exists(path):
        raise InputError(f"{path}: no state yet (run a job with `colltune run --online {state_dir}`)")
    st = load(path)
    n_samples = len(os.listdir(os.path.join(state_dir, "samples"))) \
        if os.path.isdir(os.path.join(state_dir, "samples")) else 0
    print(f"{path}: fingerprint {st.fingerprint or '-'}, {st.run_count} runs, {len(st.blocks)} "
          f"blocks, {n_samples} samples files", file=out)
    for b in st.blocks.values():
        # what the next job runs there: a measured block's choice (also in the calls
        # that are draws, but for the risk's exploration); a prior only draws
        runs = (f"-> {b.best().arm} ({b.why()})" if b.source != "prior" else
                "-> draws from p (a prior: nothing measured; the library is timed first)")
        print(f"\n{b.label()}  calls={b.calls} source={b.source}  {runs}", file=out)
        for a in sorted(b.arms, key=lambda a: -a.p):
            mean = f"{a.mean * 1e6:10.2f} us" if a.n else "         -   "
            print(f"  {a.arm:32s} p={a.p:6.3f} n={a.n:6d} mean={mean}", file=out)
    return 0


def run(args, cli) -> int:
    if args.online_command == "show":
        return show(args.state_dir)
    if args.online_command == "update":
        from ..online.statedir import update_dir
        from ..session import Session
        with Session(cli, args.config).store as store:
            st = update_dir(args.state_dir, [parse_layout(x) for x in args.layout],
                            args.fingerprint, store=store, campaign=args.campaign)
        print(f"{os.path.join(args.state_dir, 'state.txt')}: {st.run_count} runs, "
              f"{len(st.blocks)} blocks ({sum(b.source == 'prior' for b in st.blocks.values())} priors)")
        return 0
    return export(args)


def export(args) -> int:
    from ..errors import ConfigError
    from ..mpi.impl import simulated
    from ..online.export import check_format, decision_table, library_of
    from ..online.state import load
    from ..online.statedir import STATE, job_provenance
    from .export import make_exporter
    st = load(os.path.join(args.state_dir, STATE))
    provenance = job_provenance(args.state_dir, st.fingerprint)
    library = args.library or library_of(provenance, st)
    if args.library_default and not simulated(library) and args.library_default != "default":
        raise ConfigError(f"--library-default {args.library_default}: {library or 'this library'}'s "
                          f"default decision is 'default' (the option names SMPI's selector)")
    table = decision_table(st, provenance, library, args.library_default)
    exporter = make_exporter(args.format, args.allow_substitute)
    notes = check_format(st, args.format, exporter.library, args.allow_substitute, library)
    arms = table.provenance.get("arms") or {}
    n_default = sum(r.provider == arms.get("library") and r.algorithm == arms.get("library_default")
                    for e in table.entries for r in e.rules)
    if n_default and exporter.library not in (arms["library"], "colltune"):
        notes.append(f"the state was learnt on {arms['library']}: where it chose the library's "
                     f"default decision, {exporter.library}'s own default decision runs")
    if n_default and not arms.get("library_default_known", True):
        notes.append(f"the table names SMPI's selector {arms['library_default']!r}: "
                     f"{arms['note']}")
    if args.table:
        table.save(args.table)
    exported = exporter.export(table, args.target)
    with open(args.output, "w") as fh:
        fh.write(exported.text)
    path = os.path.abspath(args.output)
    print(f"wrote {path} ({args.format}, {len({(e.nodes, e.ppn) for e in table.entries})} layouts from {st.run_count} runs; "
          f"{n_default} rule(s) the library's default decision)")
    env = exported.env_for(path)
    if env:
        print("run the application with: " + " ".join(f"{k}={v}" for k, v in env.items()))
    for note in notes + list(exported.notes):
        print(f"note: {note}")
    return 0
