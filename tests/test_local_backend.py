"""The local backend on the real Open MPI and MPICH libraries of this machine:
algorithm lists read from the libraries, forced algorithms that really run (or
fail loudly), labels of what ran, and a small tuning campaign."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import CACHE, have_mpi, run_cli

from colltune import config
from colltune.backends.base import Launch
from colltune.backends.local import LocalBackend, host_cores
from colltune.errors import BackendError
from colltune.providers.mpich import NOT_CANDIDATES
from colltune.plan import BenchSpec
from colltune.providers.base import COLLECTIVES, SELECTOR
from colltune.providers.openmpi import ran

# Few repetitions: on 2 busy cores timings are noise anyway; this is about correctness.
QUICK = ("--min-reps", "3", "--max-reps", "50", "--rse", "0.2", "--timeout", "120")


needs_ompi = pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
needs_mpich = pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed (make setup)")


def _backend(name: str) -> LocalBackend:
    b = LocalBackend(config.load({"backend": "local", "mpi": name, "cache_dir": CACHE},
                                 environ={}))
    b.prepare()
    return b


@pytest.fixture(scope="module")
def settings():
    """Few repetitions (overrides conftest's sim settings for this module)."""
    return config.load({"backend": "local", "cache_dir": CACHE, "min_reps": 3, "max_reps": 30,
                        "rse": 0.2}, environ={})


@pytest.fixture(scope="module")
def ompi():
    return _backend("openmpi")


@pytest.fixture(scope="module")
def mpich():
    return _backend("mpich")


def _bench_until_timed(workdir, campaign: str, *args: str) -> list[dict]:
    """Run a bench; re-measure (--retry-failed) points left without a valid timed
    repetition: on a loaded 2-core host every repetition of a point can start late."""
    for attempt in range(3):
        run_cli("bench", *args, "--campaign", campaign, *QUICK,
                *(["--retry-failed"] if attempt else []), check=False)
        recs = _records(workdir, campaign)
        if all(r["status"] == "ok" for r in recs) or any(
                r["check_error"] != "no time reported" for r in recs if r["status"] != "ok"):
            break
    return recs


def _records(workdir, campaign: str) -> list[dict]:
    out = run_cli("results", "--store", str(workdir / "store.sqlite"), "export",
                  "--format", "jsonl", "--campaign", campaign).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# -- algorithm lists come from the libraries --------------------------------------

@needs_ompi
def test_openmpi_algorithms_are_ompi_infos_enumerators(ompi):
    impl = ompi.impl
    out = subprocess.run([impl.info_tool, "--param", "coll", "tuned", "--level", "9",
                          "--parsable"], capture_output=True, text=True, env=impl.run_env(),
                         check=True).stdout
    prov = ompi.provider()
    assert set(prov.collectives()) == set(COLLECTIVES)
    for coll in COLLECTIVES:
        listed = dict((name, int(v)) for v, name in re.findall(
            rf"coll_tuned_{coll}_algorithm:enumerator:value:(\d+):(\S+)", out))
        listed.pop("ignore")
        assert listed and prov.algorithm_ids(coll) == listed
        assert [a.name for a in prov.algorithms(coll) if not a.params] == \
            sorted(listed, key=listed.get)
        # the segmented presets: an algorithm of the list, a parameter it takes
        for a in prov.algorithms(coll):
            assert not a.params or (a.name in listed and
                                    set(dict(a.params)) <= set(prov.parameters(coll, a.name)))
        assert [(s.name, s.kind) for s in prov.selectors(coll)] == [("default", SELECTOR)]
    # forcing: tuned's variable by number, and han (priority 35 > tuned 30) switched off
    env = prov.force(prov.lookup("bcast", "binomial")).env
    assert env["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"
    assert env["OMPI_MCA_coll_tuned_bcast_algorithm"] == str(prov.algorithm_ids("bcast")["binomial"])
    assert env["OMPI_MCA_coll_han_priority"] == "0"
    assert prov.force(prov.lookup("bcast", "default")).env == {}


@needs_mpich
def test_mpich_algorithms_are_the_cvar_descriptions(mpich):
    prov = mpich.provider()
    assert set(prov.collectives()) == set(COLLECTIVES)
    # mpivars (MPICH's own MPI_T dump) is an independent witness of the lists
    mpivars = os.path.join(os.path.dirname(mpich.impl.cc), "mpivars")
    text = subprocess.run([mpivars], capture_output=True, text=True, timeout=60,
                          env=mpich.impl.run_env()).stdout if os.path.exists(mpivars) else None
    for coll in COLLECTIVES:
        names = [a.name for a in prov.algorithms(coll) if not a.params]   # presets follow
        assert names and "auto" not in names
        desc = prov.cvars[f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM"]
        assert all(re.search(rf"^{n}\s+- ", desc, re.M) for n in names)
        if text is not None:
            block = text.split(f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM")[1].split("\tMPIR_CVAR_")[0]
            # every value but auto and the documented non-candidates (NOT_CANDIDATES)
            assert names == [n for n in re.findall(r"^(\w+)\s+- ", block, re.M)
                             if n != "auto" and n not in NOT_CANDIDATES]
    # MPI_T integer codes: what MPI_T reads back when the environment names the value
    for coll in ("bcast", "allreduce", "alltoall"):
        cvar = f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM"
        for a in prov.algorithms(coll):
            if not a.params:
                assert prov.read_cvar(cvar, {cvar: a.name}) == prov.code(cvar, a.name) > 0
        assert prov.read_cvar(cvar) == prov.code(cvar, "auto") == 0
    fb = "MPIR_CVAR_COLLECTIVE_FALLBACK"
    assert prov.read_cvar(fb, {fb: "error"}) == prov.code(fb, "error")
    mods = prov.force(prov.lookup("allreduce", "ring"))
    ring = prov.code("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "ring")
    assert mods.env == {"COLLTUNE_MPIT_CVARS": f"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM={ring},"
                                               f"{fb}={prov.code(fb, 'error')}",
                        "MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    assert mods.launcher_args == ["-genv", "LD_PRELOAD", str(prov.shim)]
    assert prov.force(prov.lookup("allreduce", "default")).env == {}


# -- benchmarks on the real libraries ------------------------------------------------

@needs_ompi
def test_openmpi_bench_forced_and_default(workdir):
    recs = _bench_until_timed(workdir, "o", "--backend", "local", "--mpi", "openmpi",
                              "--coll", "bcast", "--algorithms", "binomial,scatter_allgather,default",
                              "--layouts", "1x2", "--sizes", "8,1000")
    assert sorted((r["algorithm"], r["msg_size"]) for r in recs) == sorted(
        (a, m) for a in ("binomial", "scatter_allgather", "default") for m in (8, 1000))
    for r in recs:
        assert r["status"] == "ok" and r["valid"] == 1 and r["ttc_median_s"] > 0, r
        assert r["backend"] == "local" and r["mpi_library"] == "Open MPI"
        assert r["nodes"] == 1 and r["ppn"] == 2 and r["participants"] == 2
        if r["algorithm"] == "default":
            assert r["labels"] == {"forced": "none (library default)"}
        else:
            assert "OMPI_MCA_coll_tuned_bcast_algorithm=" in r["labels"]["forced"]
            assert r["labels"]["ran"] == r["algorithm"]     # 8 and 1000 chars >= 2 ranks


@needs_ompi
def test_openmpi_silent_switch_is_labelled(ompi, settings, tmp_path):
    """scatter_allgather bcast of fewer elements than ranks runs basic_linear."""
    assert ran("bcast", "scatter_allgather", 1, 2) == "basic_linear"
    assert ran("allreduce", "ring", 1, 2) == "recursive_doubling"      # 1 float < 2 ranks
    assert ran("allreduce", "segmented_ring", 1000, 2) == "ring"        # segment size 0
    assert ran("allgather", "recursive_doubling", 8, 3) == "bruck"
    assert ran("bcast", "binomial", 1, 2) == "binomial"
    prov = ompi.provider()
    spec = BenchSpec("bcast", prov.lookup("bcast", "scatter_allgather"), 1, 2, (1, 8),
                     procs=(1, 2))
    res = ompi.run(Launch(1, 2, spec.bench_args(settings, "first"),
                          prov.force(spec.algorithm), 120), str(tmp_path / "w"))
    assert res.clean, res.output_tail
    labels = {(r["participants"], r["msg_size"]): r["labels"] for r in res.records}
    assert labels[(2, 1)]["ran"] == "basic_linear"
    assert labels[(2, 1)]["switched_from"] == "scatter_allgather"
    assert labels[(2, 8)]["ran"] == "scatter_allgather"
    assert labels[(1, 1)]["ran"] == "self"
    assert res.command[0] == "env" and "OMPI_MCA_coll_han_priority=0" in res.command
    # the overlap scenario times MPI_Ibcast, which the tuned variable does not select
    mods = prov.force(spec.algorithm)
    over = mods.label({"scenario": "overlap", "count": 1, "participants": 2})
    assert "non-blocking" in over["ran"] and "switched_from" not in over
    assert "--shared-buffers" not in res.command


@needs_ompi
def test_openmpi_forced_variable_reaches_tuned_on_every_rank(ompi, settings, tmp_path):
    """two_proc allgather exists only for 2 ranks: forced on 3 (oversubscribed) the
    call fails, which it would not if tuned ignored the variable or han took over."""
    prov = ompi.provider()
    for name, ok in (("two_proc", False), ("ring", True)):
        alg = prov.lookup("allgather", name)
        spec = BenchSpec("allgather", alg, 1, 3, (8,))
        res = ompi.run(Launch(1, 3, spec.bench_args(settings, "only"), prov.force(alg), 120),
                       str(tmp_path / name))
        assert "--oversubscribe" in res.command or host_cores() >= 3
        assert res.clean is ok, res.output_tail
        if ok:
            assert res.records[0]["valid"] is True and res.records[0]["participants"] == 3


@needs_mpich
def test_mpich_bench_forced_and_default(workdir):
    recs = _bench_until_timed(workdir, "m", "--backend", "local", "--mpi", "mpich",
                              "--coll", "bcast", "--algorithms",
                              "binomial,scatter_ring_allgather,default",
                              "--layouts", "1x2", "--sizes", "8,1000")
    assert len(recs) == 6
    for r in recs:
        assert r["status"] == "ok" and r["valid"] == 1 and r["ttc_median_s"] > 0, r
        assert r["mpi_library"] == "MPICH"
        if r["algorithm"] != "default":
            assert "MPIR_CVAR_COLLECTIVE_FALLBACK=error (MPI_T" in r["labels"]["forced"]
            assert r["labels"]["ran"] == r["algorithm"]


@needs_mpich
def test_mpich_unusable_forced_algorithm_is_a_failure_not_a_time(mpich, settings, tmp_path,
                                                                   workdir):
    """pairwise_sendrecv_replace alltoall needs MPI_IN_PLACE: with fallback=error
    the call fails and the points are failures; silently it would be timed."""
    run_cli("bench", "--backend", "local", "--mpi", "mpich", "--coll", "alltoall",
            "--algorithms", "pairwise_sendrecv_replace", "--layouts", "1x2",
            "--sizes", "8,1000", "--campaign", "f", *QUICK, check=False)
    recs = _records(workdir, "f")
    assert len(recs) == 2
    for r in recs:
        assert r["status"] == "crashed" and r["ttc_median_s"] is None
        assert "not usable" in r["check_error"]
    # the contrast: the library's silent fallback would have produced times
    prov = mpich.provider()
    alg = prov.lookup("alltoall", "pairwise_sendrecv_replace")
    spec = BenchSpec("alltoall", alg, 1, 2, (8,))
    res = mpich.run(Launch(1, 2, spec.bench_args(settings, "only"),
                           prov.force(alg, fallback="silent"), 120), str(tmp_path / "silent"))
    assert res.clean and res.records[0]["valid"] is True


@needs_mpich
def test_mpich_forcing_spares_mpi_init(mpich, settings, tmp_path):
    """Forced through MPI_T after MPI_Init, an algorithm unusable for MPICH's own
    start-up collectives still runs the measured call (from the environment,
    reduce_scatter_allgather allreduce on 2 ranks aborts inside MPI_Init)."""
    prov = mpich.provider()
    alg = prov.lookup("allreduce", "reduce_scatter_allgather")
    spec = BenchSpec("allreduce", alg, 1, 2, (8, 4096))
    res = mpich.run(Launch(1, 2, spec.bench_args(settings, "only"), prov.force(alg), 120),
                    str(tmp_path / "rsag"))
    assert res.clean, res.output_tail
    assert [r["valid"] for r in res.records] == [True, True]
    # and a failure in the measured call happens after start-up (the header is written)
    alg = prov.lookup("bcast", "smp")
    spec = BenchSpec("bcast", alg, 1, 2, (8,))
    res = mpich.run(Launch(1, 2, spec.bench_args(settings, "only"), prov.force(alg), 120),
                    str(tmp_path / "smp"))
    assert not res.clean and res.header is not None and not res.records
    assert "not usable" in res.output_tail and "MPIR_Bcast_impl" in res.output_tail


@needs_mpich
def test_mpich_tune_writes_a_decision_table(workdir):
    table = workdir / "t.json"
    proc = run_cli("tune", "--backend", "local", "--mpi", "mpich", "--collectives", "allreduce",
                   "--layouts", "1x2", "--sizes", "8,4096", "--campaign", "t",
                   "--algorithms", "recursive_doubling,ring,tree,reduce_scatter_allgather",
                   "--table", str(table), *QUICK)
    data = json.loads(table.read_text())
    assert data["provenance"]["backend"] == "local"
    assert data["provenance"]["mpi_library"] == "MPICH"
    (entry,) = data["entries"]
    assert (entry["collective"], entry["nodes"], entry["ppn"]) == ("allreduce", 1, 2)
    assert all(r["provider"] == "mpich" for r in entry["rules"])
    algs = {a for a in (r["algorithm"] for r in entry["rules"])}
    assert algs and "default" not in algs
    recs = _records(workdir, "t")
    # tree's tuning presets are measured beside it, forced through their control variables
    assert {r["algorithm"] for r in recs} == {"recursive_doubling", "ring", "tree", "tree[k=4]",
                                              "tree[chunk_size=65536]",
                                              "reduce_scatter_allgather", "default"}
    assert all("MPIR_CVAR_ALLREDUCE_TREE_KVAL=4" in r["labels"]["forced"]
               for r in recs if r["algorithm"] == "tree[k=4]")
    assert "decision table" in proc.stdout


@pytest.mark.parametrize("name", ["openmpi", "mpich"])
def test_timeout_kills_every_rank(name, settings, tmp_path):
    if not have_mpi(name):
        pytest.skip(f"{name} not installed")
    b = _backend(name)
    # a real hang at the third point (rank 0 blocks in pause()): a long run of small bcasts
    # had all its points done within the 2 s on an idle machine
    args = ["--coll", "bcast", "--sizes", "8,16,32,64", "--check", "none", "--hang-at-size", "32"]
    before = _session_dirs()
    res = b.run(Launch(1, 2, args, timeout=2.0), str(tmp_path / "hang"))
    assert res.timed_out and res.exit_code is None
    marker = str(tmp_path / "hang" / "records.jsonl")
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], f"ranks still running after the timeout: {left}"
    left_dirs = _dirs_left_behind(before)
    assert left_dirs == set(), f"the killed launcher's session dir was left: {left_dirs}"


def _dirs_left_behind(before: set[str], settle_s: float = 10.0) -> set[str]:
    """Session dirs that appeared since `before` and whose launcher is gone. Another
    worker's killed launcher leaves one for the moment before colltune removes it, so a
    dir counts only if it is still there after `settle_s`; ours, never removed, stays."""
    deadline = time.monotonic() + settle_s
    while True:
        left = {d for d in _session_dirs() - before if not _launcher_alive(d)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _session_dirs() -> set[str]:
    """PRRTE session dirs (<tmp>/<name>.<pid> holding pmix.* files) there are now."""
    return {os.path.dirname(f) for f in glob.glob(os.path.join(tempfile.gettempdir(), "*.*",
                                                               "pmix.*"))}


def _launcher_alive(session_dir: str) -> bool:
    """Is the launcher that owns <name>.<pid> still running? Then the dir is another test's
    live run (make test runs two pytest-xdist workers), not one left behind."""
    pid = session_dir.rsplit(".", 1)[-1]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


# A launcher run as the second process of a fresh pid namespace always gets pid 2.
_AS_PID_2 = """
import subprocess, sys
from colltune.proc import run_group
cmd = sys.argv[1:]
if cmd[0] == "--kill-after-2s":
    try:
        run_group(cmd[1:], timeout=2.0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        sys.exit(0)
    sys.exit("the launcher ended before its timeout")
sys.exit(subprocess.run(cmd, capture_output=True).returncode)
"""


@needs_ompi
def test_killed_launcher_leaves_no_session_dir_for_the_next_with_its_pid(ompi, tmp_path):
    """Open MPI's launcher keeps its PMIx rendezvous in <tmp>/ompi.<pid> and removes it
    on exit, not when SIGKILLed; a later launcher given the same pid dies (exit 213,
    "listener thread failed to start"): one CI run failed so after the pids wrapped.
    Two fresh pid namespaces give both launchers pid 2; colltune killing the first on
    its timeout must leave nothing that fails the second."""
    unshare = shutil.which("unshare")
    probe = unshare and subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                                       capture_output=True)
    if not probe or probe.returncode != 0:
        pytest.skip("needs unshare --pid (root) to reuse a pid on purpose")
    env = ompi.impl.run_env()
    as_pid_2 = [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-c", _AS_PID_2]
    first = subprocess.run([*as_pid_2, "--kill-after-2s", ompi.impl.launcher, "-n", "1",
                            "sleep", "60"], capture_output=True, text=True, env=env, timeout=60)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([*as_pid_2, ompi.impl.launcher, "-n", "1", "true"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert second.returncode == 0, f"the next launcher with pid 2 failed: {second.returncode}"


# -- layout limits and provenance ------------------------------------------------------

@needs_ompi
def test_several_nodes_is_a_clear_error(workdir, ompi, settings, tmp_path):
    proc = run_cli("bench", "--backend", "local", "--mpi", "openmpi", "--coll", "bcast",
                   "--layouts", "2x1", "--sizes", "8", *QUICK, check=False)
    assert proc.returncode == 2 and "one host" in proc.stderr
    with pytest.raises(BackendError):
        ompi.run(Launch(1, 10_000, []), str(tmp_path / "big"))
    # more ranks than cores: Open MPI needs --oversubscribe, and provenance says so
    many = host_cores() + 1
    cmd = ompi.command(Launch(1, many, ["--coll", "bcast"]), "x.json")
    assert "--oversubscribe" in cmd and "--shared-buffers" not in cmd
    assert "--oversubscribe" not in ompi.command(Launch(1, 1, []), "x.json")
    prov = ompi.provenance()
    assert prov["backend"] == "local" and prov["mpi_library"] == "Open MPI"
    assert prov["mpi_version"] == ompi.impl.version and "oversubscribe" in prov["note"]


def test_info_lists_local_providers():
    info = json.loads(run_cli("info", "--json").stdout)
    for name in ("openmpi", "mpich"):
        if have_mpi(name):
            assert info["providers"][name]["bcast"]["algorithms"]
            assert info["providers"][name]["bcast"]["selectors"] == ["default"]


BROKEN_ALLREDUCE = r"""
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
/* every 4th rank but 0 loses its contribution: a partner at distance 4 dropped */
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Type_size(t, &size);
    if (rank % 4 || !rank || s == MPI_IN_PLACE) return PMPI_Allreduce(s, r, n, t, op, c);
    void *z = calloc((size_t)n + 1, (size_t)size);
    int rc = PMPI_Allreduce(z, r, n, t, op, c);
    free(z);
    return rc;
}
"""


@needs_mpich
def test_bench_check_sees_a_lost_contribution_at_count_one(tmp_path):
    """colltune-bench's result check: each rank's values differ from every other rank's
    at every element, so a rank whose contribution is lost changes the sum at 1 element
    (the earlier values, 0..3 repeating every 4 ranks, gave rank 4 a 0 at count 1)."""
    from colltune import mpi, native
    impl = mpi.find("mpich")
    bench = native.build(impl, "bench", CACHE)
    src = tmp_path / "broken.c"
    src.write_text(BROKEN_ALLREDUCE)
    lib = tmp_path / "libbroken.so"
    subprocess.run([impl.cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   env=impl.run_env())
    out = tmp_path / "out.json"
    proc = subprocess.run([impl.launcher, "-n", "5", "-genv", "LD_PRELOAD", str(lib), str(bench),
                           "--coll", "allreduce", "--sizes", "4,40,1000", "--check", "only",
                           "--json", str(out)], capture_output=True, text=True,
                          env=impl.run_env(), timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr      # 3: a result check failed
    recs = [json.loads(ln) for ln in out.read_text().splitlines() if ln.startswith("{")]
    points = [r for r in recs if r.get("type") == "measurement"]
    assert {int(r["msg_size"]) for r in points} == {4, 40, 1000}
    assert all(r["valid"] is False and "wrong sum" in r.get("check_error", "") for r in points), recs


@needs_mpich
def test_tune_says_when_its_ranks_oversubscribe_the_host(workdir):
    """A 4-rank tune on 2 cores printed 'geomean speedup 19.8x' with no word that its
    ranks time-shared the cores (a review); the outcome now says so, and only then."""
    ranks = host_cores() + 1
    out = run_cli("tune", "--backend", "local", "--mpi", "mpich", "--collectives", "bcast",
                  "--layouts", f"1x{ranks}", "--sizes", "8", "--algorithms", "binomial",
                  "--campaign", "over", *QUICK).stdout
    assert f"ran more ranks ({ranks}) than this host's {host_cores()} cores" in out, out
    out = run_cli("tune", "--backend", "local", "--mpi", "mpich", "--collectives", "bcast",
                  "--layouts", "1x2", "--sizes", "8", "--algorithms", "binomial",
                  "--campaign", "fits", *QUICK).stdout
    assert "than this host's" not in out or host_cores() < 2, out
