"""libcolltune on the real libraries: an unmodified MPI program (collcheck.c,
which knows nothing about colltune) gives correct results under SMPI (linked
in), Open MPI and MPICH (LD_PRELOAD) with a rules file selecting several
algorithms, with a malformed or missing file (one warning, then pass-through),
with rank-dependent problems (all ranks still agree), and with COLLTUNE_FORCE;
`colltune run` end to end; the `colltune` provider in a small tuning campaign."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import CACHE, REPO, have_mpi, run_cli

from colltune import mpi, platforms
from colltune.providers.colltune import libcolltune, link_args, preload_args
from colltune.subcommands.run import compile_app

APP = os.path.join(REPO, "tests", "data", "interpose", "collcheck.c")
RULES = """colltune-rules 1
# several algorithms by size, one per call kind
bcast bytes=0..99 -> linear
bcast bytes=100..999 -> binomial
bcast nodes=2.. bytes=1000.. -> pipeline segsize=1024 fanout=2
bcast -> knomial radix=3 segsize=4096
reduce bytes=..800 -> binomial
reduce -> rabenseifner
allreduce bytes=0..400 -> recursive_doubling
allreduce -> ring segsize=2048
allgather size=1 -> library
allgather bytes=..100 -> bruck
allgather -> ring
"""
WANT = {"bcast": {"linear", "binomial"}, "reduce": {"binomial", "rabenseifner"},
        "allreduce": {"recursive_doubling", "ring"}, "allgather": {"bruck", "ring"}}


class Runner:
    """Launch collcheck with one MPI, with or without colltune's environment."""

    def __init__(self, name, tmp):
        self.impl = mpi.find(name)
        self.tmp = tmp
        self.lib = libcolltune(self.impl, CACHE)
        if name == "smpi":
            self.app = compile_app(self.impl, APP, CACHE, link_args(self.lib))
            plat = platforms.load("small")
            self.hosts = plat.write_hostfile(3, 2, tmp / "hosts")
            self.cmd = lambda n, env: [self.impl.launcher, "-np", str(n), "-platform", plat.xml_path,
                                       "-hostfile", self.hosts, *plat.smpirun_cfg_args(),
                                       "--log=root.thres:critical", str(self.app)]
        else:
            self.app = compile_app(self.impl, APP, CACHE, [])
            self.cmd = lambda n, env: [self.impl.launcher, *preload_args(self.impl, self.lib),
                                       "-n", str(n), str(self.app)]

    def __call__(self, n, env=None, argv=None, timeout=120):
        cmd = argv or self.cmd(n, env)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**self.impl.run_env(), **(env or {})}, cwd=self.tmp)
        return proc

    def report(self, n, env):
        path = self.tmp / f"report-{len(os.listdir(self.tmp))}.jsonl"
        proc = self(n, {**env, "COLLTUNE_REPORT": str(path)})
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        return proc, lines


