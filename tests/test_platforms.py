"""Bundled SimGrid platforms: loading, block placement, errors, and real smpirun runs.

The smpirun tests compile a small C program with smpicc and run it on each bundled
platform with the platform's own hostfile and --cfg settings. If SimGrid's smpicc or
smpirun is missing they fail (never skip) and say so.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from colltune import platforms
from colltune.platforms import Platform, PlatformError

BUNDLED = ("small", "fattree64x12", "dragonfly")

PINGPONG_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* usage: pingpong SIZE ITERS  -- prints the mean half round trip of rank 0 <-> rank 1,
   timed by rank 0 after one untimed round trip (so barrier exit skew is not counted) */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int size = atoi(argv[1]), iters = atoi(argv[2]);
  char *b = calloc(size > 0 ? size : 1, 1);
  double t0 = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = -1; i < iters; i++) {
    if (i == 0) t0 = MPI_Wtime();
    if (r == 0) { MPI_Send(b, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                  MPI_Recv(b, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else if (r == 1) { MPI_Recv(b, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                       MPI_Send(b, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD); }
  }
  if (r == 0) printf("HALF_RTT %.12e\n", (MPI_Wtime() - t0) / (2.0 * iters));
  free(b); MPI_Finalize(); return 0;
}
"""

BCAST_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* usage: bcast COUNT -- bcast COUNT ints from rank 0, check them, print BCAST_OK n time */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
  int count = atoi(argv[1]), bad = 0, allbad = 0;
  int *b = malloc(sizeof(int) * count);
  for (int i = 0; i < count; i++) b[i] = r == 0 ? i * 7 + 1 : -1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t[2], tr[2];
  t[0] = -MPI_Wtime();  /* SMPI's clock is global: time to completion = max(end) - min(start) */
  MPI_Bcast(b, count, MPI_INT, 0, MPI_COMM_WORLD);
  t[1] = MPI_Wtime();
  for (int i = 0; i < count; i++) bad += b[i] != i * 7 + 1;
  MPI_Reduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(t, tr, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (r == 0) printf(allbad ? "BCAST_BAD %d\n" : "BCAST_OK %d %.12e\n", allbad ? allbad : n, tr[0] + tr[1]);
  free(b); MPI_Finalize(); return 0;
}
"""

_UNITS = {"Bps": 1.0, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
          "bps": 0.125, "kbps": 125.0, "Mbps": 1.25e5, "Gbps": 1.25e8,
          "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}


def si(text: str) -> float:
    """'12.5GBps' -> 1.25e10 bytes/s, '0.2us' -> 2e-7 s."""
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([A-Za-z]*)", text.strip())
    assert m and m.group(2) in _UNITS, f"cannot read unit of {text!r}"
    return float(m.group(1)) * _UNITS[m.group(2)]


def overhead(plat: Platform, key: str) -> float:
    """Fixed seconds of an smpi/os-style setting 'min_size:fixed:per_byte[;...]' (size 0 piece)."""
    return float(plat.smpi_config[key].split(";")[-1].split(":")[1])


# ---------------------------------------------------------------------------- loading

def test_available_lists_the_bundled_platforms():
    assert platforms.available() == sorted(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_platform_loads_with_provenance(name):
    p = platforms.load(name)
    assert p.name == name
    xml = Path(p.xml_path)
    assert xml.is_absolute() and xml.is_file() and xml.suffix == ".xml"
    assert p.provenance["sha256"] == hashlib.sha256(xml.read_bytes()).hexdigest()
    side = json.loads(xml.with_suffix(".json").read_text())
    for key in platforms.SIDECAR_KEYS:
        assert key in side, f"{name}.json lacks {key}"
        assert p.provenance[key] == side[key]
    assert p.nodes == side["nodes"] == len(p.hosts) and p.cores_per_node == side["cores_per_node"]
    # stable, documented host order: node-0, node-1, ... by integer (not lexicographic)
    assert p.hosts == [f"node-{i}" for i in range(p.nodes)]
    cfg = p.smpi_config
    assert cfg["smpi/simulate-computation"] == "no"
    for key in ("smpi/os", "smpi/or", "smpi/ois"):
        assert 1e-7 <= overhead(p, key) <= 1e-6, f"{key} should be a few hundred ns"
    m = re.fullmatch(r"([0-9.]+)([kMGT]?)f", cfg["smpi/host-speed"])
    speed = float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]
    assert speed == pytest.approx(p.charge_rates["host_speed_flops"])
    assert cfg["smpi/host-speed"] == p.topology["speed"], "charge rate = cluster speed"
    assert p.smpirun_cfg_args() == [f"--cfg={k}:{v}" for k, v in cfg.items()]
    notes = side["smpi_config_notes"]
    assert set(notes) == set(cfg), "every --cfg setting needs its rationale/source"
    rates = p.charge_rates
    for key in ("reduction_bytes_per_s", "memcpy_bytes_per_s", "host_speed_flops"):
        assert rates[key] > 0 and rates["sources"][key]
    assert p.flops_to_charge("memcpy", rates["memcpy_bytes_per_s"]) == pytest.approx(rates["host_speed_flops"])
    assert side["sources"] and all(isinstance(s, str) and s for s in side["sources"])
    assert p.topology["kind"] == side["topology"]["kind"]
    again = platforms.load(name)
    assert p == again and hash(p) == hash(again)
    with pytest.raises(AttributeError):
        p.name = "other"  # frozen


@pytest.mark.parametrize("name", BUNDLED)
def test_xml_comment_states_every_cluster_parameter(name):
    import xml.etree.ElementTree as ET
    text = Path(platforms.load(name).xml_path).read_text()
    comment = "\n".join(re.findall(r"<!--(.*?)-->", text, re.S))
    assert 'platform version="4.1"' in text
    for cluster in ET.fromstring(text).iter("cluster"):
        for k, v in cluster.attrib.items():
            assert f'{k}="{v}"' in comment, f"{name}.xml comment does not state {k}=\"{v}\""


def test_bundled_shapes():
    small, ft, df = (platforms.load(n) for n in BUNDLED)
    assert (small.nodes, small.cores_per_node, small.topology["kind"]) == (8, 4, "FLAT")
    assert (ft.nodes, ft.cores_per_node, ft.topology["kind"]) == (64, 12, "FAT_TREE")
    levels, down, up, cables = ft.topology["topo_parameters"].split(";")
    assert levels == "2" and down == "16,4"
    # non-blocking: a leaf has as many uplinks (spines x parallel cables) as nodes
    assert int(up.split(",")[1]) * int(cables.split(",")[1]) == int(down.split(",")[0])
    assert df.topology["kind"] == "DRAGONFLY" and df.nodes * df.cores_per_node >= 4096
    assert df.topology["groups"] <= df.topology["routers_per_chassis"]


def test_leaf_of_follows_the_topology_parameters():
    small, ft, df = (platforms.load(n) for n in BUNDLED)
    assert {small.leaf_of(h) for h in small.hosts} == {"small/switch"}
    assert [ft.leaf_of(f"node-{i}") for i in (0, 15, 16, 31, 32, 63)] == [
        "fattree64x12/leaf-0", "fattree64x12/leaf-0", "fattree64x12/leaf-1",
        "fattree64x12/leaf-1", "fattree64x12/leaf-2", "fattree64x12/leaf-3"]
    assert [df.leaf_of(f"node-{i}") for i in (0, 383, 384, 1151)] == [
        "dragonfly/group-0", "dragonfly/group-0", "dragonfly/group-1", "dragonfly/group-2"]
    with pytest.raises(PlatformError, match="node-64"):
        ft.leaf_of("node-64")


# ---------------------------------------------------------------------------- placement

@pytest.mark.parametrize("name,nodes,ppn", [("small", 3, 3), ("fattree64x12", 5, 7),
                                            ("fattree64x12", 64, 12), ("dragonfly", 3, 5)])
def test_hostfile_block_placement(name, nodes, ppn, tmp_path):
    p = platforms.load(name)
    lines = p.hostfile_lines(nodes, ppn)
    assert len(lines) == nodes * ppn
    assert all(lines[r] == f"node-{r // ppn}" for r in range(nodes * ppn))
    out = p.write_hostfile(nodes, ppn, tmp_path / "hf")
    assert Path(out).is_absolute() and Path(out).read_text().splitlines() == lines


@pytest.mark.parametrize("nodes,ppn,msg", [(0, 1, "nodes must be >= 1"), (1, 0, "ppn must be >= 1"),
                                           (9, 1, "8 nodes, nodes=9"), (2, 5, "4 cores per node, ppn=5"),
                                           (1.5, 1, "nodes must be an integer"),
                                           (True, 1, "nodes must be an integer")])
def test_hostfile_errors_are_clear(nodes, ppn, msg):
    with pytest.raises(PlatformError, match=re.escape(msg)):
        platforms.load("small").hostfile_lines(nodes, ppn)


def test_unknown_name_lists_available():
    with pytest.raises(PlatformError) as exc:
        platforms.load("fattree")
    for name in BUNDLED:
        assert name in str(exc.value)


def test_missing_file_and_malformed_xml(tmp_path):
    with pytest.raises(PlatformError, match="does not exist"):
        platforms.load(str(tmp_path / "nope.xml"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<platform version='4.1'><cluster id='c'</platform>")
    with pytest.raises(PlatformError) as exc:
        platforms.load(str(bad))
    assert str(bad) in str(exc.value) and "malformed XML" in str(exc.value)
    empty = tmp_path / "empty.xml"
    empty.write_text("<platform version='4.1'><zone id='z' routing='Full'/></platform>")
    with pytest.raises(PlatformError, match="no <cluster>"):
        platforms.load(str(empty))
    wrong = tmp_path / "wrong.xml"
    wrong.write_text("<platform version='4.1'><cluster id='f' prefix='n' suffix='' radical='0-9' "
                     "speed='1Gf' bw='1GBps' lat='1us' topology='FAT_TREE' "
                     "topo_parameters='2;4,4;1,2;1,2'/></platform>")
    with pytest.raises(PlatformError, match="give 16 hosts, radical gives 10"):
        platforms.load(str(wrong))


# ---------------------------------------------------------------------------- user platforms

USER_XML = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="c" prefix="n" suffix=".x" radical="0-3,8-11" speed="1Gf" core="6"
             bw="10GBps" lat="1us"/>
  </zone>
</platform>
"""


