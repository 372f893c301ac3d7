"""`colltune profile`: reports, what-if placement, files and a summary of a traffic
profile written by `colltune run --profile OUT_DIR` (docs/profile-report.md)."""
from __future__ import annotations

import os


def add_parser(sub) -> None:
    from ..cli import add_globals
    p = sub.add_parser("profile", help="traffic profile: report (HTML + SVG drawing), whatif, export, show")
    ps = p.add_subparsers(dest="profile_command", required=True)

    def common(q, topology: str = "required", select: bool = True) -> None:
        q.add_argument("out_dir", help="profile directory (colltune run --profile OUT_DIR)")
        if topology:
            q.add_argument("--topology",
                           help="bundled platform name, SimGrid XML, ibnetdiscover dump (+ forwarding "
                                "tables), Slurm topology file or emulated cluster name"
                                + (" (default: the platform or emulated cluster `colltune run "
                                   "--profile` ran on, sim and netns backends)"
                                   if topology == "required" else " (without: no link loads)"))
        if select:                  # export writes every region and kind
            q.add_argument("--region", default="run", help="region (default: run, the whole run)")
            q.add_argument("--kind", help="collective kind or p2p (default: all traffic)")
        add_globals(q, measuring=False)

    q = ps.add_parser("report", help="self-contained HTML page with the topology drawing and tables")
    common(q)
    q.add_argument("-o", "--output", required=True, help="HTML file to write")
    q.add_argument("--compare", metavar="OUT_DIR2", help="a second profile drawn beside the first, one colour scale")
    q.add_argument("--label", action="append", default=[], help="name of each profile (repeat for --compare)")
    q.add_argument("--title")
    q.add_argument("--colour-by", dest="colour_by", choices=["bytes", "messages"], default="bytes",
                   help="what the links' colour shows (default bytes; messages: the hot spots "
                        "of small collectives)")
    q.add_argument("--export", metavar="DIR", help="also write the JSON + CSV files of the (first) profile")
    q.set_defaults(handler=run_report)

    q = ps.add_parser("whatif", help="the same traffic on another node set: peak link and hop-bytes")
    common(q)
    q.add_argument("--place", required=True, help="compact, spread, random:SEED or a file of host names")
    q.set_defaults(handler=run_whatif)

    q = ps.add_parser("export", help="versioned JSON + CSV files (matrices, link loads) of every "
                                     "region and kind")
    common(q, topology="optional", select=False)
    q.add_argument("-o", "--output", required=True, help="directory to write")
    q.set_defaults(handler=run_export)

    q = ps.add_parser("show", help="summary: ranks, hosts, regions, kinds, what is missing")
    common(q, topology="")
    q.set_defaults(handler=run_show)


def topology(spec: str):
    """H4's resolver (IB, Slurm, emulated, SimGrid) when present, else SimGrid platforms."""
    try:
        from ..profile.resolve import resolve_topology
    except ImportError:
        from ..profile.topology import load_topology as resolve_topology
    return resolve_topology(spec)


def _run_record(out_dir: str) -> tuple[str, dict]:
    """The path of the profile's run.PROFILE_MACHINE and what it says ({} when absent or
    unreadable): the platform (sim) or emulated cluster (netns) it ran on, and that cluster."""
    import json
    from .run import PROFILE_MACHINE
    path = os.path.join(out_dir, PROFILE_MACHINE)
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        doc = {}
    return path, doc if isinstance(doc, dict) else {}


def _recorded_machine(out_dir: str) -> str | None:
    """The platform or emulated cluster a profile ran on, None when it does not say."""
    platform = _run_record(out_dir)[1].get("platform")
    return None if platform is None else str(platform)


def _ran_elsewhere(out_dir: str, topology_given: str | None) -> str | None:
    """The machine the profile ran on, where --topology names another one."""
    ran_on = _recorded_machine(out_dir)
    return ran_on if topology_given and ran_on and ran_on != topology_given else None


def _machine_topology(args):
    """--topology, else the machine the profile ran on: an emulated cluster as the run saw it
    (saved in the profile, so it draws after `colltune cluster down`), else by name."""
    if args.topology:
        return topology(args.topology)
    machine = _run_machine(args.out_dir)
    path, doc = _run_record(args.out_dir)
    if doc.get("cluster"):
        from ..cluster.state import Cluster, ClusterError
        from ..profile.emulated import emulated_topology
        try:
            return emulated_topology(Cluster.from_json(doc["cluster"], path))
        except ClusterError as exc:
            from ..errors import InputError
            raise InputError(str(exc)) from None
    return topology(machine)


def _run_machine(out_dir: str) -> str:
    """The machine the profile ran on, for a missing --topology; an error when it does not say."""
    from ..errors import InputError
    machine = _recorded_machine(out_dir)
    if machine is None:
        raise InputError(f"{out_dir}: --topology is needed: the profile does not say which machine "
                         f"it ran on (`colltune run --profile` records it on the sim and netns backends)")
    return machine