def ok(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failures" in proc.stdout, proc.stdout + proc.stderr
    return True


def warnings(proc):
    return [line for line in proc.stderr.splitlines() if line.startswith("colltune: warning")]


@pytest.fixture(scope="module", params=["smpi", "openmpi", "mpich"])
def runner(request, tmp_path_factory):
    return Runner(request.param, tmp_path_factory.mktemp(request.param))


def nranks(runner):
    return 6 if runner.impl.name == "smpi" else 2


def test_rules_select_several_algorithms_with_correct_results(runner):
    rules = runner.tmp / "good.rules"
    rules.write_text(RULES)
    proc, rep = runner.report(nranks(runner), {"COLLTUNE_RULES": str(rules)})
    assert ok(proc) and not warnings(proc)
    ran = {}
    for r in rep:
        ran.setdefault(r["collective"], set()).add(r["ran"])
        assert r["ran"] in (r["requested"].split()[0], "library")
    for coll, algs in WANT.items():
        assert algs <= ran[coll], (coll, ran[coll])
    world = [r for r in rep if r["comm_size"] == nranks(runner)]
    if runner.impl.name == "smpi":           # 3 simulated hosts x 2 ranks
        assert {(r["nodes"], r["ppn"]) for r in world} == {(3, 2)}
        assert "pipeline" in ran["bcast"] and "knomial" not in ran["bcast"]   # nodes=2.. matched
    else:
        assert {(r["nodes"], r["ppn"]) for r in world} == {(1, 2)}
        assert "knomial" in ran["bcast"] and "pipeline" not in ran["bcast"]   # one node
    # the derived-datatype allreduce goes to the library, whatever the rules say
    assert any(r["collective"] == "allreduce" and r["origin"].startswith("intercommunicator or derived")
               for r in rep)


@pytest.mark.parametrize("runner", ["smpi"], indirect=True)   # simulated hosts of 2, 2 and 1 ranks
@pytest.mark.parametrize("node_map", ["1", "0"], ids=["map", "asking"])
def test_nodes_and_ppn_of_uneven_nodes(runner, node_map):
    """The rules' keys nodes/ppn come from the world's node map (native/intercept/topo.c,
    no communication per communicator), or with COLLTUNE_NODE_MAP=0 from asking the members
    (the way of jobs past the map's size and of spawned ranks): 5 ranks on hosts of 2, 2
    and 1 span 3 nodes of at most 2 (uneven); the even half of collcheck's split (ranks 0,
    2, 4; rank 0 writes the report) one per node."""
    rules = runner.tmp / "uneven.rules"
    rules.write_text("colltune-rules 1\nallreduce -> recursive_doubling\nbcast -> binomial\n")
    proc, rep = runner.report(5, {"COLLTUNE_RULES": str(rules), "COLLTUNE_NODE_MAP": node_map,
                                  "COLLTUNE_VERBOSE": "1"})
    assert ok(proc) and not warnings(proc)
    way = "from the node map" if node_map == "1" else "asked of their members"
    assert f"communicators' nodes {way}" in proc.stderr, proc.stderr
    seen = {(r["comm_size"], r["nodes"], r["ppn"]) for r in rep}
    assert {(5, 3, 2), (3, 3, 1)} <= seen, seen


def test_malformed_file_one_warning_then_pass_through(runner):
    bad = runner.tmp / "bad.rules"
    bad.write_text("colltune-rules 1\nbcast -> linear\nreduce bytes=1..x -> linear\n")
    proc, rep = runner.report(nranks(runner), {"COLLTUNE_RULES": str(bad)})
    assert ok(proc)
    assert warnings(proc) == [
        f"colltune: warning: COLLTUNE_RULES: {bad}:3: bytes: 'x' is not a non-negative integer "
        f"(range '1..x'); COLLTUNE_RULES ignored, collectives go to the MPI library"]
    assert rep == []                         # nothing intercepted


def test_missing_file_one_warning(runner):
    proc = runner(nranks(runner), {"COLLTUNE_RULES": str(runner.tmp / "absent.rules")})
    assert ok(proc)
    (w,) = warnings(proc)
    assert f"{runner.tmp / 'absent.rules'}:0: cannot open" in w


def test_a_device_a_fifo_or_a_folder_is_refused_without_blocking(runner):
    """/dev/zero had grown a rank to 8 GB (killed), a FIFO blocked MPI_Init for ever: a
    rules file that is not a regular file is one warning, then the library."""
    fifo = runner.tmp / "fifo.rules"
    if not fifo.exists():
        os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(runner.tmp)):
        proc, rep = runner.report(nranks(runner), {"COLLTUNE_RULES": path})
        assert ok(proc)
        assert warnings(proc) == [f"colltune: warning: COLLTUNE_RULES: {path}:0: not a regular "
                                  f"file (a text file is expected); COLLTUNE_RULES ignored, "
                                  f"collectives go to the MPI library"]
        assert rep == []
    # /proc's files are regular and report no size: one had been "no header (empty file?)"
    proc, rep = runner.report(nranks(runner), {"COLLTUNE_RULES": "/proc/cpuinfo"})
    assert ok(proc) and rep == []
    assert warnings(proc) == ["colltune: warning: COLLTUNE_RULES: /proc/cpuinfo:0: a special file "
                              "that reports no size (/proc?), not a rules file; COLLTUNE_RULES "
                              "ignored, collectives go to the MPI library"]


def test_no_environment_is_silent(runner):
    proc = runner(nranks(runner))
    assert ok(proc) and "colltune" not in proc.stderr


