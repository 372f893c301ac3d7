"""colltune.profile topology and routing: route for route against SimGrid 3.32 itself.

The ground truth is SimGrid's own ``Host::route_to`` (a C++ s4u program built once into
.colltune-cache/profile/, colltune.profile.simgrid_routes). For every platform checked,
the set of links (SimGrid names, bandwidth, latency, sharing policy) must be exactly
SimGrid's, and every route checked must be SimGrid's link list in SimGrid's order:
all pairs on ``small``, ``fattree64x12`` and a dozen small variants (FLAT with backbone,
limiters, SHARED/FATPIPE; 2- and 3-level fat-trees with parallel cables; dragonflies
with limiters and SHARED links; tori), and 2000 random pairs plus every pair from and to
3 fixed hosts on the 1152-node ``dragonfly``. Fails (never skips) without g++ and
libsimgrid-dev. Then link loads on hand-checked tiny examples, and the error paths.
"""
from __future__ import annotations

import random
import textwrap

import numpy as np
import pytest

from colltune import platforms
from colltune.profile import (TopologyError, aggregate_ranks, link_loads, load_topology,
                              parse_bandwidth, parse_time)
from colltune.profile import simgrid_routes

from conftest import CACHE

SG_MODEL_LOOPBACK = "__loopback__"  # the network model's own link, on no cluster route


@pytest.fixture(scope="module")
def sg_exe():
    return simgrid_routes.build(CACHE)


def _xml(tmp_path, name: str, cluster: str):
    p = tmp_path / f"{name}.xml"
    p.write_text(textwrap.dedent(f"""\
        <?xml version='1.0'?>
        <!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
        <platform version="4.1">
          {cluster}
        </platform>
        """))
    return p


def _check_against_simgrid(topo, pairs) -> int:
    """Assert links and routes equal SimGrid's; return the number of routes compared."""
    sg = simgrid_routes.routes(topo.source, pairs, cache_dir=CACHE)
    sg_links = {k: v for k, v in sg.links.items() if k != SG_MODEL_LOOPBACK}
    mine = {l.sg_name: (l.bandwidth, l.latency, l.sharing) for l in topo.links.values()}
    assert set(mine) == set(sg_links), (sorted(set(mine) - set(sg_links))[:5],
                                        sorted(set(sg_links) - set(mine))[:5])
    wrong = {k: (mine[k], sg_links[k]) for k in mine if mine[k] != sg_links[k]}
    assert not wrong, list(wrong.items())[:3]
    bad = [(p, topo.route_sg_names(*p), sg.routes[p]) for p in pairs
           if topo.route_sg_names(*p) != sg.routes[p]]
    assert not bad, f"{len(bad)} of {len(pairs)} routes differ from SimGrid's, e.g. {bad[:2]}"
    return len(pairs)


def _all_pairs(topo):
    return [(a, b) for a in topo.hosts for b in topo.hosts]


def test_small_every_pair_is_simgrids(sg_exe):
    topo = load_topology("small")
    assert topo.kind == "FLAT" and len(topo.hosts) == 8
    assert _check_against_simgrid(topo, _all_pairs(topo)) == 64
    assert topo.route_ids("node-0", "node-7") == ["node-0 -> switch", "switch -> node-7"]
    assert topo.route_ids("node-3", "node-3") == ["node-3 loopback"]


def test_fattree64x12_every_pair_is_simgrids(sg_exe):
    topo = load_topology("fattree64x12")
    assert (len(topo.hosts), len(topo.switches())) == (64, 20)  # 4 leaves + 16 spine planes
    assert _check_against_simgrid(topo, _all_pairs(topo)) == 4096
    assert topo.route_ids("node-0", "node-63") == [
        "node-0 -> L1-switch0", "L1-switch0 -> L2-switch15", "L2-switch15 -> L1-switch3",
        "L1-switch3 -> node-63"]
    # a shift leaf 0 -> leaf 2 (i -> i+32) uses 16 distinct up and 16 distinct down cables
    routes = [topo.route_ids(i, i + 32) for i in range(16)]
    assert len({r[1] for r in routes}) == 16 and len({r[2] for r in routes}) == 16


