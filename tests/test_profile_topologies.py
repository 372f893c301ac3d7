"""Topologies beyond SimGrid platforms (issue 17, 2b-2d): an InfiniBand fabric from real
``ibnetdiscover`` + forwarding-table dumps (regenerated live with ibsim + opensm, and
every route checked hop by hop against the fabric's own ``ibtracert``), Slurm
``topology.conf`` / ``topology.yaml`` trees, the emulated cluster of ``colltune cluster``,
``resolve_topology`` and the host-name mapping. Bad input: errors name file:line.
The IB tests fail, never skip, without ibsim/opensm/infiniband-diags (scripts/setup.sh
installs them).
"""
from __future__ import annotations

import os
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from colltune.profile import TopologyError, link_loads
from colltune.profile import ibsim
from colltune.profile.ib import ib_topology, parse_lfts

DATA = Path(__file__).parent / "data" / "profile"
IB = DATA / "ib"
_END = re.compile(r"^(.*)\[(\d+)\] -> (.*)\[(\d+)\]$")


def _ib(d: Path):
    return ib_topology(d / "ibnetdiscover.txt", d / "lfts.txt")


def _hops(topo, a: str, b: str) -> list[tuple[int, str, int]]:
    """A route as (out port, GUID of the node reached, in port) per hop, like ibtracert."""
    out = []
    for link in topo.route(a, b):
        m = _END.match(link.sg_name)
        out.append((int(m.group(2)), topo.params["guids"][m.group(3)], int(m.group(4))))
    return out


def _check_against_tracert(topo, tracert_text: str) -> int:
    """Every route whose pair ibtracert traced equals the fabric's path, hop by hop."""
    trace = ibsim.parse_tracert(tracert_text)
    lids = topo.params["lids"]
    n = 0
    for a in topo.hosts:
        for b in topo.hosts:
            if a == b:
                assert topo.route(a, b) == ()
                continue
            if (lids[a], lids[b]) not in trace:
                continue
            assert _hops(topo, a, b) == trace[(lids[a], lids[b])], (a, b)
            assert topo.route(a, b)[-1].dst == b and topo.route(a, b)[0].src == a
            n += 1
    return n


def test_ib_live_regeneration_matches_fabric(tmp_path):
    assert not ibsim.missing_tools(), "install with: bash scripts/setup.sh"
    files = ibsim.generate(IB / "fattree.net", tmp_path, routing="ftree", tracert="some")
    fresh = _ib(tmp_path)
    assert _check_against_tracert(fresh, files["tracert"].read_text()) == 2 * 2 * 15 - 2
    committed = _ib(IB)
    assert fresh.hosts == committed.hosts and list(fresh.links) == list(committed.links)
    for a in fresh.hosts:  # the committed dumps are what this opensm produces
        for b in fresh.hosts:
            assert fresh.route_ids(a, b) == committed.route_ids(a, b)


def test_ib_live_updn_with_lmc1(tmp_path):
    """opensm's updn engine with LMC 1 (two LIDs per port; ftree refuses LMC > 0): the
    routes to every base LID are the fabric's, and each is up*/down* (never up after down)."""
    assert not ibsim.missing_tools(), "install with: bash scripts/setup.sh"
    files = ibsim.generate(IB / "fattree.net", tmp_path, routing="updn", lmc=1, tracert="some")
    t = _ib(tmp_path)
    assert t.params["lmc"] == 1 and all(lid % 2 == 0 for lid in t.params["lids"].values())
    assert _check_against_tracert(t, files["tracert"].read_text()) == 58
    for a in t.hosts:
        for b in t.hosts:
            kinds = "".join("u" if l.kind == "up" else "d" for l in t.route(a, b))
            assert re.fullmatch("u*d*", kinds), (a, b, kinds)


def test_ib_committed_dumps_model():
    t = _ib(IB)
    assert t.kind == "INFINIBAND" and len(t.hosts) == 16
    assert t.hosts[:3] == ["node01", "node02", "node03"]  # "node01 HCA-1", "node02 mlx5_0"
    assert [(n.id, n.level) for n in t.switches()] == [
        ("leaf1", 1), ("leaf2", 1), ("leaf3", 1), ("leaf4", 1), ("spine1", 2), ("spine2", 2)]
    assert len(t.links) == 2 * (16 + 4 * 2 * 2)
    host_up = t.links["node01 -> leaf1"]
    assert (host_up.kind, host_up.bandwidth) == ("up", 4 * 25e9 / 8)          # 4xEDR
    spine = t.links["leaf1 -> spine1 #1"]                                      # parallel cables
    assert (spine.kind, spine.bandwidth, spine.sg_name) == ("up", 4 * 50e9 / 8, "leaf1[6] -> spine1[2]")
    assert t.links["spine1 -> leaf1 #1"].kind == "down"
    assert t.params["guids"]["node01 HCA-1"] == "0000000000100000"
    assert _check_against_tracert(t, (IB / "tracert.txt").read_text()) == 240