def test_force(runner):
    proc, rep = runner.report(nranks(runner), {
        "COLLTUNE_FORCE": "allgather:neighbor_exchange;bcast:knomial:radix=5,segsize=100",
        "COLLTUNE_VERBOSE": "1"})
    assert ok(proc)
    assert {r["collective"] for r in rep} == {"allgather", "bcast"}
    assert {r["requested"] for r in rep} == {"neighbor_exchange", "knomial radix=5 segsize=100"}
    # neighbor_exchange declines odd communicator sizes: the library ran, and it says so
    odd = {r["ran"] for r in rep if r["collective"] == "allgather" and r["comm_size"] % 2}
    even = {r["ran"] for r in rep if r["collective"] == "allgather" and r["comm_size"] % 2 == 0}
    assert odd == {"library"} and even == {"neighbor_exchange"}
    # and why: the algorithm's own reason
    assert {r.get("declined") for r in rep if r["collective"] == "allgather" and r["comm_size"] % 2} \
        == {"communicator size is odd"}
    assert "(ran library: neighbor_exchange declines: communicator size is odd)" in proc.stderr
    assert "COLLTUNE_FORCE -> knomial radix=5 segsize=100 (ran knomial)" in proc.stderr
    bad = runner(nranks(runner), {"COLLTUNE_FORCE": "bcast:pipeline:fanout=99"})
    assert ok(bad) and len(warnings(bad)) == 1 and "fanout=99" in warnings(bad)[0]
    # a collective given twice: the first had won and the second was dropped, silently
    twice = runner(nranks(runner), {"COLLTUNE_FORCE": "allreduce:han:imod=2;allreduce:ring"})
    assert ok(twice) and len(warnings(twice)) == 1
    assert "COLLTUNE_FORCE:2: allreduce given twice (item 1 too)" in warnings(twice)[0]


@pytest.mark.parametrize("runner", ["openmpi", "mpich"], indirect=True)   # MPMD launches
def test_rank_dependent_problems_are_agreed(runner, tmp_path):
    """One rank reads a broken file, or a different one: every rank passes
    through (a split decision would hang or corrupt), one warning."""
    good, bad, other = tmp_path / "g.rules", tmp_path / "b.rules", tmp_path / "o.rules"
    good.write_text(RULES)
    bad.write_text("colltune-rules 1\nallreduce -> nope\n")
    other.write_text(RULES.replace("linear", "binomial"))
    flag = "-x" if runner.impl.name == "openmpi" else "-env"

    def mpmd(second):
        argv = [runner.impl.launcher, *preload_args(runner.impl, runner.lib)]
        for path in (good, second):
            argv += ["-n", "1", *((flag, f"COLLTUNE_RULES={path}") if flag == "-x"
                                  else (flag, "COLLTUNE_RULES", str(path))), str(runner.app), ":"]
        return argv[:-1]

    proc = runner(2, argv=mpmd(bad))
    assert ok(proc)
    assert warnings(proc) == [f"colltune: warning: COLLTUNE_RULES (on rank 1): {bad}:2: unknown "
                              f"allreduce algorithm 'nope' (known: recursive_doubling, ring, "
                              f"rabenseifner, reduce_bcast, han, multileader, library); COLLTUNE_RULES ignored, "
                              f"collectives go to the MPI library"]
    proc = runner(2, argv=mpmd(other))
    assert ok(proc)
    (w,) = warnings(proc)
    assert "differs between ranks" in w


