"""Campaigns on the real SMPI backend: failures are recorded and isolated,
interrupted campaigns resume, decision tables and exports come out."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from colltune import config
from colltune.campaign import Campaign
from colltune.plan import BenchSpec
from colltune.results import Results
from colltune.store import Store

from conftest import CACHE, run_cli


def _settings(**kw):
    return config.load({"cache_dir": CACHE, "platform": "small", **kw}, environ={})


def _hang_at(backend, monkeypatch, hang: dict, hung: list) -> None:
    """Launches on layout (nodes, ppn) get ``--hang-at-size`` with hang[(nodes, ppn)]:
    at the first point of those sizes rank 0 of colltune-bench blocks forever in
    pause() -- a real hang on any machine, never a slow run. A launch whose first
    size hangs is stuck before its first point whatever its timeout, so it gets a
    short one; every other launch keeps the campaign's generous timeout."""
    real_run = backend.run

    def run(launch, workdir):
        sizes = launch.bench_args[launch.bench_args.index("--sizes") + 1].split(",")
        stuck = hang.get((launch.nodes, launch.ppn), set())
        if stuck:
            launch.bench_args = [*launch.bench_args, "--hang-at-size",
                                 ",".join(map(str, sorted(stuck)))]
            if int(sizes[0]) in stuck:
                launch.timeout = 1.0
        result = real_run(launch, workdir)
        if stuck and int(sizes[0]) in stuck:
            hung.append(result)
        return result
    monkeypatch.setattr(backend, "run", run)


def test_hang_is_recorded_not_fatal(sim_backend, tmp_path, monkeypatch):
    """A launch that hangs is killed at its timeout, its point recorded as 'timeout'
    without a time, the launch resumed for the points after it, and the campaign goes
    on with the next launch. After two consecutive launches finish no point, the
    job's remaining points are recorded as not attempted instead of costing a
    timeout each. The hangs are real (colltune-bench --hang-at-size), not slow runs."""
    prov = sim_backend.provider()
    settings = _settings(timeout=120.0)
    sim_backend.settings = settings
    hung: list = []
    _hang_at(sim_backend, monkeypatch, {(2, 2): {8}, (2, 1): {8, 16}}, hung)
    once = BenchSpec("alltoall", prov.lookup("alltoall", "basic_linear"), 2, 2, (8, 16, 32))
    twice = BenchSpec("alltoall", prov.lookup("alltoall", "pair"), 2, 1, (8, 16, 32))
    fine = BenchSpec("alltoall", prov.lookup("alltoall", "ring"), 1, 2, (8, 1024))
    with Store(str(tmp_path / "s.sqlite")) as store:
        summary = Campaign("t", sim_backend, store, settings, show_progress=False).run(
            [once, twice, fine])
        res = Results.from_store(store, "t")
    assert len(hung) == 3 and all(r.timed_out and not r.records for r in hung)
    assert all("blocks forever" in r.output_tail for r in hung), [r.output_tail for r in hung]
    st = {(r.algorithm, r.msg_size): r.status for r in res.points.itertuples()}
    assert st == {("basic_linear", 8): "timeout", ("basic_linear", 16): "ok",
                  ("basic_linear", 32): "ok",
                  ("pair", 8): "timeout", ("pair", 16): "timeout", ("pair", 32): "timeout",
                  ("ring", 8): "ok", ("ring", 1024): "ok"}
    assert summary.measured == {"timeout": 4, "ok": 4}
    pts = res.points.set_index(["algorithm", "msg_size"])
    for key in [("basic_linear", 8), ("pair", 8), ("pair", 16), ("pair", 32)]:
        assert pd_isnull(pts.loc[key, "ttc_median_s"]), key
    for key in [("basic_linear", 8), ("pair", 8), ("pair", 16)]:
        assert "timed out" in pts.loc[key, "check_error"], key
    assert pts.loc[("pair", 32), "check_error"].startswith("not attempted: 2 consecutive launches")
    assert pts.loc[("basic_linear", 16), "ttc_median_s"] > 0       # resumed after the hang
    runs = res.runs.set_index("algorithm")
    assert list(runs.loc[["basic_linear"], "status"]) == ["timeout", "ok"]
    assert list(runs.loc[["pair"], "status"]) == ["timeout", "timeout"]     # not a third launch


