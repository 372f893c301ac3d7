"""Running commands "on" an emulated host, from Python and from launchers.

``exec_argv(cluster, host)`` is the prefix that runs a command inside the
host's UTS namespace (its hostname) and network namespace (its eth0 and
/etc/hosts): ``nsenter --uts=<file> ip netns exec <host>``. Both tools exec
the command, so its pid and process group are those of the prefix (a launcher
can be killed as a group as usual).

The ssh stand-in (``<state dir>/rsh``) has the calling convention of ssh —
``rsh [options] HOST COMMAND...`` — so MPI launchers use it in place of ssh
(Open MPI: ``--prtemca plm_ssh_agent``, MPICH Hydra: ``-launcher-exec``). The
command runs under ``sh -c`` like a remote shell's, and inherits the caller's
environment (every host sees the same file system, like a cluster with shared
home directories).
"""
from __future__ import annotations

import os
import shlex
import subprocess

from .state import Cluster

AGENT = """#!/bin/sh
# ssh stand-in of colltune emulated cluster {name}: rsh [ssh options] HOST COMMAND...
# (written by `colltune cluster up`; removed by `colltune cluster down`)
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # ssh options that take an argument
    -*) shift ;;
    *) break ;;
  esac
done
host=$1; shift
case "$host" in
{cases}
  *) echo "colltune cluster {name}: no host $host (hosts: {names})" >&2; exit 255 ;;
esac
exec nsenter --uts="$uts" ip netns exec "$ns" sh -c "$*"
"""


def write_agent(cluster: Cluster) -> str:
    cases = "\n".join(f"  {h.name}|{h.ip}) ns={shlex.quote(h.name)}; uts={shlex.quote(h.uts)} ;;"
                      for h in cluster.hosts)
    text = AGENT.format(name=cluster.name, cases=cases,
                        names=" ".join(h.name for h in cluster.hosts))
    tmp = cluster.agent + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, cluster.agent)
    return cluster.agent


def exec_argv(cluster: Cluster, host: str) -> list[str]:
    """The command prefix that runs a program on ``host`` (name or address)."""
    h = cluster.host(host)
    return ["nsenter", f"--uts={h.uts}", "ip", "netns", "exec", h.name]


def exec_in(cluster: Cluster, host: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(argv) on ``host``; keyword arguments go to subprocess.run."""
    return subprocess.run(exec_argv(cluster, host) + list(argv), **kwargs)


def popen_in(cluster: Cluster, host: str, argv: list[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen(argv) on ``host`` (for daemons: slurmd, servers)."""
    return subprocess.Popen(exec_argv(cluster, host) + list(argv), **kwargs)
