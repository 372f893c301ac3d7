"""Mistakes a user makes on the command line, found by fresh-eyes reviews of the
documented journeys: each gets one clear error naming the option, file or value
(exit 2, no traceback) and nothing is lost or silently ignored."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import CACHE, REPO, run_cli

from colltune.decision import DecisionTable

APP = os.path.join(REPO, "src", "colltune", "apps", "collmix.c")


def refused(proc, text: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_profile_folder_is_one_run(tmp_path):
    """Reusing a profile folder mixed two runs: stale rank files crashed the reader
    (an index error) or their traffic was added to the new run's. run refuses a folder
    holding a profile; the reader refuses a rank file the job cannot have had."""
    prof = tmp_path / "prof"
    run_cli("run", "--platform", "small", "--layout", "2x2", "--profile", str(prof), "-q", "--",
            APP, "1", timeout=300)
    again = run_cli("run", "--platform", "small", "--layout", "2x2", "--profile", str(prof), "--",
                    APP, "1", check=False)
    refused(again, f"--profile {prof}: holds an earlier run's profile")
    show = run_cli("profile", "show", str(prof))
    assert "bcast" in show.stdout
    doc = json.loads((prof / "rank-0.json").read_text())
    (prof / "rank-9.json").write_text(json.dumps({**doc, "rank": 9}))
    refused(run_cli("profile", "show", str(prof), check=False),
            "rank-9.json: rank 9, but")
    (prof / "rank-9.json").unlink()
    refused(run_cli("profile", "show", str(prof), "--kind", "bcats", check=False),
            "no kind 'bcats' (kinds: p2p, bcast")


def test_empty_paths_and_options_of_another_mode(tmp_path):
    """An empty $STATE turned online mode off without a word; --budget beside
    --online was ignored (online's budget is COLLTUNE_ONLINE_BUDGET)."""
    for opt in ("--online", "--profile", "--rules", "--deployment"):
        refused(run_cli("run", "--layout", "2x2", opt, "", "--", APP, "1", check=False),
                f"{opt}: empty path")
    refused(run_cli("run", "--layout", "2x2", "--online", str(tmp_path / "s"), "--budget", "3",
                    "--", APP, "1", check=False),
            "--budget: options of --tune-first (online tuning's budget is COLLTUNE_ONLINE_BUDGET")


def test_online_update_without_samples_writes_no_state(tmp_path):
    """A first run that died left a placeholder state the next run called corrupt."""
    d = tmp_path / "state"
    (d / "samples").mkdir(parents=True)
    refused(run_cli("online", "update", str(d), check=False), "no samples and no state yet")
    assert not (d / "state.txt").exists()


def _table(path) -> str:
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "sim", "platform": "small"},
        "entries": [{"collective": "bcast", "nodes": 1, "ppn": 2,
                     "rules": [{"min_size": 0, "algorithm": "binomial", "provider": "colltune",
                                "params": {}}]}]}).save(str(path))
    return str(path)


def test_files_that_cannot_be_written_are_named(tmp_path):
    """OSErrors of the files a command writes (a missing folder, a folder where a file
    is wanted) used to end in a traceback."""
    table = _table(tmp_path / "t.json")
    refused(run_cli("export", "--table", table, "--format", "colltune", "-o",
                    "/proc/nonexistent/x.rules", check=False),
            "colltune: error: /proc/nonexistent/x.rules: No such file or directory")
    (tmp_path / "afile").write_text("")
    refused(run_cli("deploy", "--table", table, "--library", "smpi", "-o", str(tmp_path / "afile"),
                    check=False), "exists and is not a folder")
    proc = run_cli("deploy", "--table", table, "--library", "intel", "-o", str(tmp_path / "d"),
                   check=False)
    assert proc.returncode == 2 and "invalid choice: 'intel'" in proc.stderr, proc.stderr


