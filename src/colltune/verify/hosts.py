"""Where verify's launches run: this host, or the hosts of an emulated cluster
(`colltune cluster up`, docs/cluster.md).

On emulated hosts the launcher runs on the cluster's first host with the netns
backend's placement (colltune.backends.netns: its hostfile lines and launcher
options, the cluster's ssh stand-in, traffic pinned to the bridge), so the
library and the interposer see ``nodes`` nodes of ``ranks / nodes`` ranks.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, field

from ..errors import ConfigError


@dataclass
class Placement:
    impl: object
    nodes: int = 1
    cluster: object | None = None          # colltune.cluster Cluster when nodes > 1
    _dir: str = field(default="", repr=False)

    @classmethod
    def emulated(cls, impl, nodes: int, ranks: int, cluster_name: str | None) -> "Placement":
        """``nodes`` hosts of the emulated cluster ``cluster_name`` (None: the only
        one up), ``ranks / nodes`` ranks on each."""
        from ..backends.netns import PLACEMENT, find_cluster
        if impl.name not in PLACEMENT:
            raise ConfigError(f"--backend netns runs {' or '.join(PLACEMENT)}, not {impl.name}")
        if nodes < 1 or ranks % nodes:
            raise ConfigError(f"--ranks {ranks} cannot be spread evenly over --hosts {nodes}")
        c = find_cluster(cluster_name)
        if nodes > len(c.hosts):
            raise ConfigError(f"--hosts {nodes}: emulated cluster {c.name!r} has "
                              f"{len(c.hosts)} hosts")
        return cls(impl, nodes, c)

    def ppn(self, ranks: int) -> int:
        return ranks // self.nodes

    def describe(self, ranks: int) -> str:
        if self.cluster is None:
            return f"{ranks} ranks on this host"
        return (f"{ranks} ranks on {self.nodes} emulated hosts of cluster {self.cluster.name} "
                f"({self.ppn(ranks)} per host)")

    def command(self, ranks: int, extra: list[str] = ()) -> list[str]:
        """The launch command up to the program: launcher, ``extra`` options,
        placement, ``-n ranks``."""
        from ..backends.local import oversubscribe_args
        if self.cluster is None:
            return [self.impl.launcher, *extra, "-n", str(ranks),
                    *oversubscribe_args(self.impl, ranks)]
        from ..backends.netns import PLACEMENT
        from ..cluster import exec_argv
        line, options = PLACEMENT[self.impl.name]
        if not self._dir:
            self._dir = tempfile.mkdtemp(prefix="colltune-verify-hosts-")
            atexit.register(shutil.rmtree, self._dir, True)
        hostfile = os.path.join(self._dir, f"hostfile-{ranks}")
        with open(hostfile, "w") as fh:
            fh.writelines(line(h.name, self.ppn(ranks)) + "\n"
                          for h in self.cluster.hosts[:self.nodes])
        return [*exec_argv(self.cluster, self.cluster.hosts[0].name), self.impl.launcher,
                *extra, *options(self.cluster, hostfile, ranks), "-n", str(ranks)]