def test_crash_loses_only_its_point(sim_backend, tmp_path):
    """SimGrid 3.32's `ompi` bcast divides by zero at count 0 (SIGFPE): that point is
    recorded as crashed and the launch is resumed for the sizes after it."""
    settings = _settings(timeout=60.0)
    sim_backend.settings = settings
    spec = BenchSpec("bcast", sim_backend.provider().lookup("bcast", "ompi"), 2, 1, (0, 8, 1000))
    with Store(str(tmp_path / "s.sqlite")) as store:
        Campaign("c", sim_backend, store, settings, show_progress=False).run([spec])
        res = Results.from_store(store, "c")
        # retrying failures of another status leaves it; retrying crashes measures it again
        kept = Campaign("c", sim_backend, store, settings, show_progress=False,
                        retry_failed=frozenset({"timeout"})).run([spec])
        again = Campaign("c", sim_backend, store, settings, show_progress=False,
                         retry_failed=frozenset({"crashed"})).run([spec])
    st = {r.msg_size: r.status for r in res.points.itertuples()}
    assert st == {0: "crashed", 8: "ok", 1000: "ok"}, "SimGrid fixed its count-0 bug? " + str(st)
    crashed = res.points[res.points["status"] == "crashed"].iloc[0]
    assert "exit code" in crashed["check_error"]
    assert len(res.runs) == 2 and list(res.runs["status"]) == ["crashed", "ok"]
    assert kept.launches == 0 and kept.skipped_failures == {"crashed": 1}
    assert again.launches == 1 and again.measured == {"crashed": 1} and not again.skipped_failures