def test_a_closed_pipe_is_not_an_error():
    """`colltune info | head -1` printed a BrokenPipeError traceback."""
    env = {**os.environ, "COLLTUNE_CACHE_DIR": CACHE}
    proc = subprocess.run(f"{sys.executable} -m colltune.cli info | head -1", shell=True,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() and "Traceback" not in proc.stderr, proc.stderr


def test_a_program_of_the_other_mpi_family_is_refused(tmp_path):
    """A program built with Open MPI run with --mpi mpich crashed in MPI_Init (the
    interposer called into the wrong library); the run now says which to use."""
    from conftest import have_mpi
    import pytest
    if not (have_mpi("openmpi") and have_mpi("mpich")):
        pytest.skip("needs both Open MPI and MPICH")
    from colltune import mpi
    from colltune.runners.base import compile_app
    app = compile_app(mpi.find("openmpi"), APP, CACHE, [])
    refused(run_cli("run", "--backend", "local", "--mpi", "mpich", "-n", "2", "--", str(app), "1",
                    check=False),
            f"{app} is linked with libmpi.so.40 (openmpi's), but this run uses mpich")
    # built with smpicc: it segfaulted under Open MPI's mpiexec
    sim = compile_app(mpi.find("smpi"), APP, CACHE, [])
    refused(run_cli("run", "--backend", "local", "--mpi", "openmpi", "-n", "2", "--", str(sim), "1",
                    check=False), f"{sim} was built with smpicc (it links libsimgrid)")


def test_tune_says_where_the_library_default_beat_every_algorithm(workdir):
    """A user review: a library-provider table chose algorithms slower than the
    untouched library without a word (summaries below 1x). Restricted to SMPI's flat
    tree, bcast loses to the `ompi` selector at 8 ranks: tune says so."""
    proc = run_cli("tune", "--platform", "small", "--collectives", "bcast", "--algorithms",
                   "flattree", "--baselines", "ompi", "--layouts", "2x4", "--sizes", "64K",
                   "--campaign", "flat", "-q")
    assert "note: at 1 point(s) the library default 'ompi' beat every algorithm measured" \
        in proc.stdout, proc.stdout
    assert "`tune --provider both` lets the table keep the default" in proc.stdout
    # a --provider both campaign was told to run --provider both (an HPC centre engineer's
    # review): its table keeps the default where it wins, no advice
    proc = run_cli("tune", "--platform", "small", "--provider", "both", "--collectives", "bcast",
                   "--algorithms", "colltune:linear", "--baselines", "ompi", "--layouts", "2x4",
                   "--sizes", "64K", "--campaign", "flat-both", "-q")
    assert "--provider both` lets" not in proc.stdout, proc.stdout


def test_mpi_abort_is_the_runs_exit_status(tmp_path):
    """smpirun exits 0 when a rank calls MPI_Abort: colltune run gives the program's
    error code, as mpirun does (docs/online.md promises the application's status)."""
    src = tmp_path / "abort.c"
    src.write_text("#include <mpi.h>\nint main(int c, char **v) { int r; MPI_Init(&c, &v);\n"
                   "MPI_Comm_rank(MPI_COMM_WORLD, &r); if (r == 1) MPI_Abort(MPI_COMM_WORLD, 3);\n"
                   "MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0; }\n")
    proc = run_cli("run", "--platform", "small", "--layout", "1x2", "-q", "--", str(src), check=False)
    assert proc.returncode == 3 and "called MPI_Abort (error code 3)" in proc.stderr, proc.stderr


def test_ctrl_c_stops_a_campaign_at_once(tmp_path):
    """A user review: SIGINT was acted on only after every queued launch had run (the
    thread pool's shutdown waited for them). Queued launches are now cancelled and
    those in flight killed, not stored: what is stored is whole, and a re-run resumes."""
    import signal
    import sqlite3
    import time
    store = tmp_path / "s.sqlite"
    env = {**os.environ, "COLLTUNE_CACHE_DIR": CACHE}
    cmd = [sys.executable, "-m", "colltune.cli", "tune", "--platform", "small", "--collectives",
           "bcast,allreduce,allgather,reduce", "--layouts", "2x4,4x4,8x4", "--sizes", "8,1000,64K",
           "--store", str(store), "--output-dir", str(tmp_path / "out"), "--campaign", "c", "-q"]
    # SIGINT at its default in the child, as at a terminal: a shell script's background
    # command (`make test &`) inherits it ignored, and Python then keeps ignoring it
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:        # until some launches are stored
        time.sleep(1)
        try:
            with sqlite3.connect(store) as db:
                if db.execute("select count(*) from runs").fetchone()[0] >= 3:
                    break
        except sqlite3.Error:
            pass
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - t0 < 15, "interrupt took too long"
    assert proc.returncode == 130 and "interrupted" in err, err
    with sqlite3.connect(store) as db:    # (some SMPI algorithms crash or err on their own)
        runs = db.execute("select count(*) from runs").fetchone()[0]
        killed = db.execute("select count(*) from measurements where status = 'timeout' or "
                            "check_error like 'exit code -%' or check_error like '%signal%'").fetchone()[0]
    assert 0 < runs < 100 and killed == 0, (runs, killed)


def test_a_campaign_that_reused_points_reports_them(tmp_path):
    """A user review: a campaign whose points were all measured by an earlier one wrote
    its table, then `report` said 'not found' and `results export` wrote a header. The
    points a campaign reuses are recorded as its own results."""
    store = str(tmp_path / "s.sqlite")
    tune = ["tune", "--platform", "small", "--collectives", "bcast", "--algorithms",
            "binomial_tree,flattree", "--layouts", "2x4", "--sizes", "8,1000", "--store", store,
            "--output-dir", str(tmp_path / "out"), "-q"]
    run_cli(*tune, "--campaign", "first")
    again = run_cli(*tune, "--campaign", "second")
    assert "0 launches" in again.stdout
    rows = run_cli("results", "export", "--store", store, "--campaign", "second", "--format",
                   "jsonl").stdout.splitlines()
    first = run_cli("results", "export", "--store", store, "--campaign", "first", "--format",
                    "jsonl").stdout.splitlines()
    assert len(rows) == len(first) > 0
    run_cli("report", "--store", store, "--campaign", "second", "-o", str(tmp_path / "r.html"))
    assert run_cli("results", "list", "--store", store).stdout.split() == ["first", "second"]
    refused(run_cli("results", "export", "--store", store, "--campaign", "third", "--format", "csv",
                    check=False),
            "campaign 'third' not found")


def test_a_store_that_is_not_one_is_refused_untouched(tmp_path):
    import sqlite3
    refused(run_cli("results", "list", "--store", str(tmp_path / "missing.sqlite"), check=False),
            "missing.sqlite: no such results store")
    assert not (tmp_path / "missing.sqlite").exists()
    refused(run_cli("results", "list", "--store", str(tmp_path), check=False), "not a file")
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    refused(run_cli("results", "list", "--store", str(tmp_path / "junk.sqlite"), check=False),
            "not a readable SQLite results store")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("create table notes (x text)")
    before = other.read_bytes()
    refused(run_cli("results", "list", "--store", str(other), check=False),
            "an SQLite file of something else (tables: notes)")
    assert other.read_bytes() == before


def test_reading_a_store_of_an_older_schema_leaves_it_as_it_is(tmp_path):
    """Reading a store (results, report, the benchmarks' --no-run reprints) opens it
    read-only: a store made before campaign_points existed got that table added by a
    reprint of committed results (an audit found 11 committed stores changed)."""
    import sqlite3
    from colltune.store import Store
    path = tmp_path / "old.sqlite"
    with Store(str(path)) as st:
        st.db.execute("DROP TABLE campaign_points")
        st.db.execute("INSERT INTO runs (campaign, started) VALUES ('c1', 1.0)")
        st.db.commit()
    before = path.read_bytes()
    with Store(str(path), readonly=True) as st:
        assert st.campaigns() == ["c1"] and st.campaign_keys("c1") == set()
    assert run_cli("results", "list", "--store", str(path)).stdout.split() == ["c1"]
    assert path.read_bytes() == before
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert "campaign_points" not in tables


def test_bench_and_tune_refuse_what_they_would_ignore(tmp_path):
    """A user review: names a tune could not use were dropped silently (a table with no
    entries), options of another scenario ignored, a root no rank has launched and
    recorded as a crash, two layouts' rows printed without saying which is which."""
    common = ["--platform", "small", "--sizes", "8", "--store", str(tmp_path / "s.sqlite"),
              "--output-dir", str(tmp_path / "out"), "-q"]
    bench = ["bench", "--coll", "bcast", *common]
    refused(run_cli("tune", "--collectives", "bcast", "--algorithms", "binomial_tree,rdb",
                    "--layouts", "2x4", *common, check=False),
            "--algorithms: 'rdb' is not an algorithm of smpi for bcast")
    refused(run_cli("tune", "--collectives", "bcast", "--baselines", "nosuch", "--layouts", "2x4",
                    *common, check=False), "--baselines: 'nosuch' is not a selector of smpi")
    refused(run_cli(*bench, "--layouts", "2x4", "--delays-us", "1..4", check=False),
            "--delays-us: only with --scenario delayed")
    refused(run_cli(*bench, "--layouts", "2x4", "--root", "8", check=False),
            "--root 8: not a rank of every communicator measured (the smallest has 8 ranks)")
    refused(run_cli("bench", "--coll", "allreduce", *common, "--layouts", "2x4", "--root", "1",
                    check=False), "--root 1: allreduce has no root")
    refused(run_cli(*bench, "--layouts", "2x4", "--nodes", "3", check=False),
            "--layouts or --nodes/--ppn, not both")
    refused(run_cli(*bench, "--layouts", "2x4", "--algorithms", "", check=False),
            "--algorithms: empty")
    refused(run_cli("bench", "--coll", "bcastx", *common, "--layouts", "2x4", check=False),
            "--coll bcastx: not a collective smpi provides")
    out = run_cli(*bench, "--layouts", "2x4,4x2").stdout
    assert "# bcast default scenario=plain layout=2x4" in out and "layout=4x2" in out, out


def test_results_export_keeps_whole_numbers_whole(tmp_path):
    """A user review: counts came out as 2.0 and `valid` as 1.0 (SQLite keeps REAL)."""
    store = str(tmp_path / "s.sqlite")
    run_cli("bench", "--coll", "bcast", "--platform", "small", "--layouts", "2x2", "--sizes", "8",
            "--store", store, "--campaign", "b", "-q")
    (rec,) = [json.loads(x) for x in run_cli("results", "export", "--store", store, "--campaign", "b",
                                             "--format", "jsonl").stdout.splitlines()]
    assert rec["count"] == 8 and isinstance(rec["count"], int) and rec["valid"] is True
    assert isinstance(rec["participants"], int) and "labels" in rec
    csv = run_cli("results", "export", "--store", store, "--campaign", "b", "--format", "csv").stdout
    assert ",8,8,8,char," in csv or ",8,8,8," in csv, csv[:400]


def test_overlap_under_smpi_warns_that_every_algorithm_times_the_same(workdir):
    """A user review: two SMPI algorithms in the overlap scenario gave identical tables
    without a word (SMPI's non-blocking collectives ignore the configured algorithm)."""
    proc = run_cli("bench", "--coll", "bcast", "--scenario", "overlap", "--tcalc-us", "1",
                   "--layouts", "2x2", "--sizes", "1K", "--algorithms", "binomial_tree,flattree",
                   "-q")
    assert "the overlap scenario times the same MPI_Ibcast under every algorithm name" in proc.stderr


def test_verify_names_the_kind_of_a_rules_file_given_to_the_other_library(tmp_path):
    """A user review: an MPICH file verified with --library openmpi failed with
    "number of collectives: expected an integer, got '{'"."""
    mj = tmp_path / "m.json"
    mj.write_text('{"collective=bcast": {"any": "MPIR_Bcast_intra_binomial"}}\n')
    refused(run_cli("verify", "--rules", str(mj), "--library", "openmpi", check=False),
            f"{mj}: an MPICH CSEL (mpich-json) rules file, not one openmpi reads: verify it with "
            f"--library mpich")
    tuned = tmp_path / "t.rules"
    tuned.write_text("1\n7\n1\n4\n1\n0 1 0 0 0\n")
    refused(run_cli("verify", "--rules", str(tuned), "--library", "mpich", check=False),
            "an Open MPI (coll/tuned or coll/han) rules file, not one mpich reads")
    ct = tmp_path / "c.rules"
    ct.write_text("colltune-rules 1\nbcast -> binomial\n")
    refused(run_cli("verify", "--rules", str(ct), "--library", "openmpi", check=False),
            "a colltune rules file: the interposer reads it")


def test_sizes_the_bench_would_refuse_or_measure_as_count_zero_are_refused(workdir):
    """--sizes 3G of char had been launched and stored as a crashed point (the bench refused
    it); 4 B of double had been measured as count 0 and named best at 0 s."""
    for args, why in ((("bench", "--coll", "bcast", "--sizes", "3G"), "more than 2147483647 elements"),
                      (("bench", "--coll", "allreduce", "--sizes", "4", "--dtype", "double"),
                       "4 bytes is less than one double (8 bytes)"),
                      (("tune", "--collectives", "allreduce", "--sizes", "2"),
                       "2 bytes is less than one float (4 bytes)")):
        proc = run_cli(*args, "--layouts", "2x2", check=False)
        assert proc.returncode != 0 and why in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_another_librarys_provider_is_refused_by_name(tmp_path):
    """--provider mpich on a run of Open MPI (the local backend's default) was a
    TypeError traceback, --provider openmpi with --mpi mpich an AttributeError."""
    import pytest
    from conftest import have_mpi
    if not (have_mpi("openmpi") and have_mpi("mpich")):
        pytest.skip("needs Open MPI and MPICH")
    refused(run_cli("tune", "--backend", "local", "--mpi", "openmpi", "--provider", "mpich",
                    "--collectives", "bcast", "--layouts", "1x2", "--sizes", "8",
                    "--store", str(tmp_path / "s.sqlite"), check=False),
            "provider 'mpich': this local run uses openmpi")
    refused(run_cli("bench", "--backend", "local", "--mpi", "mpich", "--provider", "openmpi",
                    "--coll", "bcast", "--sizes", "8", "--store", str(tmp_path / "s.sqlite"),
                    check=False),
            "for openmpi's, name its MPI (--mpi openmpi)")


def test_verify_refuses_what_it_cannot_check(tmp_path):
    """A user review: verify took a table measured on the other library (and printed
    false 'substitute' lines), --ranks 1 (where the library runs no algorithm of its own:
    valid files failed), and a label's repeated parameter was taken, the last one winning."""
    from test_verify import save_table
    rules = tmp_path / "r.rules"
    rules.write_text("1\n2\n1\n4\n1\n0 6 0 0 0\n")      # coll/tuned: bcast on 4 ranks, binomial
    table = save_table(tmp_path / "t.json", [("bcast", 1, 4, [(0, "binomial", "mpich")])], "MPICH")
    refused(run_cli("verify", "--rules", str(rules), "--library", "openmpi", "--table", table,
                    check=False), "measured on mpich, not openmpi")
    refused(run_cli("verify", "--rules", str(rules), "--library", "openmpi", "--ranks", "1",
                    check=False), "--ranks 1: use 2-8 ranks")
    refused(run_cli("bench", "--coll", "bcast", "--algorithms", "pipeline[segsize=16384,segsize=8192]",
                    "--provider", "colltune", "--sizes", "8", check=False),
            "parameter 'segsize' given twice")