def test_dragonfly_sampled_pairs_are_simgrids(sg_exe):
    topo = load_topology("dragonfly")
    assert (len(topo.hosts), len(topo.switches())) == (1152, 288)
    rnd = random.Random(17)
    hosts = topo.hosts
    pairs = [(rnd.choice(hosts), rnd.choice(hosts)) for _ in range(2000)]
    for s in ("node-0", "node-517", "node-1151"):  # group 0 chassis 0; group 1 chassis 2; last
        pairs += [(s, h) for h in hosts] + [(h, s) for h in hosts]
    # SimGrid's same-group routing continues from chassis 0 after the green hop: inside
    # chassis 1 it takes a black link leaving chassis 0; from chassis 1 to chassis 0 none
    quirks = {("node-64", "node-68"): ["node-64 -> g0-c1-r0", "g0-c1-r0 -> g0-c1-r1",
                                       "g0-c0-r1 -> g0-c1-r1", "g0-c1-r1 -> node-68"],
              ("node-64", "node-4"): ["node-64 -> g0-c1-r0", "g0-c1-r0 -> g0-c1-r1",
                                      "g0-c0-r1 -> node-4"]}
    pairs += list(quirks)
    n = _check_against_simgrid(topo, pairs)
    assert n == 2000 + 3 * 2 * 1152 + 2
    for p, ids in quirks.items():
        assert topo.route_ids(*p) == ids
    assert topo.route_ids("node-0", "node-1151") == [
        "node-0 -> g0-c0-r0", "g0-c0-r0 -> g0-c0-r2", "g0-c0-r2 -> g2-c0-r0",
        "g2-c0-r0 -> g2-c0-r15", "g2-c0-r15 -> g2-c5-r15", "g2-c5-r15 -> node-1151"]
    link = topo.links["g0-c0-r2 -> g2-c0-r0"]
    assert (link.kind, link.count, link.bandwidth) == ("blue", 4, 4 * 5.25e9)


VARIANTS = {
    # FLAT: backbone, limiters, loopback, non-contiguous radicals and a suffix, bits/s
    "flat_bb": '<cluster id="c" prefix="h-" radical="0-3,8-11" suffix=".x" speed="1Gf" bw="10Gbps" '
               'lat="1us" bb_bw="2GBps" bb_lat="3us" limiter_link="5GBps" loopback_bw="8GBps" '
               'loopback_lat="10ns"/>',
    "flat_shared": '<cluster id="c" prefix="h" radical="0-5" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                   'sharing_policy="SHARED" bb_bw="2GBps" bb_sharing_policy="FATPIPE"/>',
    "flat_fatpipe": '<cluster id="c" prefix="h" radical="0-5" suffix="" speed="1Gf" bw="1GBps" '
                    'lat="1us" sharing_policy="FATPIPE"/>',
    # FAT_TREE: parallel cables (2 and 8), 3 levels, limiters on every switch, SHARED links
    "ft_par": '<cluster id="ft" prefix="n" radical="0-15" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
              'topology="FAT_TREE" topo_parameters="2;4,4;1,2;1,2" loopback_bw="1GBps"/>',
    "ft_natural": '<cluster id="ft" prefix="n" radical="0-63" suffix="" speed="1Gf" bw="12.5GBps" '
                  'lat="0.2us" topology="FAT_TREE" topo_parameters="2;16,4;1,2;1,8" loopback_bw="8GBps"/>',
    "ft3": '<cluster id="ft" prefix="n" radical="10-17" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
           'topology="FAT_TREE" topo_parameters="3;2,2,2;1,2,2;1,1,2" loopback_lat="5ns"/>',
    "ft3_lim": '<cluster id="ft" prefix="n" radical="0-15" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
               'topology="FAT_TREE" topo_parameters="3;4,2,2;1,2,2;1,2,1" limiter_link="3GBps" '
               'loopback_lat="5ns"/>',
    "ft3_shared": '<cluster id="ft" prefix="n" radical="0-23" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                  'topology="FAT_TREE" topo_parameters="3;2,3,4;2,2,1;2,1,2" sharing_policy="SHARED"/>',
    "ft_noloop": '<cluster id="ft" prefix="n" radical="0-11" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                 'topology="FAT_TREE" topo_parameters="2;3,4;2,3;2,1"/>',
    # DRAGONFLY: host and router limiters, SHARED links, several blue/black/green counts
    "df_lim": '<cluster id="df" prefix="d" radical="0-47" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
              'topology="DRAGONFLY" topo_parameters="2,2;3,2;4,1;2" limiter_link="7GBps" '
              'loopback_bw="3GBps"/>',
    "df_shared": '<cluster id="df" prefix="d" radical="0-71" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                 'topology="DRAGONFLY" topo_parameters="3,1;2,3;3,2;4" sharing_policy="SHARED"/>',
    # TORUS: limiters (one per node passed), a dimension of 2, one of 1, SHARED
    "torus_lim": '<cluster id="t" prefix="t" radical="0-23" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                 'topology="TORUS" topo_parameters="3,4,2" limiter_link="2GBps" loopback_bw="3GBps"/>',
    "torus_plain": '<cluster id="t" prefix="t" radical="0-19" suffix="" speed="1Gf" bw="1GBps" lat="1us" '
                   'topology="TORUS" topo_parameters="5,1,4" sharing_policy="SHARED"/>',
}