def _smpimain_in(workdir: str) -> list[int]:
    """The simulation processes (smpimain) running in a launch's directory."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if (os.readlink(f"/proc/{pid}/cwd") == workdir
                    and open(f"/proc/{pid}/comm").read().startswith("smpimain")):
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def test_a_launch_killed_beside_others_is_relaunched_alone(sim_backend, tmp_path, monkeypatch):
    """The kernel's OOM killer SIGKILLs the largest process, which may be the victim of
    the others' memory (two 64 MiB allreduces on 192 ranks at once were). A launch
    SIGKILLed while another ran is measured again from the point it was at, with no
    launch beside it; one SIGKILLed while alone has its point recorded as crashed.
    The kills are real: the test SIGKILLs smpimain while colltune-bench hangs."""
    import threading
    settings = _settings(timeout=120.0, jobs=2)
    sim_backend.settings = settings
    prov = sim_backend.provider()
    a = BenchSpec("bcast", prov.lookup("bcast", "binomial_tree"), 2, 1, (8, 1000, 2000))
    b = BenchSpec("bcast", prov.lookup("bcast", "flattree"), 2, 1, (8, 16))
    both_hung = threading.Barrier(2, timeout=60)
    spans, kills = [], []
    real_run = sim_backend.run

    def run(launch, workdir):
        sizes = launch.bench_args[launch.bench_args.index("--sizes") + 1].split(",")
        hang = ("1000" if "1000" in sizes and sum(k[0] == "a" for k in kills) < 2 else     # a's
                "8" if sizes == ["8", "16"] and not any(k[0] == "b" for k in kills)         # b's
                else None)
        if hang:
            launch.bench_args = [*launch.bench_args, "--hang-at-size", hang]
            who = "a" if hang == "1000" else "b"
            first_round = not kills

            def kill():     # once this launch's own smpimain runs and its bench hangs
                log, pids = os.path.join(workdir, "launch.log"), []
                for _ in range(600):
                    pids = _smpimain_in(os.path.realpath(workdir))
                    if pids and "blocks forever" in open(log, errors="replace").read():
                        break
                    time.sleep(0.1)
                if first_round:
                    both_hung.wait()
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                    kills.append((who, time.monotonic()))
            threading.Thread(target=kill, daemon=True).start()
        t0 = time.monotonic()
        result = real_run(launch, workdir)
        spans.append((sizes, t0, time.monotonic(), result.exit_code))
        return result
    monkeypatch.setattr(sim_backend, "run", run)
    with Store(str(tmp_path / "s.sqlite")) as store:
        summary = Campaign("k", sim_backend, store, settings, show_progress=False).run([a, b])
        res = Results.from_store(store, "k")
    st = {(r.algorithm, r.msg_size): r.status for r in res.points.itertuples()}
    assert st == {("binomial_tree", 8): "ok", ("binomial_tree", 1000): "crashed",
                  ("binomial_tree", 2000): "ok", ("flattree", 8): "ok", ("flattree", 16): "ok"}, (st, spans)
    assert summary.relaunched_alone == 2, spans     # both were killed beside the other
    assert sorted(k[0] for k in kills) == ["a", "a", "b"], kills
    crashed = res.points.set_index(["algorithm", "msg_size"]).loc[("binomial_tree", 1000)]
    assert "SIGKILL" in crashed["check_error"], crashed["check_error"]
    # the relaunches after the first-round kills ran with no launch beside them
    first_end = max(end for sizes, t0, end, code in spans[:2])
    for sizes, t0, end, code in spans[2:4]:
        others = [(s, u0, u1) for s, u0, u1, _ in spans if (u0, u1) != (t0, end)]
        assert all(u1 <= t0 or u0 >= end for _, u0, u1 in others), (sizes, spans)
        assert t0 >= first_end
    runs = res.runs.set_index("algorithm")
    assert list(runs.loc[["binomial_tree"], "status"]) == ["crashed", "crashed", "ok"], res.runs
    assert list(runs.loc[["flattree"], "status"]) == ["crashed", "ok"], res.runs


def pd_isnull(v) -> bool:
    return v is None or v != v


def test_wrong_results_are_detected(sim_backend, tmp_path):
    """SMPI's 'pair' allgather assumes a power-of-two communicator: at 6 ranks it
    must be recorded as a failure (wrong data or crash), never timed."""
    settings = _settings(timeout=60.0)
    sim_backend.settings = settings
    prov = sim_backend.provider()
    spec = BenchSpec("allgather", prov.lookup("allgather", "pair"), 3, 2, (8, 1000))
    ok = BenchSpec("allgather", prov.lookup("allgather", "pair"), 2, 2, (8, 1000))
    with Store(str(tmp_path / "s.sqlite")) as store:
        Campaign("w", sim_backend, store, settings, show_progress=False).run([spec, ok])
        res = Results.from_store(store, "w")
    six = res.points[res.points["nprocs"] == 6]
    four = res.points[res.points["nprocs"] == 4]
    assert len(six) == 2 and set(six["status"]) <= {"wrong_result", "crashed"}, six[["status", "check_error"]]
    assert six["ttc_median_s"].isna().all()
    assert set(four["status"]) == {"ok"}
    assert res.best().empty is False and set(res.best()["nprocs"]) == {4}


def test_resume_after_kill(workdir):
    """Kill a tuning campaign mid-way; the re-run measures only what is missing."""
    args = ["tune", "--collectives", "bcast", "--layouts", "2x2,3x2", "--sizes", "8,1000",
            "--algorithms", "binomial_tree,flattree,NTSL,scatter_rdb_allgather,SMP_linear",
            "--campaign", "k", "--jobs", "1", "-q"]
    env = dict(os.environ, COLLTUNE_CACHE_DIR=CACHE)
    proc = subprocess.Popen([sys.executable, "-m", "colltune.cli", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    store = os.environ["COLLTUNE_STORE"]
    deadline = time.time() + 120
    n_runs = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if os.path.exists(store):
            try:
                n_runs = sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if n_runs >= 2:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "campaign finished before it could be killed"
    before = sqlite3.connect(store).execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
    assert before >= 4
    out = run_cli(*args).stdout
    db = sqlite3.connect(store)
    keys = [r[0] for r in db.execute("SELECT key FROM measurements")]
    assert len(keys) == len(set(keys)), "a point was measured twice"
    # 7 candidates (5 algorithms + ompi + mpich) x 2 layouts x 2 sizes
    assert len(keys) == 7 * 2 * 2
    assert f"{before} reused from the store" in out


def test_tune_table_and_exports(workdir):
    out = run_cli("tune", "--collectives", "allreduce", "--layouts", "2x3", "--sizes",
                  "8,3000,65536", "--algorithms", "rdb,lr,redbcast,rab1", "--campaign", "e",
                  "-q").stdout
    table_path = os.path.join(os.environ["COLLTUNE_OUTPUT_DIR"], "e.table.json")
    assert f"decision table: {table_path}" in out
    table = json.load(open(table_path))
    assert table["format"] == "colltune.decision-table" and table["tuner"] == "exhaustive"
    (entry,) = table["entries"]
    assert (entry["collective"], entry["nodes"], entry["ppn"]) == ("allreduce", 2, 3)
    assert {r["algorithm"] for r in entry["rules"]} <= {"rdb", "lr", "redbcast", "rab1"}
    assert "allreduce" in out and "ompi" in out and "mpich" in out
    csv = run_cli("results", "export", "--format", "csv", "--campaign", "e").stdout.splitlines()
    assert csv[0].startswith("point_id,") and len(csv) == 1 + 6 * 3
    lines = run_cli("results", "export", "--format", "jsonl", "--campaign", "e").stdout.splitlines()
    recs = [json.loads(x) for x in lines]
    assert len(recs) == 6 * 3 and {r["algorithm"] for r in recs} >= {"rdb", "ompi", "mpich"}
    # the winner in the table is the fastest measured algorithm at each size
    for size in (8, 3000, 65536):
        algs = [r for r in recs if r["msg_size"] == size and r["algorithm_kind"] == "algorithm"
                and r["status"] == "ok"]
        fastest = min(algs, key=lambda r: r["ttc_median_s"])["ttc_median_s"]
        rule = [r for r in entry["rules"] if r["min_size"] <= size][-1]
        chosen = [r for r in algs if r["algorithm"] == rule["algorithm"]][0]
        assert chosen["ttc_median_s"] == fastest


def test_bench_command_prints_classic_table(workdir):
    out = run_cli("bench", "--coll", "gather", "--algorithms", "ompi_binomial,ompi_basic_linear",
                  "--procs", "2-5", "--layouts", "2x3", "--sizes", "1,7,1000", "-q").stdout
    assert out.count("# gather ompi_binomial scenario=plain") == 1
    rows = [ln.split() for ln in out.splitlines() if ln and not ln.startswith("#")
            and ln.split()[0].isdigit()]
    assert len(rows) == 2 * 4 * 3                     # algorithms x participants x sizes
    assert {int(r[1]) for r in rows} == {2, 3, 4, 5}
    for r in rows:
        avg, mn, mx = float(r[2]), float(r[3]), float(r[4])
        assert r[8] == "ok" and 0 < mn <= avg <= mx
    out = run_cli("bench", "--coll", "bcast", "--algorithms", "binomial_tree", "--scenario",
                  "delayed", "--delays-us", "1..64", "--layouts", "2x2", "--sizes", "4K", "-q").stdout
    rows = [ln.split() for ln in out.splitlines() if ln and ln.split()[0].isdigit()]
    assert [float(r[-1]) for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert float(rows[-1][6]) > 64                    # median ttc includes the 64 us delay


def test_bad_input_is_named(workdir):
    err = run_cli("bench", "--coll", "bcast", "--algorithms", "nope", "--layouts", "2x2",
                  "--sizes", "8", check=False)
    assert err.returncode == 2 and "no bcast algorithm 'nope'" in err.stderr
    err = run_cli("tune", "--layouts", "99x4", "--sizes", "8", check=False)
    assert err.returncode == 2 and "layout 99x4 does not fit platform" in err.stderr
    for layout, said in (("2x8", "layout 2x8 does not fit platform"),   # bench as tune, no traceback
                         ("0x4", "bad layout '0x4': nodes and processes per node must be >= 1")):
        err = run_cli("bench", "--coll", "bcast", "--algorithms", "binomial_tree", "--layouts", layout,
                      "--sizes", "8", check=False)
        assert err.returncode == 2 and said in err.stderr and "Traceback" not in err.stderr, err.stderr
    err = run_cli("tune", "--sizes", "8..x", check=False)
    assert err.returncode == 2 and "bad message size 'x'" in err.stderr
    err = run_cli("tune", "--platform", "marsupial", check=False)
    assert err.returncode == 2 and "marsupial" in err.stderr and "small" in err.stderr


def test_a_campaign_decides_on_its_own_plan_only(workdir):
    """The same campaign name tuned again with --reduction-op charged-sum: the store keeps
    the MPI_SUM points (other keys) and the table is made from the charged ones alone —
    never from the cheaper uncharged times of the earlier plan."""
    args = ["tune", "--collectives", "allreduce", "--layouts", "2x3", "--sizes", "65536",
            "--algorithms", "rdb,lr", "--baselines", "ompi", "--campaign", "c", "-q"]
    table_path = os.path.join(os.environ["COLLTUNE_OUTPUT_DIR"], "c.table.json")

    def measured():
        (entry,) = json.load(open(table_path))["entries"]
        arms = [(m[1], m[2]) for m in entry["measured"]]
        assert len(arms) == len(set(arms)), entry["measured"]     # one time per arm
        assert entry["rules"][0]["expected_s"] == min(m[3] for m in entry["measured"])
        return {(m[1], m[2]): m[3] for m in entry["measured"]}
    run_cli(*args)
    plain = measured()
    run_cli(*args, "--reduction-op", "charged-sum")
    charged = measured()
    assert set(charged) == set(plain) == {("smpi", "rdb"), ("smpi", "lr")}
    assert all(charged[a] > plain[a] for a in plain), (plain, charged)
    recs = [json.loads(x) for x in run_cli("results", "export", "--format", "jsonl",
                                            "--campaign", "c").stdout.splitlines()]
    assert len(recs) == 2 * 3


def test_tune_measures_a_parameter_setting_that_is_no_preset(workdir):
    """--algorithms 'ring[segsize=512]' (no preset of ring) was accepted and then never
    measured: the table had no entries. Now it is an arm of its own, under --provider both
    a preset is named without its provider too, and a parameter out of range is refused."""
    def measured(provider, algorithms, name):
        run_cli("tune", "--provider", provider, "--collectives", "allreduce", "--layouts", "2x2",
                "--sizes", "1000", "--algorithms", algorithms, "--campaign", name, "-q",
                "--table", str(workdir / f"{name}.json"))
        table = json.loads((workdir / f"{name}.json").read_text())
        return {(m[1], m[2]) for e in table["entries"] for m in e["measured"]}
    assert ("colltune", "ring[segsize=512]") in measured("colltune", "ring[segsize=512]", "p")
    assert {("colltune", "ring[segsize=8192]"), ("colltune", "ring[segsize=1024]")} <= \
        measured("both", "ring[segsize=8192],colltune:ring[segsize=1024]", "q")
    err = run_cli("tune", "--provider", "colltune", "--collectives", "allreduce,bcast",
                  "--layouts", "2x2", "--sizes", "1000", "--algorithms", "ring[segsize=2000000000]",
                  "--campaign", "r", check=False)
    assert err.returncode != 0 and "segsize=2000000000 outside [0, 1073741824]" in err.stderr


def test_sigterm_stops_a_campaign_and_says_so(workdir):
    """SIGTERM (a batch system's cancel) ended tune silently with 143 (a review); it now
    stops like Ctrl-C: launches in flight not stored, a line saying how to resume."""
    args = ["tune", "--collectives", "bcast", "--layouts", "2x2,3x2", "--sizes", "8,1000",
            "--algorithms", "binomial_tree,flattree,NTSL,scatter_rdb_allgather,SMP_linear",
            "--campaign", "term", "--jobs", "1", "-q"]
    env = dict(os.environ, COLLTUNE_CACHE_DIR=CACHE)
    proc = subprocess.Popen([sys.executable, "-m", "colltune.cli", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    store = os.environ["COLLTUNE_STORE"]
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            if sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0] >= 1:
                proc.send_signal(signal.SIGTERM)
                break
        except sqlite3.OperationalError:
            continue
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143, err
    assert "colltune: terminated (SIGTERM); finished launches are in the store, re-run to resume" in err


def test_no_launch_starts_once_a_campaign_is_stopped(tmp_path):
    """A worker between two launches had started a new one after SIGTERM (a user's
    review: a fresh prterun 3 s after the signal, colltune gone 9-33 s later, orphans
    when it was then killed). stop_launches refuses every later launch until a campaign
    allows them again."""
    from colltune.backends.base import (LaunchesStopped, allow_launches, run_process,
                                        stop_launches)
    json_path = str(tmp_path / "r.jsonl")
    stop_launches()
    try:
        with pytest.raises(LaunchesStopped):
            run_process(["true"], dict(os.environ), 10, str(tmp_path), json_path)
    finally:
        allow_launches()
    assert run_process(["true"], dict(os.environ), 10, str(tmp_path), json_path).exit_code == 0


def test_a_failed_campaign_lets_later_launches_run(sim_backend, settings, tmp_path):
    """A campaign stopped by a worker's error had left every later launch refused, outside
    any campaign too (the task model's measurements), until another campaign began."""
    from colltune.backends.base import run_process
    from colltune.store import Store

    class Broken(type(sim_backend)):
        def run(self, launch, workdir):
            raise RuntimeError("a worker's error")
    broken = Broken.__new__(Broken)
    broken.__dict__.update(sim_backend.__dict__)
    spec = BenchSpec("bcast", sim_backend.provider().lookup("bcast", "binomial_tree"), 2, 2, (8,))
    with Store(str(tmp_path / "s.sqlite")) as store, pytest.raises(RuntimeError):
        Campaign("broken", broken, store, settings, False).run([spec])
    assert run_process(["true"], dict(os.environ), 10, str(tmp_path), str(tmp_path / "r.jsonl")).exit_code == 0


def test_a_launch_that_overran_its_timeout_is_a_timeout_even_if_the_waiter_was_late(tmp_path,
                                                                                   monkeypatch):
    """Popen.wait polls the child before it reads the clock, so a waiting thread starved of
    CPU past the deadline (two test workers on two cores) found a launch that overran its
    timeout already ended and counted it clean. The starvation is emulated: wait() first
    sleeps past the deadline, then waits as the real one does."""
    import subprocess

    from colltune.backends.base import run_process
    real_wait = subprocess.Popen.wait

    def late_wait(self, timeout=None):
        if timeout is not None:
            time.sleep(timeout + 0.5)        # the child (sleep 0.3) ends while we are away
        return real_wait(self, timeout)
    monkeypatch.setattr(subprocess.Popen, "wait", late_wait)
    json_path = str(tmp_path / "r.jsonl")
    late = run_process(["sleep", "0.3"], dict(os.environ), 0.2, str(tmp_path), json_path)
    assert late.timed_out and late.exit_code is None and late.wall_s > 0.2, late
    monkeypatch.undo()
    in_time = run_process(["true"], dict(os.environ), 5, str(tmp_path), json_path)
    assert not in_time.timed_out and in_time.exit_code == 0, in_time