def _load(out_dir: str):
    from ..errors import InputError
    from ..profile.counts import load_profile
    if not os.path.isdir(out_dir):
        raise InputError(f"{out_dir}: no such profile directory")
    return load_profile(out_dir)


def _guard(fn):
    """Topology and profile errors become colltune input errors (one line, no traceback)."""
    def wrapped(args, cli) -> int:
        from ..errors import InputError
        from ..profile.topology import TopologyError
        try:
            return fn(args, cli)
        except BrokenPipeError:               # the reader went away (| head): not an input error
            raise
        except OSError as exc:                # the file and the reason, not "[Errno 2] ..."
            where = f"{exc.filename}: " if exc.filename else ""
            raise InputError(f"{where}{exc.strerror or exc}") from None
        except (TopologyError, ValueError) as exc:
            raise InputError(str(exc)) from None
    return wrapped


@_guard
def run_report(args, cli) -> int:
    from ..profile.report import render, traffic_from_profile
    topo = _machine_topology(args)
    dirs = [args.out_dir] + ([args.compare] if args.compare else [])
    if len(args.label) > len(dirs):
        from ..errors import InputError
        raise InputError(f"--label given {len(args.label)} times for {len(dirs)} profile(s): one "
                         f"per profile ({' '.join(map(repr, args.label[len(dirs):]))} would be unused)")
    labels = list(args.label) + [os.path.basename(os.path.normpath(d)) for d in dirs[len(args.label):]]
    profs = [_load(d) for d in dirs]
    traffics = [traffic_from_profile(p, args.region, args.kind, label, d) for p, d, label in zip(profs, dirs, labels)]
    for t, d in zip(traffics, dirs):             # drawn on another machine than it ran on
        ran_on = _ran_elsewhere(d, args.topology)
        if ran_on:
            t.notes.insert(0, f"recorded on {ran_on}, drawn on {args.topology} (--topology): "
                              f"its hosts are matched by name")
    render(topo, traffics, args.output, args.title, args.colour_by)
    print(os.path.abspath(args.output))
    if args.export:
        from ..profile import files
        for path in files.write_traffic(profs[0], topo, args.export):
            print(path)
    return 0


@_guard
def run_whatif(args, cli) -> int:
    from ..profile.whatif import format_whatif, whatif
    topo = _machine_topology(args)
    prof = _load(args.out_dir)
    hb, hm, hosts = prof.host_matrix(region=args.region, kind=args.kind)
    ran_on = _ran_elsewhere(args.out_dir, args.topology)
    if ran_on:
        # as report says: its 'current' placement is the run's host names on another machine
        print(f"note: recorded on {ran_on}, placed on {args.topology} (--topology): 'current' is "
              f"its hosts matched by name there, not a placement it ran on")
    print(format_whatif(whatif(topo, hb, hm, list(hosts), args.place)))
    return 0


@_guard
def run_export(args, cli) -> int:
    from ..profile import files
    # as report: --topology, else the machine the run recorded (sim, netns), else none
    topo = _machine_topology(args) if args.topology or _recorded_machine(args.out_dir) else None
    for path in files.write_traffic(_load(args.out_dir), topo, args.output):
        print(path)
    return 0


@_guard
def run_show(args, cli) -> int:
    from ..profile.draw_svg import fmt_bytes
    prof = _load(args.out_dir)
    known = [h for h in prof.hosts if h]
    hosts = len(set(known))
    print(f"{args.out_dir}: {prof.size} rank{'s' * (prof.size != 1)} on {hosts} "
          f"host{'s' * (hosts != 1)}")
    if prof.missing:
        print(f"MISSING: {len(prof.missing)} rank file(s): {', '.join(map(str, prof.missing))}")
    # every region and kind, or those --region / --kind name (checked by matrix)
    regions = prof.regions() if args.region == "run" else [args.region]
    for r in regions:
        for k in [args.kind] if args.kind else prof.kinds():
            b, m = prof.matrix(region=r, kind=k)
            vis = prof.visibility(r, k)
            if b.sum() or m.sum() or vis == "not visible":
                print(f"  {r:<16} {k:<22} {vis:<12} {fmt_bytes(b.sum()):>28} {m.sum():>10.0f} messages")
    calls = {k: v for k, v in prof.comm_calls.items() if k[0] in regions and args.kind in (None, k[1])}
    if calls:
        print("library collectives by communicator size (calls summed over the ranks):")
        for (r, k, n), c in sorted(calls.items(), key=lambda kv: (prof.region_order.index(kv[0][0])
                                                                 if kv[0][0] in prof.region_order else 0,
                                                                 kv[0][1], kv[0][2])):
            print(f"  {r:<16} {k:<22} {n:>5} ranks {c:>10} rank-calls")
    for note in prof.notes:
        print(f"note: {note}")
    return 0
