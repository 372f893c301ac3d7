"""Profile data (issue 17): SMPI's message trace reader, load_profile's merge of rank files,
trace and model, visibility labels, missing ranks, bad input, and the versioned files.
Real SMPI runs (smpirun, colltune run --profile) where the data comes from one; hand-written
rank files only for what no run on this machine produces (MPICH / Open MPI labels, errors)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from colltune import platforms
from colltune.profile import load_topology, simtrace
from colltune.profile.counts import ProfileError, load_profile
from colltune.profile.files import SCHEMA, read_csv, write_traffic
from colltune.profile.loads import link_loads

from conftest import REPO, have_mpi, run_cli

# rank 0 sends to rank 1 with every point-to-point call once (bytes 101..112, tag = bytes - 100),
# then two sends that carry nothing (MPI_PROC_NULL) and one to itself (115 bytes)
ZOO = r"""
#include <mpi.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv); int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
  static char b[8192], bb[65536]; MPI_Request q[2]; MPI_Buffer_attach(bb, sizeof bb);
  if (r == 0) {
    MPI_Send(b, 101, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    MPI_Isend(b, 102, MPI_CHAR, 1, 2, MPI_COMM_WORLD, q); MPI_Wait(q, MPI_STATUS_IGNORE);
    MPI_Ssend(b, 103, MPI_CHAR, 1, 3, MPI_COMM_WORLD);
    MPI_Issend(b, 104, MPI_CHAR, 1, 4, MPI_COMM_WORLD, q); MPI_Wait(q, MPI_STATUS_IGNORE);
    MPI_Rsend(b, 105, MPI_CHAR, 1, 5, MPI_COMM_WORLD);
    MPI_Bsend(b, 106, MPI_CHAR, 1, 6, MPI_COMM_WORLD);
    MPI_Ibsend(b, 107, MPI_CHAR, 1, 7, MPI_COMM_WORLD, q); MPI_Wait(q, MPI_STATUS_IGNORE);
    MPI_Sendrecv(b, 108, MPI_CHAR, 1, 8, b + 4000, 10, MPI_CHAR, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv_replace(b, 109, MPI_CHAR, 1, 9, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send_init(b, 110, MPI_CHAR, 1, 10, MPI_COMM_WORLD, q); MPI_Start(q);
    MPI_Wait(q, MPI_STATUS_IGNORE); MPI_Request_free(q);
    MPI_Send_init(b, 111, MPI_CHAR, 1, 11, MPI_COMM_WORLD, q);
    MPI_Send_init(b, 112, MPI_CHAR, 1, 12, MPI_COMM_WORLD, q + 1);
    MPI_Startall(2, q); MPI_Waitall(2, q, MPI_STATUSES_IGNORE); MPI_Request_free(q); MPI_Request_free(q + 1);
    MPI_Send(b, 113, MPI_CHAR, MPI_PROC_NULL, 13, MPI_COMM_WORLD);
    MPI_Isend(b, 114, MPI_CHAR, MPI_PROC_NULL, 14, MPI_COMM_WORLD, q); MPI_Wait(q, MPI_STATUS_IGNORE);
    MPI_Isend(b, 115, MPI_CHAR, 0, 15, MPI_COMM_WORLD, q);
    MPI_Recv(b + 5000, 115, MPI_CHAR, 0, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Wait(q, MPI_STATUS_IGNORE);
  } else if (r == 1) {
    for (int t = 1; t <= 7; t++) MPI_Recv(b, 8192, MPI_CHAR, 0, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(b, 10, MPI_CHAR, 0, 8, b + 100, 8192, MPI_CHAR, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(b, 8192, MPI_CHAR, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(b, 109, MPI_CHAR, 0, 9, MPI_COMM_WORLD);
    for (int t = 10; t <= 12; t++) MPI_Recv(b, 8192, MPI_CHAR, 0, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Bcast(b, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Finalize(); return 0;
}
"""
PROFCOUNT = str(Path(REPO, "native", "tests", "profcount.c"))


def _smpirun(tmp_path: Path, source: str, np_: int, extra: list[str]) -> Path:
    src = tmp_path / "app.c"
    src.write_text(source)
    subprocess.run(["smpicc", "-O1", str(src), "-o", str(tmp_path / "app")], check=True,
                   capture_output=True)
    plat = platforms.load("small")
    hostfile = plat.write_hostfile(1, np_, tmp_path / "hostfile")
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["smpirun", "-np", str(np_), "-platform", plat.xml_path, "-hostfile", hostfile,
                    *plat.smpirun_cfg_args(), *extra, "--log=xbt_cfg.thres:warning",
                    "--log=smpi_config.thres:error", str(tmp_path / "app")],
                   check=True, capture_output=True, cwd=tmp_path, timeout=120)
    return out


def test_trace_every_p2p_call_once(tmp_path):
    out = _smpirun(tmp_path, ZOO, 4, simtrace.smpirun_args(tmp_path / "out"))
    info = simtrace.TraceInfo("")
    msgs = list(simtrace.read_trace(simtrace.trace_path(out), info))
    p2p = [(m.sender, m.receiver, m.bytes, m.call) for m in msgs if m.kind == "p2p"]
    calls = ["Send", "Isend", "Ssend", "Issend", "Send", "Bsend", "Ibsend", "Sendrecv", "Sendrecv",
             "Start", "Startall", "Startall"]
    want = [(0, 1, 101 + i, "PMPI_" + c) for i, c in enumerate(calls)]
    want.insert(8, (1, 0, 10, "PMPI_Sendrecv"))            # rank 1's side of the Sendrecv
    want.insert(10, (1, 0, 109, "PMPI_Send"))              # and its reply to Sendrecv_replace
    want.append((0, 0, 115, "PMPI_Isend"))                 # to itself; MPI_PROC_NULL: nothing
    assert p2p == want
    bcast = [(m.sender, m.receiver, m.bytes) for m in msgs if m.kind == "bcast"]
    assert sorted(bcast) == [(0, 1, 1000), (0, 2, 1000), (2, 3, 1000)]     # SMPI's binomial
    assert info.version.startswith("3.32") and info.ranks and info.size == 4
    # the bindings' own traces: Isend Ssend Issend Ibsend, Sendrecv x3 (both sides, _replace),
    # the Isend to MPI_PROC_NULL (its only trace) and the Isend to itself
    assert info.dropped_duplicates == 9
    assert all(a.time <= b.time for a, b in zip(msgs, msgs[1:]))


def test_trace_without_sizes_is_refused(tmp_path):
    args = [a for a in simtrace.smpirun_args(tmp_path / "out") if "display-sizes" not in a]
    out = _smpirun(tmp_path, ZOO, 2, args)
    with pytest.raises(simtrace.TraceError, match=r"simgrid\.trace:\d+: .*display-sizes"):
        list(simtrace.read_trace(simtrace.trace_path(out)))


def test_a_cut_trace_is_named_not_read_as_complete(tmp_path):
    """A trace cut mid-line had been an IndexError traceback, one cut at a line end was read
    as the whole run; SMPI destroys a rank's container at MPI_Finalize, so a trace without
    those ends says which ranks it lost."""
    out = _smpirun(tmp_path, ZOO, 4, simtrace.smpirun_args(tmp_path / "out"))
    whole = simtrace.trace_path(out)
    info = simtrace.TraceInfo("")
    list(simtrace.read_trace(whole, info))
    assert info.size == 4 and info.unfinished() == []
    lines = open(whole).read().splitlines(keepends=True)
    start = next(ln.split()[2] for ln in lines if ln.startswith("%EventDef PajeStartLink "))
    link = next(i for i, ln in enumerate(lines) if i > len(lines) // 2 and ln.split()[0] == start)
    cut = tmp_path / "cut.trace"
    cut.write_text("".join(lines[:link]))
    info = simtrace.TraceInfo("")
    whole = list(simtrace.read_trace(str(cut), info))
    assert info.unfinished() == [0, 1, 2, 3] and info.cut_at == 0
    # cut in the middle of a line (a partial copy, a simulation that died writing): read up
    # to the line before, and where it was cut is kept for the notes; a message cut after
    # its first fields had been refused as "message without a size" (an analyst's review)
    for keep in (2, 6):
        mid = tmp_path / f"mid{keep}.trace"
        mid.write_text("".join(lines[:link]) + " ".join(lines[link].split()[:keep]))
        info = simtrace.TraceInfo("")
        assert list(simtrace.read_trace(str(mid), info)) == whole
        assert info.cut_at == link + 1 and info.unfinished() == [0, 1, 2, 3]


def test_call_kinds():
    assert [simtrace.call_kind(c) for c in ("PMPI_Allreduce", "PMPI_Ibcast", "PMPI_Sendrecv",
                                            "PMPI_Comm_split", "", "PMPI_Reduce_scatter_block")] == \
        ["allreduce", "bcast", "p2p", "other", "other", "reduce_scatter_block"]


@pytest.fixture(scope="module")
def profcount(tmp_path_factory):
    """profcount (H1's counting check program) on 6 ranks, colltune's ring allreduce forced."""
    out = tmp_path_factory.mktemp("pc") / "prof"
    run_cli("run", "--platform", "small", "--profile", str(out), "--force", "allreduce:ring",
            "-n", "6", "--", PROFCOUNT, timeout=300)
    return out


def _tot(prof, region, kind=None, source=None):
    return prof.pairs(region, kind, source).total


def test_profile_of_smpi_run(profcount):
    prof = load_profile(profcount)
    n = prof.size
    assert n == 6 and prof.missing == [] and prof.hosts == ["node-0"] * 4 + ["node-1"] * 2
    assert prof.regions() == ["run", "p2p", "outer", "inner", "pcontrol-7", "coll"]
    # nested regions sum into their parents, everything into run (ring_step: bytes x n)
    assert _tot(prof, "inner", "p2p") == (20 * n, n)
    assert _tot(prof, "outer", "p2p") == ((10 + 20 + 30) * n, 3 * n)
    assert _tot(prof, "pcontrol-7", "p2p") == (40 * n, n)
    top = [_tot(prof, r, "p2p") for r in ("p2p", "outer", "pcontrol-7")]
    assert _tot(prof, "run", "p2p") == tuple(map(sum, zip(*top)))
    # the trace agrees with the rank files: its p2p = the interposer's + colltune's sends
    assert not [x for x in prof.notes if "differ" in x]
    for r in prof.regions():
        t, i, c = _tot(prof, r, "p2p", "simulator"), _tot(prof, r, "p2p", "interposer"), \
            _tot(prof, r, None, "colltune")
        assert t == (i[0] + c[0], i[1] + c[1]), r
    # the paused ring step and allreduce are in neither
    assert any("paused" in x for x in prof.notes)
    # library collectives from the trace, split by kind: SMPI's binomial bcast, 2 calls
    assert _tot(prof, "coll", "bcast") == (2 * 1000 * (n - 1), 2 * (n - 1))
    assert prof.visibility("coll", "bcast") == "simulator"
    assert prof.visibility("coll", "allreduce") == "exact"             # colltune's ring
    assert prof.visibility("p2p", "p2p") == "exact"
    assert prof.visibility("coll") == "simulator"
    assert prof.library[("coll", "bcast")]["calls"] == 2 * n
    # merged matrix: the trace's p2p is not counted twice
    B, M = prof.matrix("run")
    assert B.sum() == sum(_tot(prof, "run", k)[0] for k in prof.kinds("run"))
    assert B.sum() < sum(_tot(prof, "run", None, s)[0] for s in prof.sources("run"))
    sub = prof.select(region="coll", kind="bcast")
    assert np.array_equal(sub.matrix("coll")[0], prof.matrix("coll", "bcast")[0])
    assert sub.regions() == ["coll"] and sub.kinds() == ["bcast"]
    HB, HM, hosts = prof.host_matrix("run")
    assert hosts == ["node-0", "node-1"] and HB.sum() == B.sum() and HM.sum() == M.sum()


def test_crashed_rank_is_reported_not_filled(tmp_path):
    out = tmp_path / "prof"
    proc = run_cli("run", "--platform", "small", "--profile", str(out), "-n", "4", "--",
                   PROFCOUNT, "crash", timeout=300, check=False)
    assert proc.returncode != 0
    prof = load_profile(out)
    assert prof.missing == [1] and prof.hosts[1] == ""
    assert any("1 of 4 ranks left no file" in x for x in prof.notes)
    # its traced sends are kept, in "run" only (no intervals to split them by)
    assert _tot(prof, "p2p", "p2p", "interposer")[0] > 0
    assert prof.matrix("p2p", "p2p", "interposer")[0][1].sum() == 0
    assert prof.matrix("run", None, "simulator")[0][1].sum() > 0


def test_files_written_and_read_back(profcount, tmp_path):
    prof = load_profile(profcount)
    topo = load_topology("small")
    paths = write_traffic(prof, topo, tmp_path / "x")
    assert [Path(p).name for p in paths] == ["traffic.json", "rank_matrix.csv", "node_matrix.csv", "links.csv"]
    doc = json.loads(Path(paths[0]).read_text())
    assert doc["schema"] == SCHEMA and doc["regions"] == prof.regions() and doc["size"] == 6
    unit = doc["traffic"]["coll"]["bcast"]
    assert unit["visibility"] == "simulator" and unit["library_calls"] == 12
    rows = read_csv(paths[1])
    run_all = [r for r in rows if r["region"] == "run" and r["kind"] == "all"]
    B, M = prof.matrix("run")
    assert sum(int(r["bytes"]) for r in run_all) == B.sum()
    assert all(int(r["bytes"]) == B[int(r["sender"]), int(r["receiver"])] for r in run_all)
    links = [r for r in read_csv(paths[3]) if r["region"] == "run" and r["kind"] == "all"]
    HB, HM, hosts = prof.host_matrix("run")
    ld = link_loads(topo, HB, HM, hosts=hosts)
    assert {r["link"]: int(r["bytes"]) for r in links} == {k: int(v[0]) for k, v in ld.nonzero().items()}
    assert doc["traffic"]["run"]["all"]["most_loaded"]["id"] == ld.most_loaded()[0].id
    # a host the topology does not know: reported, skipped
    prof.hosts[5] = "elsewhere"
    doc2 = json.loads(Path(write_traffic(prof, topo, tmp_path / "y")[0]).read_text())
    assert any("elsewhere" in x and "not in the topology" in x for x in doc2["notes"])
    with pytest.raises(ValueError, match="rank_matrix.csv:1"):
        bad = tmp_path / "rank_matrix.csv"
        bad.write_text("region,kind\n")
        read_csv(bad)


# ---- hand-written rank files: the labels of MPICH and Open MPI runs, and bad input ----------
def _write(d: Path, job: dict, ranks: dict[int, dict]):
    d.mkdir(parents=True, exist_ok=True)
    (d / "job.json").write_text(json.dumps({"schema": "colltune-profile-job/1", **job}))
    for r, body in ranks.items():
        (d / f"rank-{r}.json").write_text(json.dumps(
            {"schema": "colltune-profile-rank/1", "rank": r, "size": job["size"], "host": f"h{r // 2}",
             "regions": ["run", "step"], "intervals": [[1, 1.0, 2.0]], "intervals_dropped": 0,
             "counts": [], "comms": [[0, 1, 2, 3]], "library_calls": [], **body}))


def test_mpich_modelled_and_not_visible(tmp_path):
    calls = [{"region": 1, "kind": "bcast", "comm": 0, "root": 0, "bytes": 8, "calls": 3},
             {"region": 1, "kind": "allgather", "comm": 0, "root": -1, "bytes": 8, "calls": 1}]
    _write(tmp_path, {"size": 4, "backend_hint": "mpich",
                      "settings": {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}},
           {r: {"library_calls": calls} for r in (0, 1, 3)})           # rank 2's file is missing
    prof = load_profile(tmp_path)
    assert prof.missing == [2] and prof.hosts == ["h0", "h0", "", "h1"]
    B, M = prof.matrix("step", "bcast")
    want = np.zeros((4, 4), dtype=int)
    want[0, 2] = want[0, 1] = 3                     # MPICH binomial from 0: 0->2, 0->1, (2->3 lost)
    assert np.array_equal(M, want) and np.array_equal(B, want * 8)
    assert np.array_equal(prof.matrix("run", "bcast")[0], B)
    assert prof.visibility("step", "bcast") == "modelled"
    assert prof.visibility("step", "allgather") == "not visible"
    assert prof.visibility("step") == "not visible"
    assert any("allgather x3" in x and "forced: MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial" in x
               for x in prof.notes)


def test_openmpi_monitoring_labels(tmp_path):
    calls = [{"region": 0, "kind": "alltoall", "comm": 0, "root": -1, "bytes": 8, "calls": 1}]
    counts = [{"region": 0, "kind": "alltoall", "source": "monitoring", "peers": [[1, 8, 1]]}]
    _write(tmp_path / "on", {"size": 2, "backend_hint": "openmpi", "monitoring": "on"},
           {0: {"library_calls": calls, "counts": counts}, 1: {"library_calls": calls}})
    _write(tmp_path / "off", {"size": 2, "backend_hint": "openmpi", "monitoring": "off"},
           {0: {"library_calls": calls}, 1: {"library_calls": calls}})
    on, off = load_profile(tmp_path / "on"), load_profile(tmp_path / "off")
    assert on.visibility("run", "alltoall") == "monitoring"
    assert on.matrix("run", "alltoall")[0][0, 1] == 8
    assert off.visibility("run", "alltoall") == "not visible"
    assert off.matrix("run", "alltoall")[0].sum() == 0
    assert any("monitoring was off" in x for x in off.notes)


def test_bad_input_names_file_and_field(tmp_path):
    with pytest.raises(ProfileError, match="not a profile directory"):
        load_profile(tmp_path)
    _write(tmp_path, {"size": 2}, {0: {"intervals": [[1, 3.0, 2.0]]}})
    with pytest.raises(ProfileError, match=r"rank-0\.json: intervals\[0\]"):
        load_profile(tmp_path)
    _write(tmp_path, {"size": 2}, {0: {"counts": [{"region": 7, "kind": "p2p", "source": "interposer", "peers": []}]}})
    with pytest.raises(ProfileError, match=r"rank-0\.json: counts\[0\]: region 7"):
        load_profile(tmp_path)
    (tmp_path / "rank-0.json").write_text('{"schema": "other/9"}')
    with pytest.raises(ProfileError, match=r"rank-0\.json: schema 'other/9'"):
        load_profile(tmp_path)
    (tmp_path / "rank-0.json").write_text('{"schema": ')
    with pytest.raises(ProfileError, match=r"rank-0\.json:1: not JSON"):
        load_profile(tmp_path)
    # an analyst's review: a peer past the job's ranks had been booked to another pair
    _write(tmp_path, {"size": 2}, {0: {"counts": [{"region": 0, "kind": "p2p", "source": "interposer",
                                                    "peers": [[42, 3000, 3]]}]}})
    with pytest.raises(ProfileError, match=r"rank-0\.json: counts\[0\]: peer entry \[42, 3000, 3\]: "
                                           r"rank 42 is not a rank of the job \(2 ranks\)"):
        load_profile(tmp_path)
    # and a job.json size that is no number had been a bare int() error
    _write(tmp_path, {"size": "eight"}, {0: {}})
    with pytest.raises(ProfileError, match=r"job\.json: field 'size' is 'eight', expected the job's rank count"):
        load_profile(tmp_path)


OWN = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    char buf[1000] = {0};
    MPI_Init(&argc, &argv);
    MPI_Pcontrol(100, "bc");
    MPI_Bcast(buf, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Pcontrol(-100, "bc");
    MPI_Finalize();
    return 0;
}
"""


def test_colltunes_own_traffic_is_not_the_applications(tmp_path):
    """A program with one bcast: libcolltune's agreements in MPI_Init / MPI_Finalize and its
    set-up of MPI_COMM_WORLD on the first bcast (PMPI_Allreduce) had shown as the program's
    allreduce traffic, in the run and in the bcast's region. They are left out, and noted."""
    src = tmp_path / "own.c"
    src.write_text(OWN)
    out = tmp_path / "prof"
    run_cli("run", "--platform", "small", "--profile", str(out), "--force", "bcast:linear",
            "-n", "4", "--", str(src), timeout=300)
    prof = load_profile(out)
    assert _tot(prof, "run", "allreduce")[0] == 0 and _tot(prof, "bc", "allreduce")[0] == 0
    assert _tot(prof, "bc", "bcast")[0] == 3000                  # linear: 3 x 1000 B
    assert any("were colltune's own" in n for n in prof.notes), prof.notes


UNCOUNTED = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    char buf[1000] = {0};
    int rank, win_mem[4] = {0};
    MPI_Request q;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Pcontrol(100, "nb");
    MPI_Ibcast(buf, 1000, MPI_CHAR, 0, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Pcontrol(-100, "nb");
    MPI_Win_create(win_mem, sizeof win_mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    if (rank == 0) MPI_Put(&rank, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
def test_uncounted_calls_are_named_not_a_silent_zero(tmp_path):
    """On a real library an MPI_Ibcast and an MPI_Put had vanished from the profile, with
    nothing in 'what is missing' (a review): their calls are counted, and said missing."""
    src = tmp_path / "nb.c"
    src.write_text(UNCOUNTED)
    out = tmp_path / "prof"
    run_cli("run", "--backend", "local", "--mpi", "openmpi", "-n", "2", "--profile", str(out),
            "--", str(src), timeout=300)
    prof = load_profile(out)
    notes = prof.notes
    assert "region 'nb': 2 MPI_Ibcast call(s) on 2 rank(s) whose traffic no counter sees" in \
        " ".join(notes), notes
    assert any("region 'run': 1 MPI_Put call(s) on 1 rank(s)" in n for n in notes), notes
    # and the kind is not visible there, not 'exact' (an analyst's review: a region of only
    # non-blocking collectives had been absent, its kinds labelled exact)
    assert prof.visibility("nb", "bcast") == prof.visibility("run", "bcast") == "not visible"
    assert prof.library[("nb", "bcast")]["calls"] == 2


def test_rank_files_of_two_runs_are_refused(tmp_path):
    """Every rank file names the run that wrote it (COLLTUNE_PROFILE_JOB, set by `colltune
    run --profile`): another run's rank file of the same size had been merged silently,
    giving totals of neither run (an analyst's review)."""
    src = tmp_path / "own.c"
    src.write_text(OWN)
    for name in ("one", "two"):
        run_cli("run", "--platform", "small", "--profile", str(tmp_path / name), "-n", "4", "--",
                str(src), timeout=300)
    one = load_profile(tmp_path / "one")
    assert one.meta["job"].startswith("colltune-run:")
    shutil.copy(tmp_path / "two" / "rank-1.json", tmp_path / "one" / "rank-1.json")
    with pytest.raises(ProfileError) as exc:
        load_profile(tmp_path / "one")
    msg = str(exc.value)
    assert "files of 2 runs (" in msg and "profile each run into its own folder" in msg
    assert re.search(r"colltune-run:\w+: ranks 0,2-3", msg) and re.search(r"colltune-run:\w+: ranks 1;", msg)
    assert f"job.json: {one.meta['job']}" in msg


def test_traffic_of_a_rank_without_file_is_said_to_include_colltunes_own(tmp_path):
    """Without its rank file, a rank's traced messages cannot be told from colltune's own
    (the times are in that file): they had silently become the application's allreduce.
    They stay in 'run', and a note says how many and that colltune's are among them."""
    src = tmp_path / "own.c"
    src.write_text(OWN)
    out = tmp_path / "prof"
    run_cli("run", "--platform", "small", "--profile", str(out), "--force", "bcast:linear",
            "-n", "4", "--", str(src), timeout=300)
    (out / "rank-3.json").unlink()
    prof = load_profile(out)
    note = next(n for n in prof.notes if "which left no file" in n)
    assert re.match(r"\d+ traced messages \(\d+ B\) were sent by rank\(s\) 3, which left no file: "
                    r"they are counted in 'run' only, colltune's own among them", note), note
    assert prof.missing == [3]


def test_files_with_and_without_a_run_id_are_two_runs(tmp_path):
    """A rank file that names no run (a job started by hand, an older build) beside files of
    a colltune run is another run's: refused, not merged."""
    body = {"counts": []}
    _write(tmp_path, {"size": 2, "job": "colltune-run:aaaa"}, {0: {**body, "job": "colltune-run:aaaa"},
                                                               1: body})
    with pytest.raises(ProfileError, match=r"files of 2 runs \(no run id: ranks 1; colltune-run:aaaa: "
                                           r"ranks 0; job\.json: colltune-run:aaaa\)"):
        load_profile(tmp_path)
