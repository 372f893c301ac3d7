"""Emulated cluster: several hosts on this machine (network + UTS namespaces, a
bridge, optional tc shaping), for real MPI launches across "nodes" (backend
``netns``) and for other tools that need several hosts (e.g. one slurmd each).

    from colltune import cluster
    c = cluster.up(2, name="ct", bandwidth="1gbit")   # root; idempotent
    cluster.exec_in(c, "ct-n1", ["hostname"])          # runs inside host ct-n1
    cluster.problems(c)                                # [] when healthy
    cluster.down("ct")                                 # removes everything, idempotent
    cluster.load("ct")                                 # the recorded Cluster, or None

See docs/cluster.md.
"""
from .agent import exec_argv, exec_in, popen_in
from .net import DEFAULT_SUBNET, check_host, down, problems, up
from .state import DEFAULT_NAME, Cluster, ClusterError, Host, load, names, state_path

__all__ = ["Cluster", "ClusterError", "DEFAULT_NAME", "DEFAULT_SUBNET", "Host", "check_host",
           "down", "exec_argv", "exec_in", "load", "names", "popen_in", "problems", "state_path",
           "up"]