def test_user_xml_without_sidecar_is_inferred(tmp_path):
    f = tmp_path / "mine.xml"
    f.write_text(USER_XML)
    p = platforms.load(str(f))
    assert p.name == "mine" and p.xml_path == str(f.resolve())
    assert p.hosts == ["n0.x", "n1.x", "n2.x", "n3.x", "n8.x", "n9.x", "n10.x", "n11.x"]
    assert (p.nodes, p.cores_per_node) == (8, 6)
    assert p.smpi_config == {} and p.smpirun_cfg_args() == [] and p.charge_rates == {}
    assert p.provenance["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert p.leaf_of("n9.x") == "c/switch"
    assert p.hostfile_lines(2, 6) == ["n0.x"] * 6 + ["n1.x"] * 6


def test_user_xml_with_sidecar_and_several_clusters(tmp_path):
    f = tmp_path / "two.xml"
    f.write_text("<platform version='4.1'><zone id='w' routing='Floyd'>"
                 "<cluster id='a' prefix='a-' suffix='' radical='0-11' speed='1Gf' core='8' bw='1GBps' lat='1us'/>"
                 "<cluster id='b' prefix='b-' suffix='' radical='0-7' speed='1Gf' core='4' bw='1GBps' lat='1us' "
                 "topology='FAT_TREE' topo_parameters='2;4,2;1,2;1,1'/>"
                 "</zone></platform>")
    side = {"name": "twins", "nodes": 20, "cores_per_node": 4, "smpi_config": {"smpi/os": "0:1e-7:0"},
            "topology": {"kind": "MULTI"}, "sources": ["made up for a test"]}
    f.with_suffix(".json").write_text(json.dumps(side))
    p = platforms.load(str(f))
    assert p.name == "twins" and p.smpirun_cfg_args() == ["--cfg=smpi/os:0:1e-7:0"]
    assert p.hosts[:12] == [f"a-{i}" for i in range(12)]  # a-10 after a-9: integer order
    assert p.cores_per_node == 4 and p.nodes == 20
    assert p.leaf_of("a-11") == "a/switch" and p.leaf_of("b-3") == "b/leaf-0" and p.leaf_of("b-4") == "b/leaf-1"
    assert p.provenance["sources"] == ["made up for a test"] and "sidecar_sha256" in p.provenance
    side["nodes"] = 21
    f.with_suffix(".json").write_text(json.dumps(side))
    with pytest.raises(PlatformError, match="nodes=21 but two.xml describes 20"):
        platforms.load(str(f))
    f.with_suffix(".json").write_text("{not json")
    with pytest.raises(PlatformError, match="two.json: malformed JSON"):
        platforms.load(str(f))


# ---------------------------------------------------------------------------- real smpirun

@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    missing = [t for t in ("smpicc", "smpirun") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"SimGrid SMPI tools not found on PATH: {', '.join(missing)} "
                    "(install the Debian package libsimgrid-dev, SimGrid 3.32)")
    d = tmp_path_factory.mktemp("smpi_programs")
    out = {}
    for name, src in (("pingpong", PINGPONG_C), ("bcast", BCAST_C)):
        (d / f"{name}.c").write_text(src)
        r = subprocess.run(["smpicc", "-O2", "-o", str(d / name), str(d / f"{name}.c")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"smpicc failed for {name}:\n{r.stderr}"
        out[name] = str(d / name)
    return out


def smpirun(plat: Platform, hostfile: Path, np_: int, argv: list[str], cwd: Path, extra=()) -> str:
    cmd = ["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", str(hostfile),
           *plat.smpirun_cfg_args(), *extra, "--log=xbt_cfg.thres:warning",
           "--log=smpi_coll.thres:warning", *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)
    assert r.returncode == 0, f"smpirun failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def half_rtt(plat, hosts, size, programs, tmp_path) -> float:
    hf = tmp_path / f"hf_{size}"
    hf.write_text("\n".join(hosts) + "\n")
    out = smpirun(plat, hf, 2, [programs["pingpong"], str(size), "10"], tmp_path)
    m = re.search(r"HALF_RTT (\S+)", out)
    assert m, f"no timing in output:\n{out}"
    return float(m.group(1))


# most links on a route between two distinct hosts, from the topology parameters
def max_links(plat: Platform) -> int:
    kind = plat.topology["kind"]
    if kind == "FAT_TREE":
        return 2 * int(plat.topology["topo_parameters"].split(";")[0])
    if kind == "DRAGONFLY":
        return 7  # node, green, black, blue, green, black, node (minimal routing)
    return 2 + (1 if plat.topology.get("bb_bw") else 0)


@pytest.mark.parametrize("name", BUNDLED)
def test_pingpong_latency_and_bandwidth_are_physical(name, programs, tmp_path):
    p = platforms.load(name)
    bw, lat = si(p.topology["bw"]), si(p.topology["lat"])
    # SMPI charges smpi/os and smpi/or only on "detached" (eager) blocking messages, those
    # below smpi/send-is-detached-thresh (default 64 KiB); larger blocking sends pay neither.
    thresh = int(p.smpi_config.get("smpi/send-is-detached-thresh", 65536))
    hf = Path(p.write_hostfile(2, 1, tmp_path / "hostfile"))  # node-0, node-1 (adjacent)
    for size in (8, 1 << 20):
        o = overhead(p, "smpi/os") + overhead(p, "smpi/or") if size < thresh else 0.0
        floor = o + 2 * lat + size / bw  # at least: both overheads, 2 links, one serialisation
        ceil = o + max_links(p) * lat + size / bw
        t_near = half_rtt(p, hf.read_text().split(), size, programs, tmp_path)
        t_far = half_rtt(p, [p.hosts[0], p.hosts[-1]], size, programs, tmp_path)
        for t in (t_near, t_far):
            assert floor * 0.9999 - 5e-9 <= t <= ceil * 1.0001 + 5e-9, (  # surf/precision 1e-9 s
                f"{name}: {size} B half round trip {t * 1e6:.4f} us outside [{floor * 1e6:.4f}, {ceil * 1e6:.4f}] us")
        assert t_far >= t_near * 0.999
        if size == 8:
            assert t_near >= o + 2 * lat, "per-message overheads are not applied"
            if p.topology["kind"] != "FLAT":
                assert t_far > t_near, f"{name}: far pair should cross more switches than node-0/node-1"


@pytest.mark.parametrize("name", BUNDLED)
def test_intra_node_pingpong_uses_loopback(name, programs, tmp_path):
    p = platforms.load(name)
    o = overhead(p, "smpi/os") + overhead(p, "smpi/or")
    t = half_rtt(p, p.hostfile_lines(1, 2), 8, programs, tmp_path)
    assert o + si(p.topology["loopback_lat"]) <= t * 1.0001 < o + 2 * si(p.topology["lat"])


@pytest.mark.parametrize("name,nodes,ppn", [("small", 3, 3), ("fattree64x12", 5, 7), ("dragonfly", 3, 5)])
def test_bcast_runs_on_non_power_of_two_layout(name, nodes, ppn, programs, tmp_path):
    p = platforms.load(name)
    hf = p.write_hostfile(nodes, ppn, tmp_path / "hostfile")
    out = smpirun(p, Path(hf), nodes * ppn, [programs["bcast"], "1000"], tmp_path)
    m = re.search(r"BCAST_OK (\d+) (\S+)", out)
    assert m, f"bcast failed or wrong data:\n{out}"
    assert int(m.group(1)) == nodes * ppn
    # a bcast to other nodes costs at least one inter-node latency plus the overheads
    assert float(m.group(2)) > overhead(p, "smpi/os") + overhead(p, "smpi/or") + 2 * si(p.topology["lat"])


def test_per_message_overhead_removes_the_flat_tree_artifact(programs, tmp_path):
    """docs/platforms.md: without smpi/ois a flat-tree bcast looks faster than any tree."""
    p = platforms.load("fattree64x12")
    nodes, ppn = 24, 12  # 288 ranks over 2 leaves
    hf = Path(p.write_hostfile(nodes, ppn, tmp_path / "hostfile"))
    t = {}
    for alg in ("flattree", "binomial_tree"):
        # a dissemination barrier so that all ranks start the bcast within ~1 latency
        out = smpirun(p, hf, nodes * ppn, [programs["bcast"], "2"], tmp_path,
                      [f"--cfg=smpi/bcast:{alg}", "--cfg=smpi/barrier:ompi_bruck"])
        m = re.search(r"BCAST_OK \d+ (\S+)", out)
        assert m, f"{alg} bcast failed:\n{out}"
        t[alg] = float(m.group(1))
    # the root posts P-1 MPI_Isend, each costing smpi/ois of CPU time
    assert t["flattree"] >= (nodes * ppn - 1) * overhead(p, "smpi/ois")
    assert t["flattree"] > 3 * t["binomial_tree"], t


def test_fattree_carries_shifts_at_link_rate(tmp_path):
    """fattree64x12 is non-blocking for shift permutations across leaves (D-mod-k),
    as its description says. Control: the same tree written with SimGrid's parallel
    cables ("1,2;1,8") blocks them 2:1 (the down cable is picked by source), which is
    why the platform models 16 spine planes (fattree64x12.xml comment)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from fattree_links import build, patterns, run_flows
    from bounds import injection_bw
    ft = platforms.load("fattree64x12")
    bw, _ = injection_bw(ft.xml_path)
    exe, pats = build(tmp_path), patterns(ft.nodes)
    cables = tmp_path / "parallel-cables.xml"
    cables.write_text(Path(ft.xml_path).read_text().replace('topo_parameters="2;16,4;1,16;1,1"',
                                                            'topo_parameters="2;16,4;1,2;1,8"'))
    for name in ("shift, leaf 0 -> leaf 2 (i -> i+32)", "shift, all nodes (i -> i+32)",
                 "even nodes, leaf 0 -> leaf 2"):
        src, dst = pats[name]
        full = run_flows(ft, ft.xml_path, exe, src, dst, tmp_path)["gbytes_per_s"] * 1e9
        blocked = run_flows(ft, str(cables), exe, src, dst, tmp_path)["gbytes_per_s"] * 1e9
        assert full >= 0.95 * bw, (name, full)
        assert blocked <= 0.6 * bw, (name, blocked)


def test_dragonfly_relay_with_unequal_routes_loses_to_crosstraffic(tmp_path):
    """What limits every pipelined bcast's relays on the dragonfly (docs/deploy.md, "Why a
    relay loses on the dragonfly"): with network/crosstraffic on, a relay fed over a 2-link
    route that sends over a 3-link one runs the longer flow well below the link rate, while
    equal routes lose only the reverse load's ~5 %, and with crosstraffic off nothing."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from relay_routes import VARIANTS, build, run
    from bounds import injection_bw
    df, m = platforms.load("dragonfly"), 1 << 20
    exe = build(tmp_path)
    lbnet = m / injection_bw(df.xml_path)[0] * 1e6

    def times(hosts, variant):
        return run(exe, df, hosts.split(","), VARIANTS[variant], m, 4096, 8, tmp_path)

    equal_in, equal_out, _ = times("node-0,node-1,node-2", "on")
    assert 1.02 * lbnet < equal_out < 1.08 * lbnet, equal_out
    _, longer_out, chain = times("node-2,node-3,node-4", "on")
    assert longer_out > 1.25 * lbnet and chain > 1.2 * lbnet, (longer_out, chain)
    _, off_out, _ = times("node-2,node-3,node-4", "off")
    assert off_out < 1.01 * lbnet, off_out


@pytest.mark.parametrize("side, msg", [
    ({"smpi_confg": {"smpi/os": "0:1e-7:0"}}, r"unknown key\(s\) 'smpi_confg'; a platform sidecar has"),
    ({"charge_rate": {}}, r"unknown key\(s\) 'charge_rate'"),
    ({"smpi_config": {"smpi/os": 0.3}}, r"smpi_config 'smpi/os': 0.3: expected a SimGrid setting"),
    ({"smpi_config": {"os": "0:1e-7:0"}}, r"smpi_config 'os'"),
    ({"smpi_config": {"netwrok/crosstraffic": "0"}}, r"smpi_config 'netwrok/crosstraffic'.*network/"),
    ({"charge_rates": {"reduction_bytes_per_sec": 1e9}}, r"charge_rates: unknown key 'reduction_bytes_per_sec'"),
    ({"charge_rates": {"reduction_bytes_per_s": -1}}, r"'reduction_bytes_per_s': -1: expected a positive"),
])
def test_sidecar_typos_are_refused(tmp_path, side, msg):
    """A misspelt sidecar key had left SMPI's defaults (or the default charge rates) in
    force without a word (an HPC centre engineer's review)."""
    f = tmp_path / "mine.xml"
    f.write_text(USER_XML)
    f.with_suffix(".json").write_text(json.dumps(side))
    with pytest.raises(PlatformError, match=msg):
        platforms.load(str(f))


def test_sidecar_sets_a_network_model_setting(tmp_path):
    """topology_twin.py's nocross twin turns network/crosstraffic off in its sidecar: a
    SimGrid setting outside smpi/ that the sidecar check had refused (the twin's
    documented command stopped with exit 2)."""
    f = tmp_path / "mine.xml"
    f.write_text(USER_XML)
    f.with_suffix(".json").write_text(json.dumps(
        {"smpi_config": {"smpi/os": "0:1e-7:0", "network/crosstraffic": "0"}}))
    assert platforms.load(str(f)).smpirun_cfg_args() == ["--cfg=smpi/os:0:1e-7:0",
                                                         "--cfg=network/crosstraffic:0"]


def test_charge_env_is_the_sidecars_else_the_default_and_the_environment_wins(tmp_path, monkeypatch):
    """libcolltune's charge rates come from the platform a launch runs on (they had been
    4e9 / 8e9 whatever the sidecar said); an explicit COLLTUNE_*_RATE (0: charge nothing)
    still wins."""
    monkeypatch.delenv("COLLTUNE_REDUCE_RATE", raising=False)
    monkeypatch.delenv("COLLTUNE_COPY_RATE", raising=False)
    f = tmp_path / "mine.xml"
    f.write_text(USER_XML)
    assert platforms.load(str(f)).charge_env() == {"COLLTUNE_REDUCE_RATE": "4000000000.0",
                                                   "COLLTUNE_COPY_RATE": "8000000000.0"}
    f.with_suffix(".json").write_text(json.dumps({"charge_rates": {"reduction_bytes_per_s": 1e6}}))
    p = platforms.load(str(f))
    assert p.charge_env() == {"COLLTUNE_REDUCE_RATE": "1000000.0", "COLLTUNE_COPY_RATE": "8000000000.0"}
    monkeypatch.setenv("COLLTUNE_REDUCE_RATE", "0")
    assert p.charge_env()["COLLTUNE_REDUCE_RATE"] == "0"


@pytest.mark.parametrize("attr, value, msg", [
    ("bw", "25GBs", r"<cluster id='c'> bw='25GBs': unknown unit 'GBs' in '25GBs': SimGrid reads a bandwidth"),
    ("lat", "1usec", r"lat='1usec': unknown unit 'usec'"),
    ("speed", "1Gf,fast", r"speed='1Gf,fast': cannot read a number from 'fast'"),
])
def test_a_value_simgrid_cannot_read_is_refused_when_the_platform_loads(tmp_path, attr, value, msg):
    """bw="25GBs" loaded, then every algorithm of every campaign on it was stored as
    crashed ('unknown unit') (an HPC centre engineer's review)."""
    f = tmp_path / "mine.xml"
    old = {"bw": 'bw="10GBps"', "lat": 'lat="1us"', "speed": 'speed="1Gf"'}[attr]
    f.write_text(USER_XML.replace(old, f'{attr}="{value}"'))
    with pytest.raises(PlatformError, match=msg):
        platforms.load(str(f))