def test_ib_ftree_spreads_like_dmodk():
    """opensm's ftree engine: every destination is reached through one spine cable
    whatever the source (its down path), the 4 hosts of a leaf use 4 distinct down
    cables, and each leaf's 4 up cables carry the same number of routes."""
    t = _ib(IB)
    up, down_of = Counter(), defaultdict(set)
    for a in t.hosts:
        for b in t.hosts:
            r = t.route(a, b)
            assert len(r) in (0, 2, 4)
            if len(r) == 4:
                up[r[1].id] += 1
                down_of[b].add(r[2].id)
    assert len(up) == 16 and set(up.values()) == {12}
    assert all(len(s) == 1 for s in down_of.values())
    for leaf in range(4):
        hosts = t.hosts[4 * leaf: 4 * leaf + 4]
        assert len({next(iter(down_of[h])) for h in hosts}) == 4
    # link_loads works unchanged: an all-to-all of 1 MiB loads every up cable equally
    n = len(t.hosts)
    B = np.full((n, n), 1 << 20) - np.diag(np.full(n, 1 << 20))
    ld = link_loads(t, B, np.ones((n, n)), hosts=t.hosts)
    ups = {k: v[0] for k, v in ld.nonzero().items() if k.startswith("leaf") and "spine" in k}
    assert set(ups.values()) == {12 * (1 << 20)}
    assert ld.hop_bytes == (1 << 20) * (16 * 3 * 2 + 16 * 12 * 4)


def _copy_ib(tmp_path: Path) -> Path:
    d = tmp_path / "fab"
    shutil.copytree(IB, d)
    return d


