"""`colltune run` on the netns backend: real Open MPI / MPICH across the hosts of an
emulated cluster (`colltune cluster up`); the local command, launched on the first
host with the netns backend's placement and transport."""
from __future__ import annotations

import os

from . import RUNNERS
from .base import OMPI_MONITORING, layout
from .local import LocalRunner


@RUNNERS.register("netns")
class NetnsRunner(LocalRunner):
    name = "netns"
    hosts = 10**6             # checked against the cluster below

    def world_layout(self) -> tuple[int, int]:   # its --layout is required, hosts checked there
        return layout(self.args, 10**6, 10**6)[:2]

    def machine(self) -> dict | None:
        """The emulated cluster the run used (the only one up if unnamed), as it is now: the
        profile is drawn on it after `colltune cluster down` too (an analyst's review)."""
        from ..backends.netns import cluster_setting, find_cluster
        from ..cluster import state as cstate
        name = find_cluster(cluster_setting(self.settings)).name
        doc = {"backend": self.name, "platform": name}
        try:
            cluster = cstate.load(name)
        except cstate.ClusterError:
            cluster = None
        if cluster is not None:
            doc["cluster"] = cluster.to_json()
        return doc

    def command(self, env, program, scratch):
        from .. import cluster as emu
        from ..backends.netns import PLACEMENT, cluster_setting, find_cluster
        from ..errors import ConfigError
        args, settings = self.args, self.settings
        cmd, full_env, ranks = super().command(env, program, scratch)
        if args.link_flags:
            return cmd, full_env, ranks
        impl_name = settings.mpi
        if impl_name not in PLACEMENT:
            raise ConfigError(f"the netns backend runs {' or '.join(PLACEMENT)}, not {impl_name!r}")
        c = find_cluster(cluster_setting(settings))
        if not args.layout:
            raise ConfigError(f"the netns backend needs --layout NODESxPPN (cluster {c.name!r} has "
                              f"{len(c.hosts)} hosts)")
        nodes, ppn, ranks = layout(args, 10**6, len(c.hosts))
        if nodes > len(c.hosts):
            raise ConfigError(f"--layout {args.layout}: cluster {c.name!r} has {len(c.hosts)} hosts")
        line, options = PLACEMENT[impl_name]
        hostfile = os.path.join(scratch, "hostfile")
        with open(hostfile, "w") as fh:
            fh.writelines(line(h.name, ppn) + "\n" for h in c.hosts[:nodes])
        placement = options(c, hostfile, ranks)
        if OMPI_MONITORING[-2] in cmd:            # monitoring is a pml component: let it load
            placement = ["ob1,monitoring" if a == "ob1" else a for a in placement]
        n = cmd.index("-n")                       # the local command: launcher, preload, -n N, ...
        cmd = [*emu.exec_argv(c, c.hosts[0].name), cmd[0], *cmd[1:n], *placement,
               "-n", str(ranks), *cmd[n + 2:]]
        return cmd, full_env, ranks