def test_variants_every_pair_is_simgrids(sg_exe, tmp_path):
    checked = {}
    for name, cluster in VARIANTS.items():
        topo = load_topology(_xml(tmp_path, name, cluster))
        checked[name] = _check_against_simgrid(topo, _all_pairs(topo))
    assert sum(checked.values()) == 13992, checked  # every pair of the 13 variants
    # readable ids: parallel cables, undirected links, limiters, backbone, loopback
    nat = load_topology(tmp_path / "ft_natural.xml")
    assert {f"L1-switch0 -> L2-switch1 #{k}" for k in range(8)} <= set(nat.links)
    assert nat.links["L1-switch0 -> L2-switch1 #3"].cable == 3
    sh = load_topology(tmp_path / "flat_shared.xml")
    assert "h0 <-> switch" in sh.links and not sh.links["h0 <-> switch"].directed
    assert sh.route_ids("h0", "h1") == ["h0 <-> switch", "switch backbone", "h1 <-> switch"]
    bb = load_topology(tmp_path / "flat_bb.xml")
    assert bb.hosts[4] == "h-8.x"
    assert bb.route_ids("h-0.x", "h-8.x") == ["h-0.x limiter", "h-0.x -> switch", "switch backbone",
                                            "switch -> h-8.x", "h-8.x limiter"]
    assert bb.links["h-0.x -> switch"].bandwidth == 10e9 / 8
    lim = load_topology(tmp_path / "ft3_lim.xml")
    # SimGrid charges a switch's limiter when leaving it upwards and after a down link
    # leaving it: once per switch passed, after the down link at the turning switch
    assert lim.route_ids("n0", "n1") == ["n0 limiter", "n0 -> L1-switch0", "L1-switch0 -> n1",
                                         "L1-switch0 limiter", "n1 limiter"]


def test_simgrid_refuses_what_we_refuse(sg_exe, tmp_path):
    # a fat-tree with more switches than hosts and limiters: switch limiter names collide
    # with host limiter names; SimGrid aborts ("declared several times"), so do we
    p = _xml(tmp_path, "clash", '<cluster id="ft" prefix="n" radical="0-7" suffix="" speed="1Gf" '
                                'bw="1GBps" lat="1us" topology="FAT_TREE" '
                                'topo_parameters="3;2,2,2;1,2,2;1,1,2" limiter_link="3GBps"/>')
    with pytest.raises(TopologyError, match="ft_link_7_limiter.*twice"):
        load_topology(p)
    with pytest.raises(simgrid_routes.SimGridRoutesError):
        simgrid_routes.routes(p, [("n0", "n1")], cache_dir=CACHE)


