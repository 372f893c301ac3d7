"""colltune's HAN collectives (native/hier, docs/hier.md) on the real Open MPI 5 and
MPICH wheels across *emulated hosts* (network namespaces, docs/cluster.md): every
host is a node for the library (MPI_Comm_split_type SHARED groups by host, no
virtual nodes), so HAN's inter-node level really crosses the bridge (TCP) and its
intra-node level uses the host's shared memory.

Layouts: 2 hosts x 2 ranks (its sub-communicators: 1 host, 2+1, 2+2); 3 hosts
with 2+2+1 ranks (uneven); 2 hosts with 1+2 ranks (1+1 and 1+2). For every `han`
algorithm of the catalogue (`colltune-algotest -l`, so algorithms added later are
covered) the algotest matrix runs on the communicators of these shapes (first k
ranks, then WORLD; each shape once, MAXSUB), every root, counts 0,1,7,1031 with
every parameter probe, and on WORLD the large odd count 65537 with the defaults
(2 segments for doubles at the default fs); every (type, op) pair and in-place form
of the matrix; 0 failures and exactly the implied case count. Blocking mode only:
HAN has no non-blocking schedule, so algotest's nb mode (ct_icall) runs the
library for every HAN case and tests nothing of HAN.

That HAN, not a fallback, ran: algotest counts the cases that ran the library
(declined); only non-commutative reductions may decline (allreduce/han: exactly
those). That the checker catches wrong HAN data, and that HAN's hierarchy inside
algotest sees 2 nodes exactly on the communicators that span 2 hosts: a control
build wraps ct_han_bcast / ct_han_allreduce (ld --wrap, no source change) to flip
one byte of the last rank's result when HAN's hierarchy has >= 2 nodes; the
matrix must then report exactly those cases as failed, labelled ran=han.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import CACHE

from colltune import cluster, config, mpi
from colltune.backends.base import Launch
from colltune.backends.netns import PLACEMENT, NetnsBackend
from colltune.providers.base import LaunchMods
from test_algorithms_smpi import REDUCTIONS, check_run, expected_cases, parse_listing
from test_cluster_mpi import PROBE, _tx_bytes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
LIBS = [pytest.param(lib, marks=pytest.mark.skipif(
    not any(i.name == lib for i in mpi.discover()), reason=f"{lib} not installed (make setup)"))
    for lib in ("openmpi", "mpich")]

REPO = Path(__file__).resolve().parents[1]
NATIVE = REPO / "native"
NAME, SUBNET = "cth", "10.213.78.0/24"
# ranks per emulated host; ranks are placed by block (host 0 gets ranks 0,1, ...)
# 1+2: its communicator of 2 ranks is 1+1 (one rank per node), of 3 ranks 1+2 (the
# first node smaller: a root's node-local rank 1 has no counterpart on node 0)
LAYOUTS = {"2x2": (2, 2), "2+2+1": (2, 2, 1), "1+2": (1, 2)}
# Sub-communicators (first k ranks, k <= MAXSUB, then WORLD) the matrix runs per
# layout. 2+2+1: WORLD only, its prefixes (1 host, 2+1, 2+2) are those of 2x2;
# so the layouts together give every shape once: 1 host, 1+1, 1+2, 2+1, 2+2, 2+2+1.
MAXSUB = {"2x2": 4, "2+2+1": 0, "1+2": 3}
COUNTS = [0, 1, 7, 1031]        # with every parameter probe (fs=1000: several segments)
LARGE = [65537]                 # odd; WORLD, defaults only (doubles: 2 segments of fs=524288)
TIMEOUT = 300

# Control build: HAN's result is made wrong on the last rank of every communicator
# whose HAN hierarchy has >= 2 nodes (count > 0), after the real call.
FAULT_C = r"""
#include "colltune/hier.h"
int __real_ct_han_bcast(const ct_args *a, const ct_han_params *p);
int __real_ct_han_allreduce(const ct_args *a, const ct_han_params *p);
static void corrupt(const ct_args *a)
{
    ct_hier_info h;
    int r, k;
    if (a->count <= 0 || ct_hier_info_get(a->comm, &h) != MPI_SUCCESS || h.nnodes < 2) return;
    MPI_Comm_rank(a->comm, &r);
    MPI_Comm_size(a->comm, &k);
    if (r == k - 1) ((unsigned char *)a->recvbuf)[0] ^= 0xFF;
}
int __wrap_ct_han_bcast(const ct_args *a, const ct_han_params *p)
{
    int rc = __real_ct_han_bcast(a, p);
    corrupt(a);
    return rc;
}
int __wrap_ct_han_allreduce(const ct_args *a, const ct_han_params *p)
{
    int rc = __real_ct_han_allreduce(a, p);
    corrupt(a);
    return rc;
}
"""


@pytest.fixture(scope="module")
def emulated():
    c = cluster.up(3, NAME, SUBNET)
    try:
        yield c
    finally:
        cluster.down(NAME)


class Runner:
    """One library on the emulated cluster: colltune's programs built with its
    mpicc, launched like the netns backend does (launcher on the first host, one
    daemon per host through the ssh stand-in, traffic between hosts on the bridge)."""

    def __init__(self, lib: str, out: Path):
        s = config.load({"backend": "netns", "mpi": lib, "platform": NAME, "cache_dir": CACHE},
                        environ={})
        self.backend = NetnsBackend(s)
        self.backend.prepare()
        self.impl, self.out = self.backend.impl, out
        self.env = {k: v for k, v in self.impl.run_env().items() if k != "COLLTUNE_VNODE_SIZE"}
        r = subprocess.run(["make", "-s", "-j2", "-C", str(NATIVE), "algotest", "taskbench",
                            f"MPICC={self.impl.cc}", f"OUT={out}"], capture_output=True, text=True,
                           timeout=600, env=self.env)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        self.catalogue = parse_listing(self.run((1,), "colltune-algotest", ["-l"]))
        self.han = [a for a in self.catalogue if a["name"] == "han"]

    def mpiexec(self, slots: tuple[int, ...], workdir: Path) -> list[str]:
        argv = self.backend.mpiexec(Launch(len(slots), max(slots), [], LaunchMods()), str(workdir))
        line, _ = PLACEMENT[self.impl.name]           # uneven hosts: rewrite the hostfile
        with open(workdir / "hostfile", "w") as fh:
            fh.writelines(line(h.name, n) + "\n" for h, n in zip(self.backend.cluster.hosts, slots))
        assert argv[-2] == "-n"
        return argv[:-2] + ["-n", str(sum(slots))]

    def run(self, slots: tuple[int, ...], exe: str, args: list[str]) -> str:
        workdir = self.out / ("run-" + "-".join(map(str, slots)))
        workdir.mkdir(exist_ok=True)
        cmd = self.mpiexec(slots, workdir) + [str(self.out / exe), *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env, start_new_session=True)
        try:
            out, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            raise AssertionError(f"timeout after {TIMEOUT} s: {' '.join(cmd)}\n{out[-3000:]}")
        assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-3000:]}\n{err[-3000:]}"
        return out


@pytest.fixture(scope="module")
def runners(emulated, tmp_path_factory):
    made: dict[str, Runner] = {}

    def get(lib: str) -> Runner:
        if lib not in made:
            made[lib] = Runner(lib, tmp_path_factory.mktemp(f"hier-emulated-{lib}"))
        return made[lib]
    return get


def _declined(out: str) -> int:
    m = re.search(r"^library fallback ran in (\d+) cases", out, re.M)
    assert m, out[-2000:]
    return int(m[1])


def _matrix(runner: Runner, slots, maxsub: int, alg: dict, counts: list[int],
            defaults_only: bool) -> int:
    """algotest for one hierarchical algorithm: sub-communicators of 1..maxsub ranks and
    WORLD, every root; returns the number of cases checked (all passed, as many
    as the matrix implies, and only non-commutative reductions ran the library)."""
    n = sum(slots)
    args = ["-a", f"{alg['coll']}/{alg['name']}", "-s", str(maxsub), "-r", "all", "-m", "blocking",
            "-c", ",".join(map(str, counts)), *(["-d"] if defaults_only else [])]
    out = runner.run(slots, "colltune-algotest", args)
    algs = [{**alg, "params": [], "tune": []}] if defaults_only else [alg]
    cases = expected_cases(algs, n, maxsub, True, counts, mode="blocking")
    check_run(out, cases)
    declined = _declined(out)
    if alg["coll"] in REDUCTIONS:           # 3 of the 8 (type, op) pairs are non-commutative
        noncomm = cases * 3 // 8
        assert declined <= noncomm, (alg["coll"], declined, noncomm)
        if alg["coll"] == "allreduce":      # allreduce/han and multileader decline exactly those
            assert declined == noncomm, (declined, noncomm)
    else:
        assert declined == 0, (alg["coll"], declined)
    return cases


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("lib", LIBS)
def test_each_host_is_a_node_for_the_library_and_for_han(runners, lib, layout):
    """Ranks placed by block on the hosts, MPI_COMM_TYPE_SHARED groups by host, and
    HAN's hierarchy (colltune-taskbench --whole han) counts one node per host; HAN
    ran (not declined), its 1 MiB result (root on the last host) is right on every
    rank, and at least 1 MiB reached each receiving host through its veth."""
    runner, slots = runners(lib), LAYOUTS[layout]
    (runner.out / "probe.c").write_text(PROBE)
    subprocess.run([runner.impl.cc, str(runner.out / "probe.c"), "-o", str(runner.out / "probe")],
                   check=True, env=runner.env, capture_output=True)
    out = runner.run(slots, "probe", ["0"])
    ranks = {int(m["rank"]): m for m in (dict(re.findall(r"(\w+)=(\S+)", ln))
                                         for ln in out.splitlines() if ln.startswith("rank="))}
    host_of = [i for i, n in enumerate(slots) for _ in range(n)]
    first = [host_of.index(h) for h in host_of]
    assert {r: m["host"] for r, m in ranks.items()} == \
           {r: f"{NAME}-n{h}" for r, h in enumerate(host_of)}
    assert {r: (int(m["shared_size"]), int(m["shared_leader"])) for r, m in ranks.items()} == \
           {r: (slots[h], first[r]) for r, h in enumerate(host_of)}
    n, nbytes = sum(slots), 4 * 262147
    c = runner.backend.cluster
    for coll in ("bcast", "allreduce"):
        before = _tx_bytes(c)
        out = runner.run(slots, "colltune-taskbench", ["--coll", coll, "--bytes", str(nbytes),
                                                       "--whole", "han", "--check", "--reps", "1",
                                                       "--root", str(n - 1)])
        got = [b - a for a, b in zip(before, _tx_bytes(c))][:len(slots)]
        recs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        assert len(recs) == 1, out
        r = recs[0]
        assert (r["ran"], r["check"], r["ranks"], r["nodes"]) == ("han", "ok", n, len(slots)), r
        # HAN's inter-node data crossed the bridge (TCP), into every host that must
        # receive the message (bcast: all but the root's; allreduce: all)
        receivers = [h for h in range(len(slots)) if coll == "allreduce" or h != len(slots) - 1]
        assert all(got[h] >= nbytes for h in receivers), (coll, got)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("lib", LIBS)
def test_han_matrix_across_emulated_hosts(runners, lib, layout):
    """Every han algorithm of the catalogue: the layout's sub-communicators (MAXSUB)
    and every root, counts 0,1,7,1031 x every parameter probe; WORLD and every root,
    65537 with the defaults."""
    runner, slots, maxsub = runners(lib), LAYOUTS[layout], MAXSUB[layout]
    assert {"bcast", "allreduce"} <= {a["coll"] for a in runner.han}, runner.han
    checked = {}
    for alg in runner.han:
        checked[alg["coll"]] = (_matrix(runner, slots, maxsub, alg, COUNTS, False) +
                                _matrix(runner, slots, 0, alg, LARGE, True))
    assert all(checked.values()), checked


@pytest.mark.parametrize("layout", ["2x2", "1+2"])
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("coll", ["allreduce", "reduce"])
def test_multileader_matrix_across_emulated_hosts(runners, coll, lib, layout):
    """allreduce/ and reduce/multileader on real MPI across hosts: 2x2 (lanes of 2 across
    the hosts, two at once), 1+2 (uneven: the flat Rabenseifner); sub-communicators and
    WORLD, every root, counts 0, 1, 7, 1031 with its probe, 65537 with the defaults."""
    runner, slots, maxsub = runners(lib), LAYOUTS[layout], MAXSUB[layout]
    alg = next(a for a in runner.catalogue if (a["coll"], a["name"]) == (coll, "multileader"))
    assert _matrix(runner, slots, maxsub, alg, COUNTS, False) + _matrix(runner, slots, 0, alg, LARGE, True)


@pytest.mark.parametrize("lib", LIBS)
def test_matrix_catches_wrong_han_data_on_multi_node_communicators(runners, lib):
    """The control build corrupts HAN's result on the last rank whenever HAN's
    hierarchy has >= 2 nodes: on 2 hosts x 2, the communicators of 3 and 4 ranks
    (and WORLD), never those of 1-2 ranks (one host). The matrix must report exactly
    those cases with count > 0 that HAN ran (not the declined non-commutative ones)."""
    runner = runners(lib)
    out = runner.out
    (out / "fault.c").write_text(FAULT_C)
    faulty = out / "colltune-algotest-faulty"
    link = subprocess.run(
        [runner.impl.cc, "-std=c11", "-O2", f"-I{NATIVE / 'include'}", "-o", str(faulty),
         str(out / "fault.c"), *sorted(map(str, (out / "obj" / "tests").glob("*.o"))),
         str(out / "libcolltune-algorithms.a"), "-Wl,--wrap=ct_han_bcast",
         "-Wl,--wrap=ct_han_allreduce", "-lm"], capture_output=True, text=True, env=runner.env)
    assert link.returncode == 0, link.stderr
    slots, counts = LAYOUTS["2x2"], [0, 7]
    for coll in ("bcast", "allreduce"):
        res = runner.run(slots, faulty.name, ["-a", f"{coll}/han", "-s", "4", "-r", "all", "-d",
                                              "-m", "blocking", "-c", "0,7"])
        fails = [dict(re.findall(r"(\w+)=(\S+)", ln)) for ln in res.splitlines()
                 if ln.startswith("FAIL ")]
        summary = re.search(r"^(\d+) passed, (\d+) failed$", res, re.M)
        assert summary, res[-2000:]
        # comm sizes k = 1..4 then WORLD (4); k = 3, 4, WORLD span both hosts
        if coll == "bcast":
            expect = sum(3 * k for k in (3, 4, 4))           # every root x 3 types, count 7
        else:
            expect = 3 * 5 * 2                                # 5 commutative pairs x in-place
        total = expected_cases([{"coll": coll, "params": [], "tune": []}], 4, 4, True, counts, mode="blocking")
        assert (int(summary[2]), int(summary[1])) == (expect, total - expect), res[-3000:]
        assert len(fails) == expect
        assert all(f["ran"] == "han" and f["count"] == "7" and f["comm"] in ("3", "4")
                   and int(f["first_bad_world_rank"]) == int(f["comm"]) - 1
                   for f in fails), fails[:5]