def test_ib_bad_lft_line_names_file_and_line(tmp_path):
    d = _copy_ib(tmp_path)
    lines = (d / "lfts.txt").read_text().splitlines()
    k = next(i for i, l in enumerate(lines) if l.startswith("0x0005"))
    lines[k] = "0x0005 0x7 : garbage"
    (d / "lfts.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(TopologyError, match=rf"lfts.txt:{k + 1}: not a forwarding-table line: '0x0005 0x7 : garbage'"):
        _ib(d)


def test_ib_missing_lid_names_the_switch(tmp_path):
    d = _copy_ib(tmp_path)
    text = (d / "lfts.txt").read_text()
    head = [m for m in re.finditer(r"^Unicast lids.*\((\w+)\):$", text, re.M)][2]
    body_end = text.index("lids dumped", head.end())
    block = text[head.end():body_end]
    victim = re.search(r"^0x0010 .*\n", block, re.M)
    text = text[:head.end()] + block.replace(victim.group(0), "") + text[body_end:]
    (d / "lfts.txt").write_text(text)
    line = text[:head.start()].count("\n") + 1
    with pytest.raises(TopologyError, match=rf"lfts.txt:{line}: the forwarding table of switch "
                                            rf"'{head.group(1)}' \(GUID \w+\) has no entry for LID 16"):
        _ib(d)


def test_ib_other_errors(tmp_path):
    d = _copy_ib(tmp_path)
    nd = (d / "ibnetdiscover.txt").read_text().splitlines()
    k = next(i for i, l in enumerate(nd) if l.startswith("[3]"))
    nd[k] = "[3]	oops"
    (d / "ibnetdiscover.txt").write_text("\n".join(nd))
    with pytest.raises(TopologyError, match=rf"ibnetdiscover.txt:{k + 1}: not an ibnetdiscover line: '\[3\]\toops'"):
        _ib(d)
    # a loop: the spine that serves node01 sends it back down to leaf3, which sends it up again
    t = _ib(IB)
    spine = t.route("node05", "node01")[1].dst
    port = next(_END.match(l.sg_name).group(2) for l in t.links.values()
                if l.src == spine and l.dst == "leaf3")
    d = _copy_ib(tmp_path / "loop")
    text = (d / "lfts.txt").read_text()
    m = re.compile(r"^0x0001 \d+", re.M).search(text, text.index(f"({spine}):"))
    (d / "lfts.txt").write_text(text[:m.start()] + f"0x0001 {int(port):03d}" + text[m.end():])
    t = _ib(d)
    with pytest.raises(TopologyError, match=r"route node05 -> node01 \(LID 1\) loops: node05 HCA-1\[1\] -> leaf2\[1\] .*leaf3"):
        t.route("node05", "node01")
    (tmp_path / "x.txt").write_text("# nothing here\n\n")
    with pytest.raises(TopologyError, match=r"x.txt: no 'Unicast lids"):
        parse_lfts(tmp_path / "x.txt")
    (tmp_path / "x.txt").write_text("# a stray entry\n0x0001 001\n")
    with pytest.raises(TopologyError, match=r"x.txt:2: LFT entry before any 'Unicast lids"):
        parse_lfts(tmp_path / "x.txt")


# ---------------------------------------------------------------- Slurm trees

SLURM = DATA / "slurm"


def _slurm_file(tmp_path: Path, text: str, name: str = "topology.conf") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_hostlist_expansion():
    from colltune.profile.slurm_topo import expand_hostlist
    assert expand_hostlist("tux[0-3,12,18-20]", "x") == ["tux0", "tux1", "tux2", "tux3", "tux12",
                                                          "tux18", "tux19", "tux20"]
    assert expand_hostlist("node[08-10],gpu1", "x") == ["node08", "node09", "node10", "gpu1"]
    assert expand_hostlist("r[1-2]-n[1-2]", "x") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    for bad in ("n[1-", "n[3-1]", "n[a]", "n[[1]]", "a,,b"):
        with pytest.raises(TopologyError, match="f:7: .*hostlist"):
            expand_hostlist(bad, "f:7")


@pytest.mark.parametrize("fname", ["topology.conf", "topology.yaml"])
def test_slurm_tree_and_modelled_routes(fname):
    from colltune.profile.slurm_topo import slurm_topology
    t = slurm_topology(SLURM / fname)
    assert t.kind == "SLURM_TREE" and t.params["routing"].startswith("modelled (Slurm tree")
    assert t.hosts == [f"node{i:02d}" for i in range(1, 17)]
    assert [(n.id, n.level, n.position) for n in t.switches()] == [
        ("leaf1", 1, 0), ("leaf2", 1, 1), ("leaf3", 1, 2), ("leaf4", 1, 3), ("spine1", 2, 0), ("spine2", 2, 1)]
    assert len(t.links) == 2 * (16 + 8) and t.params["link_speed"] == {"leaf3": "100"}
    assert t.route_ids("node01", "node02") == ["node01 -> leaf1", "leaf1 -> node02"]
    assert t.route_ids("node01", "node01") == []
    # two lowest common switches: the (destination index mod 2)-th by name
    assert t.route_ids("node01", "node15") == ["node01 -> leaf1", "leaf1 -> spine1", "spine1 -> leaf4", "leaf4 -> node15"]
    assert t.route_ids("node01", "node16") == ["node01 -> leaf1", "leaf1 -> spine2", "spine2 -> leaf4", "leaf4 -> node16"]
    assert [l.kind for l in t.route("node05", "node09")] == ["up", "up", "down", "down"]
    if fname.endswith("yaml"):
        assert t.params["topology"] == "fabric"  # the cluster_default tree, not the block one


def test_slurm_yaml_topology_choice_and_deeper_tree(tmp_path):
    from colltune.profile.slurm_topo import slurm_topology
    small = slurm_topology(SLURM / "topology.yaml", topology="small")
    assert small.hosts == ["node01", "node02"] and small.params["topology"] == "small"
    with pytest.raises(TopologyError, match="no tree topology named 'blocks'"):
        slurm_topology(SLURM / "topology.yaml", topology="blocks")
    p = _slurm_file(tmp_path, "SwitchName=core Switches=agg[1-2]\nSwitchName=agg1 Switches=e[1-2]\n"
                              "SwitchName=agg2 Switches=e3\nSwitchName=e1 Nodes=a[1-2]\n"
                              "SwitchName=e2 Nodes=b1\nSwitchName=e3 Nodes=c1\n")
    t = slurm_topology(p)
    assert [(n.id, n.level) for n in t.switches()] == [("e1", 1), ("e2", 1), ("e3", 1), ("agg1", 2),
                                                        ("agg2", 2), ("core", 3)]
    assert t.route_ids("a1", "b1") == ["a1 -> e1", "e1 -> agg1", "agg1 -> e2", "e2 -> b1"]
    assert t.hops("a1", "c1") == 6


@pytest.mark.parametrize("text,line,match", [
    ("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-\n", 2, r"unclosed '\['"),
    ("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n", 2, r"switch 's0' defined twice \(first at .*:1\)"),
    ("# c\nSwitchName=s0 Switches=s9\n", 2, r"lists switch 's9', which is never defined"),
    ("SwitchName=s0 Nodes=n1 Speed=3\n", 1, r"unknown: speed"),
    ("SwitchName=s0 Nodes\n", 1, r"expected Key=Value, got 'Nodes'"),
    ("BlockName=b1 Nodes=n[1-4]\n", 1, r"topology/block"),
    ("SwitchName=a Switches=b\nSwitchName=b Switches=a Nodes=n1\n", 1, r"switch cycle"),
    ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n", None, r"'n1' and 'n2' have no common switch"),
])
def test_slurm_conf_errors(tmp_path, text, line, match):
    from colltune.profile.slurm_topo import slurm_topology
    p = _slurm_file(tmp_path, text)
    where = rf"{re.escape(str(p))}:{line}: " if line else rf"{re.escape(str(p))}: "
    with pytest.raises(TopologyError, match=where + ".*" + match):
        slurm_topology(p)


@pytest.mark.parametrize("text,line,match", [
    ("- topology: t\n  tree:\n    switches:\n      - switch: s0\n        nodes: n[1-\n", 4, r"unclosed"),
    ("- topology: t\n  tree:\n    switches:\n      - switch: s0\n        node: n1\n", 4, r"expected 'switch: NAME'"),
    ("- topology: t\n  tree:\n    switches:\n      - switch: s0\n      nodes: n1\n", 5, r"expected 'key: value'|unexpected"),
    ("- topology: t\n  tree:\n    switches: |\n      x\n", 3, r"not supported"),
    ("- topology: t\n  block:\n    blocks: []\n", None, r"no tree topology"),
    ("- topology: t\n  tree:\n    switches:\n      - switch: s0\n        nodes: n1\n\tfoo: 1\n", 6, r"tab"),
])
def test_slurm_yaml_errors(tmp_path, text, line, match):
    from colltune.profile.slurm_topo import slurm_topology
    p = _slurm_file(tmp_path, text, "topology.yaml")
    where = rf"{re.escape(str(p))}:{line}: " if line else rf"{re.escape(str(p))}: "
    with pytest.raises(TopologyError, match=where + ".*" + match):
        slurm_topology(p)


# ---------------------------------------------------------------- emulated cluster

@pytest.fixture
def saved_cluster(tmp_path, monkeypatch):
    """A cluster state as `colltune cluster up --hosts 3 --bandwidth 1gbit --latency 2ms`
    saves it (net.plan: names and addresses only, nothing created, no root needed)."""
    from colltune.cluster import net, state
    monkeypatch.setenv(state.RUN_DIR_ENV, str(tmp_path / "run"))
    c = net.plan("ctp", 3, "10.213.77.0/24", "1gbit", "2ms")
    c.complete = True
    state.save(c)
    return c


def test_emulated_cluster_star(saved_cluster):
    from colltune.profile.emulated import emulated_topology, tc_rate
    t = emulated_topology("ctp")
    assert t.kind == "EMULATED" and t.hosts == ["ctp-n0", "ctp-n1", "ctp-n2"]
    assert [(n.id, n.level) for n in t.switches()] == [("ctp-br", 1)]
    assert t.route_ids("ctp-n0", "ctp-n2") == ["ctp-n0 -> ctp-br", "ctp-br -> ctp-n2"]
    assert t.route("ctp-n1", "ctp-n1") == ()
    up = t.links["ctp-n0 -> ctp-br"]
    assert (up.kind, up.bandwidth, up.latency) == ("up", 125e6, 2e-3)
    assert t.links["ctp-br -> ctp-n0"].sg_name == "ctp-v0"  # the bridge side of the veth pair
    assert emulated_topology("emulated").hosts == t.hosts  # the only cluster up
    assert [tc_rate(x) for x in ("100mbit", "125mbps", "1kibit", "8000")] == [12.5e6, 125e6, 128.0, 1000.0]
    with pytest.raises(TopologyError, match="not a tc rate"):
        tc_rate("fast")
    with pytest.raises(TopologyError, match=r"no emulated cluster 'zz': no state file .*cluster-zz.json"):
        emulated_topology("zz")
    ld = link_loads(t, {("ctp-n0", "ctp-n1"): (1000, 2), ("ctp-n2", "ctp-n1"): (24, 1)})
    assert ld.of("ctp-br -> ctp-n1") == (1024, 3) and ld.hop_bytes == 2048


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (as tests/test_cluster.py)")
def test_emulated_live_hostnames_are_the_topology_hosts():
    """A real cluster: inside each host, gethostname() (what Open MPI's and MPICH's
    MPI_Get_processor_name return) is the topology's host name."""
    from colltune import cluster
    from colltune.profile.resolve import resolve_topology
    name = "ctpr"
    c = cluster.up(2, name, "10.213.93.0/24")
    try:
        t = resolve_topology(name)
        seen = [cluster.exec_in(c, h, ["hostname"], capture_output=True, text=True).stdout.strip()
                for h in t.hosts]
        assert seen == t.hosts == ["ctpr-n0", "ctpr-n1"]
        assert resolve_topology(f"emulated:{name}").route_ids("ctpr-n1", "ctpr-n0") == [
            "ctpr-n1 -> ctpr-br", "ctpr-br -> ctpr-n0"]
    finally:
        cluster.down(name)


# ---------------------------------------------------------------- resolve_topology, map_hosts

def test_resolve_topology_dispatch(tmp_path, saved_cluster):
    from colltune.profile.resolve import resolve_topology
    assert resolve_topology("small").kind == "FLAT"
    from colltune import platforms
    xml = platforms.load("small").xml_path
    assert resolve_topology(xml).kind == "FLAT"
    assert resolve_topology(IB).kind == "INFINIBAND"
    assert resolve_topology(IB / "ibnetdiscover.txt").kind == "INFINIBAND"
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(IB / "ibnetdiscover.txt", other / "fabric.txt")
    with pytest.raises(TopologyError, match="need the switches' forwarding tables"):
        resolve_topology(other / "fabric.txt")
    assert len(resolve_topology(other / "fabric.txt", lft=IB / "lfts.txt").hosts) == 16
    with pytest.raises(TopologyError, match="a forwarding-table dump alone"):
        resolve_topology(IB / "lfts.txt")
    assert resolve_topology(SLURM).params["format"] == "topology.yaml"  # yaml first, like Slurm
    assert resolve_topology(SLURM / "topology.conf").params["format"] == "topology.conf"
    assert resolve_topology(SLURM / "topology.yaml", topology="small").hosts == ["node01", "node02"]
    assert resolve_topology("ctp").kind == "EMULATED"
    assert resolve_topology("emulated:ctp").kind == "EMULATED"
    t = resolve_topology("small")
    assert resolve_topology(t) is t
    for bad in ("no-such-thing", str(tmp_path)):
        with pytest.raises(TopologyError) as exc:
            resolve_topology(bad)
        msg = str(exc.value)
        assert all(w in msg for w in ("small", "SimGrid XML", "ibnetdiscover", "topology.conf", "emulated"))


def test_map_hosts_reports_unknown_hosts():
    from colltune.profile.resolve import map_hosts, resolve_topology
    t = resolve_topology(IB)
    m = map_hosts(["node01", "node02.cluster.local", "NODE03", "", "gpu7", "node01"], t)
    assert m.mapping == {"node01": "node01", "node02.cluster.local": "node02", "NODE03": "node03"}
    assert m.unknown == ["gpu7"] and m.get("gpu7") is None
    assert any("gpu7" in n and "left out" in n for n in m.notes)
    # a host missing from the topology: its traffic is skipped, the rest is loaded
    m2 = map_hosts(["node01", "gpu7", "node16"], t)
    known = [m2.get(h) for h in ("node01", "gpu7", "node16") if m2.get(h)]
    assert known == ["node01", "node16"] and m2.unknown == ["gpu7"]
    ld = link_loads(t, {(known[0], known[1]): (4096, 1)})
    assert ld.offered_bytes == 4096 and ld.hop_bytes == 4096 * 4