# ---------------------------------------------------------------- link loads

def test_loads_flat_hand_checked():
    topo = load_topology("small")
    traffic = {("node-0", "node-1"): (100, 2), ("node-0", "node-2"): (50, 1),
               ("node-1", "node-0"): (7, 1), ("node-3", "node-3"): (10, 1)}
    ld = link_loads(topo, traffic)
    assert ld.nonzero() == {
        "node-0 -> switch": (150.0, 3.0), "switch -> node-1": (100.0, 2.0),
        "switch -> node-2": (50.0, 1.0), "node-1 -> switch": (7.0, 1.0),
        "switch -> node-0": (7.0, 1.0), "node-3 loopback": (10.0, 1.0)}
    assert ld.hop_bytes == 2 * (100 + 50 + 7)
    assert (ld.offered_bytes, ld.offered_messages, ld.pairs) == (167, 5, 4)
    link, b, m = ld.most_loaded()
    assert (link.id, b, m) == ("node-0 -> switch", 150.0, 3.0)
    assert ld.most_loaded(by="messages")[0].id == "node-0 -> switch"
    assert ld.most_loaded(kinds=["loopback"])[0].id == "node-3 loopback"
    # the same traffic as matrices over a subset of hosts gives the same loads
    hosts = ["node-3", "node-0", "node-1", "node-2"]
    B = np.zeros((4, 4))
    M = np.zeros((4, 4))
    for (a, c), (nb, nm) in traffic.items():
        B[hosts.index(a), hosts.index(c)] = nb
        M[hosts.index(a), hosts.index(c)] = nm
    ld2 = link_loads(topo, B, M, hosts=hosts)
    assert ld2.nonzero() == ld.nonzero() and ld2.hop_bytes == ld.hop_bytes
    assert link_loads(topo, np.zeros((8, 8))).most_loaded() is None


def test_loads_fattree_hand_checked(sg_exe, tmp_path):
    # 4 hosts, 2 leaves, 2 spines. D-mod-k: the leaf picks spine (dst position mod 2),
    # so n0 -> n2 and n1 -> n2 share spine 0, n0 -> n3 takes spine 1.
    p = _xml(tmp_path, "tiny", '<cluster id="t" prefix="n" radical="0-3" suffix="" speed="1Gf" '
                               'bw="1GBps" lat="1us" topology="FAT_TREE" topo_parameters="2;2,2;1,2;1,1" '
                               'loopback_bw="1GBps"/>')
    topo = load_topology(p)
    _check_against_simgrid(topo, _all_pairs(topo))
    assert topo.route_ids("n0", "n2") == ["n0 -> L1-switch0", "L1-switch0 -> L2-switch0",
                                          "L2-switch0 -> L1-switch1", "L1-switch1 -> n2"]
    assert topo.route_ids("n0", "n3")[1] == "L1-switch0 -> L2-switch1"
    ld = link_loads(topo, {("n0", "n2"): (1000, 1), ("n1", "n2"): (500, 1), ("n3", "n2"): (100, 1)})
    assert ld.nonzero() == {
        "n0 -> L1-switch0": (1000.0, 1.0), "n1 -> L1-switch0": (500.0, 1.0),
        "L1-switch0 -> L2-switch0": (1500.0, 2.0), "L2-switch0 -> L1-switch1": (1500.0, 2.0),
        "n3 -> L1-switch1": (100.0, 1.0), "L1-switch1 -> n2": (1600.0, 3.0)}
    assert ld.hop_bytes == 1000 * 4 + 500 * 4 + 100 * 2
    assert ld.most_loaded()[0].id == "L1-switch1 -> n2"
    assert [l.id for l, _, _ in ld.top(3)] == ["L1-switch1 -> n2", "L1-switch0 -> L2-switch0",
                                              "L2-switch0 -> L1-switch1"]  # ties: link order
    assert topo.hops("n0", "n2") == 4 and topo.hops("n1", "n1") == 0


