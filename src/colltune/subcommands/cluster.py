"""`colltune cluster up|status|down|exec`: the emulated cluster (docs/cluster.md)."""
from __future__ import annotations

import json
import subprocess
import sys


def add_parser(sub) -> None:
    from ..cluster import DEFAULT_NAME, DEFAULT_SUBNET
    p = sub.add_parser("cluster", help="emulated hosts on this machine (network namespaces) "
                                       "for the netns backend")
    cs = p.add_subparsers(dest="cluster_command", required=True)
    name_help = f"cluster name (default {DEFAULT_NAME}; interface names derive from it)"
    u = cs.add_parser("up", help="create the hosts, bridge and shaping (root)")
    u.add_argument("--hosts", type=int, required=True, help="number of emulated hosts")
    u.add_argument("--name", default=DEFAULT_NAME, help=name_help)
    u.add_argument("--subnet", default=DEFAULT_SUBNET, help="private IPv4 subnet of the hosts")
    u.add_argument("--bandwidth", help="egress rate of every host, tc syntax (e.g. 1gbit)")
    u.add_argument("--latency", help="added one-way delay, tc syntax (e.g. 50us; needs netem)")
    s = cs.add_parser("status", help="hosts, addresses, shaping, health")
    s.add_argument("--name", help="cluster name (default: every cluster that is up)")
    s.add_argument("--json", action="store_true")
    d = cs.add_parser("down", help="remove everything `up` made (idempotent)")
    d.add_argument("--name", default=DEFAULT_NAME, help=name_help)
    e = cs.add_parser("exec", help="run a command on one emulated host")
    e.add_argument("--name", default=DEFAULT_NAME, help=name_help)
    e.add_argument("host", help="host name or address")
    e.add_argument("argv", nargs="+", help="command (put -- before options of the command)")
    p.set_defaults(handler=handle)


def _cluster(name: str):
    from ..cluster import ClusterError, load
    c = load(name)
    if c is None:
        raise ClusterError(f"no emulated cluster {name!r} (`colltune cluster up --hosts N "
                           f"--name {name}`)")
    return c


def handle(args, cli) -> int:
    from .. import cluster
    cmd = args.cluster_command
    if cmd == "up":
        c = cluster.up(args.hosts, args.name, args.subnet, args.bandwidth, args.latency)
        print(f"cluster {c.name}: {len(c.hosts)} hosts up on bridge {c.bridge} ({c.subnet})")
        for h in c.hosts:
            print(f"  {h.name:<10} {h.ip}")
        return 0
    if cmd == "down":
        found = cluster.down(args.name)
        print(f"cluster {args.name}: {'removed' if found else 'was not up (nothing to remove)'}")
        return 0
    if cmd == "exec":
        return subprocess.call(cluster.exec_argv(_cluster(args.name), args.host) + args.argv)
    names = [args.name] if args.name else cluster.names()
    report = []
    for name in names:
        c = _cluster(name)
        report.append({**c.to_json(), "problems": cluster.problems(c)})
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    elif not report:
        print("no emulated cluster is up")
    for r in [] if args.json else report:
        shaping = ", ".join(f"{k} {r[k]}" for k in ("bandwidth", "latency") if r[k]) or "none"
        print(f"cluster {r['name']}: {len(r['hosts'])} hosts, bridge {r['bridge']} "
              f"{r['bridge_ip']} ({r['subnet']}), shaping: {shaping}, "
              f"{'healthy' if not r['problems'] else 'PROBLEMS'}")
        for h in r["hosts"]:
            print(f"  {h['name']:<10} {h['ip']}")
        for p in r["problems"]:
            print(f"  problem: {p}")
    return 1 if any(r["problems"] for r in report) else 0