def test_colltune_run_sim_and_local(workdir, tmp_path):
    rules = tmp_path / "r.rules"
    rules.write_text(RULES)
    rep = tmp_path / "sim.jsonl"
    proc = run_cli("run", "--rules", str(rules), "--report", str(rep), "--layout", "3x2", "--",
                   APP, "2")
    assert "collcheck: 308 checks, 0 failures" in proc.stdout
    assert {json.loads(x)["nodes"] for x in rep.read_text().splitlines()} >= {3}
    for lib in ("openmpi", "mpich"):
        rep = tmp_path / f"{lib}.jsonl"
        proc = run_cli("run", "--backend", "local", "--mpi", lib, "-n", "2", "--force",
                       "allreduce:rabenseifner", "--report", str(rep), "--", APP)
        assert "0 failures" in proc.stdout
        assert {json.loads(x)["ran"] for x in rep.read_text().splitlines()} == {"rabenseifner", "library"}
    bad = tmp_path / "bad.rules"
    bad.write_text("colltune-rules 1\nbcast -> ring\n")
    proc = run_cli("run", "--rules", str(bad), "-n", "2", "--", APP, check=False)
    assert proc.returncode == 2 and f"{bad}:2: unknown bcast algorithm 'ring'" in proc.stderr
    # --force, --default-selector and --layout are checked before the launch too: a typo
    # would only warn and run the library (force), or abort smpirun (selector)
    for args, said in ((["--force", "bcast:binomal"], "--force 'bcast:binomal': item 1 'bcast:binomal': "
                        "unknown bcast algorithm 'binomal'"),
                       (["--force", "bcast:binomial;allreduce:ring:segsize=x"], "item 2 "),
                       (["--force", "bcst:binomial"], "unknown collective 'bcst'"),
                       (["--force", "allreduce:ring;allreduce:han"], "allreduce given twice (item 1 too)"),
                       (["--default-selector", "foo", "-n", "2"], "--default-selector 'foo' is not an SMPI selector"),
                       (["--layout", "100x4"], "--layout 100x4: platform 'small' has 8 nodes")):
        proc = run_cli("run", *args, "--", APP, check=False)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_colltune_provider_tune_campaign_sim(workdir):
    """A small exhaustive campaign over colltune's own algorithms on SMPI, then
    its decision table exported as a rules file that the interposer runs."""
    table = workdir / "t.json"
    run_cli("tune", "--provider", "colltune", "--collectives", "bcast,allreduce",
            "--layouts", "2x2", "--sizes", "8,65536", "--algorithms",
            "binomial,pipeline,recursive_doubling,ring", "--baselines", "ompi",
            "--table", str(table), "-q", "--min-reps", "3", "--max-reps", "5")
    from colltune.decision import DecisionTable
    t = DecisionTable.load(str(table))
    # a name in --algorithms takes the algorithm with its tuning presets
    # (pipeline[segsize=65536], ring[segsize=8192]): 3 candidates per collective
    chosen = {(e.collective, r.algorithm.split("[")[0]) for e in t.entries for r in e.rules}
    assert {r.provider for e in t.entries for r in e.rules} == {"colltune"}
    assert chosen <= {("bcast", "binomial"), ("bcast", "pipeline"),
                      ("allreduce", "recursive_doubling"), ("allreduce", "ring")}
    recs = [json.loads(x) for x in run_cli("results", "export", "--format", "jsonl").stdout.splitlines()]
    ours = [r for r in recs if r["provider"] == "colltune"]
    assert {r["algorithm"] for r in ours} >= {"pipeline[segsize=65536]", "ring[segsize=8192]"}
    assert len(ours) == 2 * 3 * 2 and all(r["labels"]["ran"] == r["algorithm"].split("[")[0] for r in ours)
    assert {r["algorithm"] for r in recs if r["provider"] == "smpi"} == {"ompi"}
    from colltune.exporters import EXPORTERS
    rules = workdir / "t.rules"
    rules.write_text(EXPORTERS.get("colltune")().export(t).text)
    proc = run_cli("run", "--rules", str(rules), "--layout", "2x2", "--verbose", "--", APP)
    assert "0 failures" in proc.stdout
    for coll, alg in chosen:
        assert f"-> {alg}" in proc.stderr


SPLIT_ONLY = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int wr, r, n, v, bad = 0, all = 0;
    MPI_Comm c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &c);
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    for (int it = 0; it < 3; it++) {
        v = r == 0 ? it : -1;
        MPI_Bcast(&v, 1, MPI_INT, 0, c);
        bad += v != it;
    }
    MPI_Comm_free(&c);
    MPI_Reduce(&bad, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wr == 0) printf("split-only bad=%d\n", all);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.parametrize("backend", [("--layout", "3x3"), ("--backend", "local", "--mpi", "openmpi", "-n", "4")],
                         ids=["smpi", "openmpi"])
def test_han_on_sub_communicators_only_finalizes(tmp_path, backend):
    """HAN on a split only: MPI_Finalize's release of MPI_COMM_WORLD's hierarchy, which it
    never had, had aborted every such job (MPI_Comm_delete_attr: MPI_ERR_ARG; a review)."""
    if "openmpi" in backend and not have_mpi("openmpi"):
        pytest.skip("Open MPI not installed")
    src = tmp_path / "split.c"
    src.write_text(SPLIT_ONLY)
    proc = run_cli("run", *backend, "--force", "bcast:han", "-q", "--", str(src), check=False,
                   timeout=300)
    assert proc.returncode == 0 and "split-only bad=0" in proc.stdout, proc.stdout + proc.stderr


REDUCE_ONE_PER_NODE = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, in[3], out[3] = {0, 0, 0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 3; i++) in[i] = rank + i;
    MPI_Reduce(in, out, 3, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("reduce %s\n", out[2] == size * (size - 1) / 2 + 2 * size ? "ok" : "WRONG");
    MPI_Finalize();
    return 0;
}
"""


def test_han_with_one_rank_per_node_skips_the_node_step(tmp_path):
    """HAN's library intra-node module on nodes of one rank: SMPI's ompi reduce crashed on
    the one-rank node communicator (a review); there is nothing to reduce inside a node."""
    src = tmp_path / "red.c"
    src.write_text(REDUCE_ONE_PER_NODE)
    proc = run_cli("run", "--layout", "5x1", "--default-selector", "ompi", "--force",
                   "reduce:han:smod=0", "-q", "--", str(src), check=False, timeout=300)
    assert proc.returncode == 0 and "reduce ok" in proc.stdout, proc.stdout + proc.stderr