def test_aggregate_ranks_hand_checked():
    # 4 ranks, 2 per host, block placement on node-5, node-2
    R = np.arange(16, dtype=float).reshape(4, 4)
    H, hosts = aggregate_ranks(R, ["node-5", "node-5", "node-2", "node-2"])
    assert hosts == ["node-5", "node-2"]
    assert H.tolist() == [[0 + 1 + 4 + 5, 2 + 3 + 6 + 7], [8 + 9 + 12 + 13, 10 + 11 + 14 + 15]]
    with pytest.raises(TopologyError, match="node-9"):
        aggregate_ranks(R, ["node-5", "node-5", "node-2", "node-9"], hosts=["node-5", "node-2"])


# ---------------------------------------------------------------- errors and units

def test_units_as_simgrid_reads_them():
    assert parse_bandwidth("12.5GBps") == 12.5e9
    assert parse_bandwidth("100Gbps") == 12.5e9
    assert parse_bandwidth("1KiBps") == 1024
    assert parse_bandwidth("5") == 5
    assert parse_time("0.2us") == 0.2e-6 and parse_time("1m") == 60 and parse_time("3") == 3
    with pytest.raises(TopologyError, match="unknown unit 'GB'"):
        parse_bandwidth("1GB")
    with pytest.raises(TopologyError, match="number"):
        parse_time("fast")


def test_bad_platforms_are_refused(tmp_path):
    two = tmp_path / "two.xml"
    two.write_text('<?xml version="1.0"?><platform version="4.1"><zone id="z" routing="Full">'
                   '<cluster id="a" prefix="a" radical="0-1" suffix="" speed="1Gf" bw="1GBps" lat="1us"/>'
                   '<cluster id="b" prefix="b" radical="0-1" suffix="" speed="1Gf" bw="1GBps" lat="1us"/>'
                   '</zone></platform>')
    with pytest.raises(TopologyError, match="exactly one <cluster>"):
        load_topology(two)
    cases = {
        "ft_count": ('topology="FAT_TREE" topo_parameters="2;4,4;1,2;1,1"', "0-14", "give 16 hosts"),
        "ft_fields": ('topology="FAT_TREE" topo_parameters="2;4,4;1,2"', "0-15", "4 ';'-separated"),
        "ft_levels": ('topology="FAT_TREE" topo_parameters="2;16;1;1"', "0-15", "2 levels but 1"),
        "df_groups": ('topology="DRAGONFLY" topo_parameters="5,1;1,1;2,1;1"', "0-9", "groups \\(5\\) <= routers"),
        "df_form": ('topology="DRAGONFLY" topo_parameters="2;1;2;1"', "0-3", "groups,blue"),
        "torus_n": ('topology="TORUS" topo_parameters="3,3"', "0-7", "give 9 hosts"),
        "bad_unit": ('bw="1GB"', "0-3", "unknown unit"),
        "bad_policy": ('sharing_policy="HALFDUPLEX"', "0-3", "sharing_policy"),
        "bad_kind": ('topology="RING"', "0-3", "unknown cluster topology"),
    }
    for name, (attrs, radical, msg) in cases.items():
        attrs = attrs if "bw=" in attrs else attrs + ' bw="1GBps"'
        p = _xml(tmp_path, name, f'<cluster id="c" prefix="h" radical="{radical}" suffix="" '
                                 f'speed="1Gf" lat="1us" {attrs}/>')
        with pytest.raises(TopologyError, match=msg):
            load_topology(p)
    with pytest.raises(TopologyError, match="malformed XML"):
        bad = tmp_path / "bad.xml"
        bad.write_text("<platform><cluster")
        load_topology(bad)
    with pytest.raises(TopologyError, match="unknown platform"):
        load_topology("no-such-platform")
    topo = load_topology(platforms.load("small"))
    with pytest.raises(TopologyError, match="'node-8' is not in topology 'small'"):
        topo.route("node-0", "node-8")
    with pytest.raises(TopologyError, match="'node-9'"):
        link_loads(topo, {("node-0", "node-9"): 1})
    with pytest.raises(TopologyError, match="8 hosts label it"):
        link_loads(topo, np.ones((3, 3)))
