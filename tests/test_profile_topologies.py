"""Topologies beyond SimGrid platforms (issue 17, 2b-2d): an InfiniBand fabric from real
``ibnetdiscover`` + forwarding-table dumps (regenerated live with ibsim + opensm, and
every route checked hop by hop against the fabric's own ``ibtracert``), Slurm
``topology.conf`` / ``topology.yaml`` trees, the emulated cluster of ``colltune cluster``,
``resolve_topology`` and the host-name mapping. Bad input: errors name file:line.
The IB tests fail, never skip, without ibsim/opensm/infiniband-diags (scripts/setup.sh
installs them).
"""
from __future__ import annotations

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
    trace = ibsim.parse_tracert(tracert_text)
    lids = topo.params["lids"]
    n = 0
    for a in topo.hosts:
        for b in topo.hosts:
            if a == b:
                assert topo.route(a, b) == ()
                continue
            assert _hops(topo, a, b) == trace[(lids[a], lids[b])], (a, b)
            assert topo.route(a, b)[-1].dst == b and topo.route(a, b)[0].src == a
            n += 1
    return n


def test_ib_live_regeneration_matches_fabric(tmp_path):
    assert not ibsim.missing_tools(), "install with: bash scripts/setup.sh"
    files = ibsim.generate(IB / "fattree.net", tmp_path, routing="ftree")
    fresh = _ib(tmp_path)
    assert _check_against_tracert(fresh, files["tracert"].read_text()) == 16 * 15
    committed = _ib(IB)
    assert fresh.hosts == committed.hosts and list(fresh.links) == list(committed.links)
    for a in fresh.hosts:  # the committed dumps are what this opensm produces
        for b in fresh.hosts:
            assert fresh.route_ids(a, b) == committed.route_ids(a, b)


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
