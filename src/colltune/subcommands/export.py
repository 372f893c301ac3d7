"""`colltune export`: a decision table -> one library's rules file, plus the
environment the application must run with (docs/exporters.md)."""
from __future__ import annotations

import os
import shlex


def add_parser(sub) -> None:
    from ..cli import add_globals
    from ..exporters import EXPORTERS
    p = sub.add_parser("export", help="write a decision table as a library's rules file "
                                      f"({', '.join(EXPORTERS.names())})")
    p.add_argument("--table", required=True, help="decision table (JSON) to export")
    p.add_argument("--format", required=True, help=f"one of: {', '.join(EXPORTERS.names())}")
    p.add_argument("--target", help="library version the file is for, e.g. 5.0.7 (dialects "
                                    "differ between releases; default: the newest known)")
    p.add_argument("-o", "--output", help="file to write (default: OUTPUT_DIR/<table>.<format><suffix>)")
    p.add_argument("--allow-substitute", action="store_true",
                   help="a rule with no equivalent in the library is left to the library's own "
                        "selection there (its default decision; named in the file header) "
                        "instead of an error")
    p.add_argument("--base", help="mpich-json: the target release's default selection JSON "
                                  "(default: read from the installed MPICH of that release)")
    p.add_argument("--guarded", action="store_true",
                   help="colltune format, for a job run with the guard (COLLTUNE_GUARD): where the "
                        "tuner measured nothing, the arm with the smallest worst slowdown, no margin "
                        "over the library default (as deploy --guard; docs/rules.md)")
    add_globals(p)
    p.set_defaults(handler=run)


def make_exporter(fmt: str, allow_substitute: bool = False, base: str | None = None,
                  guarded: bool = False):
    from ..errors import ConfigError
    from ..exporters import EXPORTERS
    exporter = EXPORTERS.get(fmt)()
    for attr, value, flag, setting in (
            ("allow_substitute", allow_substitute, "--allow-substitute", allow_substitute),
            ("base_path", base, "--base", base),
            ("unmeasured_margin", guarded, "--guarded", None)):
        if value:
            if not hasattr(exporter, attr):
                raise ConfigError(f"{flag} does not apply to format {fmt}")
            setattr(exporter, attr, setting)
    return exporter


def run(args, cli) -> int:
    from ..decision import DecisionTable
    from ..session import Session
    from ..errors import InputError
    table = DecisionTable.load(args.table)
    if not table.entries:
        # an empty rules file would deploy nothing while looking like a deployment
        raise InputError(f"{args.table}: the decision table has no entries (its tuning "
                         f"measured no algorithm ok: `colltune report --campaign "
                         f"{table.provenance.get('campaign', '<campaign>')}` lists the failures); "
                         f"nothing to export")
    exporter = make_exporter(args.format, args.allow_substitute, args.base, args.guarded)
    exported = exporter.export(table, args.target)
    path = args.output
    if path is None:
        stem = os.path.basename(args.table).removesuffix(".json").removesuffix(".table")
        path = Session(cli, args.config).output_path(f"{stem}.{exporter.name}{exported.suffix}")
    with open(path, "w") as fh:
        fh.write(exported.text)
    path = os.path.abspath(path)
    version = exported.target or args.target        # the version the file is for, resolved
    print(f"wrote {path} ({exporter.name}, for {exporter.library}"
          f"{' ' + version if version else ''})")
    env = exported.env_for(path)
    if env:
        print("run the application with:")
        print("  " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
        mca = {k[len("OMPI_MCA_"):]: v for k, v in env.items() if k.startswith("OMPI_MCA_")}
        if mca:
            print("  or: mpirun " + " ".join(f"--mca {k} {shlex.quote(v)}" for k, v in mca.items()))
    if args.guarded:
        print("  with COLLTUNE_GUARD=N (N timed calls of each side per block, e.g. 1): "
              "docs/interposer.md")
    for note in exported.notes:
        print(f"note: {note}")
    return 0
