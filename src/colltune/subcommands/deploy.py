"""`colltune deploy`: one folder with everything a job needs to run a decision
table — the library's rules file, colltune's rules file, the interposer, env.sh, a modulefile
and the manifest deployment.json (docs/deploy.md)."""
from __future__ import annotations


def add_parser(sub) -> None:
    from ..cli import add_globals
    p = sub.add_parser("deploy", help="write a decision table's deployment: library rules file, "
                                      "colltune rules file, interposer, env.sh, modulefile, manifest")
    p.add_argument("--table", required=True, help="decision table (JSON), e.g. from "
                                                  "colltune tune --provider both")
    p.add_argument("--library", required=True, choices=("openmpi", "mpich", "smpi"),
                   help="the MPI the job runs")
    p.add_argument("--target", help="library version the rules file is for, e.g. 5.0.7 "
                                    "(default: the newest this colltune knows)")
    p.add_argument("-o", "--output", required=True, help="deployment folder (created)")
    p.add_argument("--allow-substitute", action="store_true",
                   help="a library rule with no equivalent is left to the library's own "
                        "selection there (as colltune export --allow-substitute)")
    p.add_argument("--guard", type=int, default=0, metavar="N",
                   help="the interposer times each of colltune's rules against the library's "
                        "collective, N calls each per communicator and message size, and keeps "
                        "the faster for the rest of the job (COLLTUNE_GUARD; default 0: off); "
                        "layouts and sizes the tuner did not measure then get the arm with the "
                        "smallest worst slowdown, with no margin over the default (docs/rules.md)")
    add_globals(p)
    p.set_defaults(handler=run)


def run(args, cli) -> int:
    from ..deploy import ENV_FILE, MODULE_DIR, deploy
    from ..session import Session
    session = Session(cli, args.config)
    m = deploy(args.table, args.library, args.output, session.settings.cache_dir, args.target,
               args.allow_substitute, args.guard)
    n = m["table"]["rules"]
    print(f"deployment for {m['library']} {m['library_version']} in {args.output}: "
          f"{n['colltune']} colltune rule(s), {n['library']} library rule(s), "
          f"{n['default']} library-default rule(s)")
    for key in ("library_rules", "colltune_rules", "interposer", "env", "module", "table"):
        if m["files"].get(key):
            print(f"  {key:<15} {m['files'][key]}")
    print(f"use: source {args.output}/{ENV_FILE}   (then see its first lines)")
    print(f"  or: module use {args.output}/{MODULE_DIR} && module load colltune/{m['library']}")
    for note in m["notes"]:
        print(f"note: {note}")
    return 0
