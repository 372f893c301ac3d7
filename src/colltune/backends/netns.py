"""Real Open MPI or MPICH across the hosts of an emulated cluster (`colltune cluster up`).

Everything of the local backend is reused (build, providers and forcing, labels
of what ran, process-group kill, leftover ranks killed, one launch at a time);
only where the launcher runs and how it places ranks differ. The launcher runs
on the first host (inside its namespaces, like a job started on its first
node) with a hostfile of ``nodes`` hosts x ``ppn`` slots and the cluster's ssh
stand-in as remote shell, so every host gets its own daemon (prted / hydra
proxy) and the library sees as many nodes as hosts. Traffic between hosts is
pinned to the bridge (eth0, TCP): Open MPI ob1 with btl self,sm,tcp; MPICH's
UCX with UCX_TLS=tcp — left alone, UCX takes the namespaces for one machine and
uses shared memory (sysv/cma) between "hosts". Shared memory stays within a host.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from .. import cluster as emu
from ..errors import BackendError, ConfigError
from . import BACKENDS
from .base import Launch
from .local import OVERSUBSCRIBE_ARGS, LocalBackend, host_cores, max_ranks, oversubscribed


def _openmpi(c: emu.Cluster, hostfile: str, nprocs: int) -> list[str]:
    iface = c.hosts[0].iface
    args = ["--prtemca", "plm_ssh_agent", c.agent, "--prtemca", "oob_tcp_if_include", iface,
            "--hostfile", hostfile,
            # Every host sees all cores: binding would put the ranks of all hosts on core 0, 1...
            "--bind-to", "none",
            "--mca", "pml", "ob1", "--mca", "btl", "self,sm,tcp",
            "--mca", "btl_tcp_if_include", iface]
    if oversubscribed(nprocs):      # each host thinks it has all cores: say they are shared
        args += ["--mca", "mpi_yield_when_idle", "1"]
    return args


def _mpich(c: emu.Cluster, hostfile: str, nprocs: int) -> list[str]:
    iface = c.hosts[0].iface
    args = ["-launcher", "ssh", "-launcher-exec", c.agent, "-f", hostfile, "-iface", iface,
            "-genv", "MPIR_CVAR_CH4_NETMOD", "ucx",
            "-genv", "UCX_TLS", "tcp", "-genv", "UCX_NET_DEVICES", iface]
    if oversubscribed(nprocs):      # the hosts share the cores: throttle the polling
        args += list(OVERSUBSCRIBE_ARGS["mpich"])
    return args


# library -> (hostfile line for (host, slots), launcher options)
PLACEMENT: dict[str, tuple[Callable[[str, int], str], Callable[..., list[str]]]] = {
    "openmpi": (lambda host, n: f"{host} slots={n}", _openmpi),
    "mpich": (lambda host, n: f"{host}:{n}", _mpich),
}


def find_cluster(name: str | None) -> emu.Cluster:
    """Cluster ``name``, or the only one that is up when name is None."""
    if name is None:
        up = emu.names()
        if len(up) != 1:
            raise BackendError(
                "the netns backend needs an emulated cluster: " +
                ("none is up (`colltune cluster up --hosts 2`)" if not up else
                 f"several are up ({', '.join(up)}): choose one with --platform"))
        name = up[0]
    c = emu.load(name)
    if c is None:
        raise BackendError(f"no emulated cluster {name!r} (--platform); up: "
                           f"{', '.join(emu.names()) or 'none'} (`colltune cluster up`)")
    bad = emu.problems(c)
    if bad:
        raise BackendError(f"emulated cluster {name!r} is not healthy: {'; '.join(bad)} "
                           f"(`colltune cluster down --name {name}` and up again)")
    return c


def cluster_setting(settings) -> str | None:
    """The emulated cluster the platform setting names, None for the only one up. A
    simulated platform there (a bundled name or an XML file, e.g. a config file's for
    the sim backend) names no cluster: from a config file or the environment it is left
    to the sim backend; given on the command line with netns, it is an error."""
    source = settings.source_of("platform")
    value = settings.platform
    if source == "default":
        return None
    from .. import platforms
    if platforms.names_a_platform(value):
        if source == "command line":
            raise ConfigError(f"--platform {value}: a simulated platform; with the netns "
                              f"backend --platform names an emulated cluster (`colltune cluster "
                              f"status`), or leave it out for the only one up")
        return None
    return value


@BACKENDS.register("netns")
class NetnsBackend(LocalBackend):
    name = "netns"
    emulated_hosts = True
    description = ("real Open MPI or MPICH across emulated hosts (network namespaces; "
                   "`colltune cluster up`, --platform names the cluster)")

    def __init__(self, settings, platform: str | None = None):
        super().__init__(settings, platform)
        self.cluster_name = platform or cluster_setting(settings)
        self.cluster: emu.Cluster | None = None

    def prepare(self) -> None:
        if self.mpi_name not in PLACEMENT:
            raise BackendError(f"the netns backend runs {' or '.join(PLACEMENT)}, "
                               f"not {self.mpi_name!r} (setting mpi)")
        self.cluster = find_cluster(self.cluster_name)
        super().prepare()

    def max_nodes(self) -> int:
        return len(self.cluster.hosts)

    def provenance(self) -> dict[str, Any]:
        c, cores = self.cluster, host_cores()
        return {**super().provenance(), "backend": self.name, "platform": c.name,
                "hosts": len(c.hosts), "subnet": c.subnet,
                "bandwidth": c.bandwidth, "latency": c.latency,
                "note": (f"{len(c.hosts)} emulated hosts (network namespaces) sharing one "
                         f"machine's {cores} cores: layouts with more than {cores} ranks in "
                         f"all oversubscribe them and their timings are noise")}

    def check_layout(self, launch: Launch) -> None:
        c = self.cluster
        if not 1 <= launch.nodes <= len(c.hosts):
            raise BackendError(f"layout {launch.nodes}x{launch.ppn}: cluster {c.name!r} has "
                               f"{len(c.hosts)} hosts")
        if not 1 <= launch.nodes * launch.ppn <= max_ranks():
            raise BackendError(f"layout {launch.nodes}x{launch.ppn}: at most {max_ranks()} ranks "
                               f"in all on this machine ({host_cores()} cores)")

    def launch_prefix(self) -> list[str]:
        return emu.exec_argv(self.cluster, self.cluster.hosts[0].name)

    def placement_args(self, launch: Launch, workdir: str) -> list[str]:
        line, options = PLACEMENT[self.impl.name]
        hostfile = os.path.join(workdir, "hostfile")
        with open(hostfile, "w") as fh:
            fh.writelines(line(h.name, launch.ppn) + "\n" for h in self.cluster.hosts[:launch.nodes])
        return options(self.cluster, hostfile, launch.nodes * launch.ppn)
