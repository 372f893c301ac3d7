"""The emulated cluster itself (no MPI): namespaces, hostnames, bridge, state file,
idempotent up/down (also after a failed up or a lost state file), clear errors.
Every cluster made here is removed by its fixture, whatever happens."""
from __future__ import annotations

import json
import os
import subprocess
import unittest.mock
import sys

import pytest

from conftest import run_cli

from colltune import cluster
from colltune.cluster import ClusterError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

# Names and subnets of these tests only (other tests and users may have clusters up).
NAME, SUBNET = "ctt", "10.213.71.0/24"


def _gone(name: str) -> list[str]:
    """What of cluster `name` still exists (empty: all removed)."""
    left = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [line.split()[0] for line in netns.splitlines() if line.startswith(f"{name}-n")]
    left += [n for n in os.listdir("/sys/class/net") if n.startswith(f"{name}-")]
    left += [p for p in (cluster.state_path(name), f"/etc/netns/{name}-n0") if os.path.exists(p)]
    return left


@pytest.fixture(scope="module")
def two():
    c = cluster.up(2, NAME, SUBNET)
    try:
        yield c
    finally:
        cluster.down(NAME)
        assert not _gone(NAME)


def test_hosts_have_their_own_hostname_address_and_names(two):
    assert [h.name for h in two.hosts] == ["ctt-n0", "ctt-n1"]
    for h in two.hosts:
        out = cluster.exec_in(two, h.name, ["sh", "-c", "hostname; cat /proc/sys/kernel/hostname; "
                                            "ip -o -4 addr show dev eth0; getent hosts ctt-n0 ctt-n1"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        assert out[0] == out[1] == h.name
        assert f"inet {h.ip}/24" in out[2]
        assert {ln.split()[1]: ln.split()[0] for ln in out[3:]} == \
               {x.name: x.ip for x in two.hosts}
        # the ssh stand-in reaches the same host, by name and by address
        for target in (h.name, h.ip):
            via = subprocess.run([two.agent, "-x", target, "hostname", "&&", "echo", "$0"],
                                 capture_output=True, text=True, check=True).stdout.split()
            assert via[0] == h.name
    assert os.uname().nodename not in {h.name for h in two.hosts}   # this machine untouched
    # hosts reach each other and the machine through the bridge
    probe = [sys.executable, "-c", "import socket; s=socket.create_connection(('ctt-n1', 7), 2)"]
    unreachable = cluster.exec_in(two, "ctt-n0", probe, capture_output=True, text=True)
    assert "ConnectionRefused" in unreachable.stderr     # a RST from ctt-n1: the path exists
    ports = subprocess.run(["ip", "-br", "link", "show", "master", two.bridge],
                           capture_output=True, text=True).stdout.splitlines()
    assert sorted(p.split("@")[0] for p in ports if p.split()[1] == "UP") == ["ctt-v0", "ctt-v1"]


def test_up_is_idempotent_and_status_reports_health(two):
    again = cluster.up(2, NAME, SUBNET)
    assert again.to_json() == two.to_json()
    with pytest.raises(ClusterError, match="different parameters"):
        cluster.up(3, NAME, SUBNET)
    st = json.loads(run_cli("cluster", "status", "--name", NAME, "--json").stdout)
    assert st[0]["problems"] == [] and len(st[0]["hosts"]) == 2
    # break one host: status names the problem and fails
    subprocess.run(["umount", two.hosts[1].uts], check=True)
    try:
        bad = run_cli("cluster", "status", "--name", NAME, check=False)
        assert bad.returncode == 1 and "ctt-n1: UTS namespace file" in bad.stdout
    finally:
        cluster.down(NAME)
        cluster.up(2, NAME, SUBNET)


def test_down_is_idempotent_also_after_failed_up_or_lost_state():
    name, subnet = "ctd", "10.213.79.0/24"   # its own subnet: modules run side by side (make test)
    try:
        # a failing up (bad rate on the second step of host 0) leaves nothing behind
        with pytest.raises(ClusterError, match="illegal value"):
            cluster.up(2, name, subnet, bandwidth="bogus")
        assert not _gone(name)
        out = run_cli("cluster", "up", "--hosts", "2", "--name", name, "--subnet", subnet).stdout
        assert "ctd-n1" in out
        os.remove(cluster.state_path(name))            # state lost: down still finds the hosts
        assert cluster.down(name) is True
        assert not _gone(name)
        assert "was not up" in run_cli("cluster", "down", "--name", name).stdout
    finally:
        cluster.down(name)


def test_clear_errors(two):
    with pytest.raises(ClusterError, match="overlaps 10.213.71.1/24 on ctt-br"):
        cluster.up(1, "cto", "10.213.71.128/25")
    with pytest.raises(ClusterError, match="cluster name"):
        cluster.up(1, "Bad_Name", "10.213.75.0/24")
    with pytest.raises(ClusterError, match="private range"):
        cluster.up(1, "ctp", "8.8.8.0/24")
    with pytest.raises(ClusterError, match="expected a time such as 50us"):
        cluster.up(1, "ctq", "10.213.75.0/24", latency="fast")
    with pytest.raises(ClusterError, match="no host"):
        cluster.exec_argv(two, "nope")
    # not root, and missing tools: said before anything is touched
    # (a real unprivileged user, when it can read this checkout: a clone in a
    # private mktemp folder it cannot, then the in-process euid stands in)
    nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             sys.executable, "-c", "import colltune.cli"], capture_output=True)
    if nobody.returncode == 0:
        nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 sys.executable, "-m", "colltune.cli", "cluster", "up", "--hosts",
                                 "1", "--name", "ctr"], capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert nobody.returncode == 2 and "needs root" in nobody.stderr
    else:
        with unittest.mock.patch("os.geteuid", return_value=65534):
            with pytest.raises(ClusterError, match="needs root"):
                cluster.up(1, "ctr", "10.213.77.0/24")
    bare = run_cli("cluster", "up", "--hosts", "1", "--name", "ctr", check=False,
                   env={"PATH": "/nonexistent"})
    assert bare.returncode == 2 and "missing tools: ip (Debian package iproute2)" in bare.stderr
    assert not _gone("ctr")
    # the agent refuses hosts of other clusters
    stray = subprocess.run([two.agent, "other-n0", "true"], capture_output=True, text=True)
    assert stray.returncode == 255 and "no host other-n0" in stray.stderr


def test_netns_cluster_setting_leaves_a_simulated_platform_to_the_sim_backend(tmp_path):
    """One `platform` setting serves both backends: a config file's simulated platform
    (an XML path) had been taken for the netns cluster's name ('use 1-9 lower-case
    letters'), and the only cluster up never applied (an HPC centre engineer's review)."""
    from colltune import config
    from colltune.backends.netns import cluster_setting
    from colltune.errors import ConfigError
    cfg = tmp_path / "colltune.toml"
    cfg.write_text('platform = "plat/mine.xml"\n')
    assert cluster_setting(config.load({}, {}, str(cfg))) is None
    assert cluster_setting(config.load({}, {"COLLTUNE_PLATFORM": "dragonfly"})) is None
    assert cluster_setting(config.load({}, {})) is None
    assert cluster_setting(config.load({"platform": "ct"}, {})) == "ct"
    with pytest.raises(ConfigError, match="--platform small: a simulated platform; with the netns"):
        cluster_setting(config.load({"platform": "small"}, {}))
