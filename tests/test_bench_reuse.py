"""What `bench` shows and what it reuses, on real smpirun (an MPI developer's review):
a library and a colltune algorithm in one `--provider both` run print a table (it had
been a traceback), `bench` shows the points it was asked for and no others of the
campaign, colltune's points measured with another build of its algorithms are measured
again, and `--provider both` keeps points measured under different library defaults
apart."""
from __future__ import annotations

import json
import os
import sqlite3

from conftest import run_cli

ONE = ["--layouts", "2x2", "--sizes", "1000", "--jobs", "1", "-q"]


def _rows(sql: str, *args) -> list[tuple]:
    with sqlite3.connect(os.environ["COLLTUNE_STORE"]) as db:
        return db.execute(sql, args).fetchall()


def test_both_providers_in_one_bench_print_one_table_each(workdir):
    """SMPI's points have no labels (NaN in the table's frame): the declined marker had
    raised TypeError. Names both providers have (ring) are told apart in the headers, in
    the order of --algorithms."""
    res = run_cli("bench", "--provider", "both", "--coll", "allgather", "--algorithms",
                  "colltune:ring,rdb,smpi:ring", "--campaign", "mix", *ONE)
    heads = [ln for ln in res.stdout.splitlines() if ln.startswith("# allgather")]
    assert [h.split()[2] for h in heads] == ["colltune:ring", "smpi:rdb", "smpi:ring"], res.stdout
    assert "Traceback" not in res.stderr


def test_bench_shows_what_it_was_asked_for_and_why_a_point_failed(workdir):
    """A second bench in the same campaign shows its own algorithm only; its exit code is
    its own points' (an earlier run's failure in the campaign had made it 1). A failed
    point's reason is printed, not only its status."""
    run_cli("bench", "--coll", "bcast", "--algorithms", "mvapich2_inter_node",
            "--layouts", "2x4", "--sizes", "24", "--jobs", "1", "-q", "--campaign", "c",
            check=False)
    assert _rows("SELECT status FROM measurements") == [("wrong_result",)]
    first = run_cli("bench", "--coll", "bcast", "--algorithms", "mvapich2_inter_node",
                    "--layouts", "2x4", "--sizes", "24", "--jobs", "1", "-q", "--campaign", "c",
                    check=False)
    assert first.returncode == 1
    assert "failed points (1), with their reason:" in first.stdout
    assert "mvapich2_inter_node 2x4 24 B: wrong_result: " in first.stdout, first.stdout
    other = run_cli("bench", "--coll", "bcast", "--algorithms", "binomial_tree",
                    "--layouts", "2x4", "--sizes", "24", "--jobs", "1", "-q", "--campaign", "c")
    assert other.returncode == 0
    assert "mvapich2_inter_node" not in other.stdout, other.stdout
    assert "# bcast binomial_tree" in other.stdout


def test_colltune_points_of_another_build_are_measured_again(workdir):
    """Each colltune point records the build (hash of the native sources) it ran; a
    stored point of another build is measured again and replaced, one of no recorded
    build (stored before builds were recorded) is reused."""
    args = ["bench", "--provider", "colltune", "--coll", "allreduce", "--algorithms", "ring",
            "--campaign", "b", *ONE]
    run_cli(*args)
    ((labels,),) = _rows("SELECT labels_json FROM measurements")
    assert len(json.loads(labels)["build"]) == 12
    again = run_cli(*args).stdout
    assert "0 launches" in again and "measured again" not in again

    def set_build(value):
        with sqlite3.connect(os.environ["COLLTUNE_STORE"]) as db:
            (pid, lab), = db.execute("SELECT point_id, labels_json FROM measurements").fetchall()
            lab = json.loads(lab)
            lab.pop("build")
            if value:
                lab["build"] = value
            db.execute("UPDATE measurements SET labels_json=? WHERE point_id=?", (json.dumps(lab), pid))

    set_build("0123456789ab")
    out = run_cli(*args).stdout
    assert "1 launches" in out and "1 stored point(s) measured again: they were measured with " \
        "another build" in out, out
    ((n, labels),) = _rows("SELECT COUNT(*), labels_json FROM measurements")
    assert n == 1 and json.loads(labels)["build"] != "0123456789ab"
    set_build(None)
    assert "0 launches" in run_cli(*args).stdout


def test_both_keeps_points_under_other_library_defaults_apart(workdir):
    """colltune's algorithms under --provider both run under the library default
    (--default-selector); a point measured under another one, or under none (--provider
    colltune), is not reused (the review: the ompi times were shown for mpich)."""
    base = ["bench", "--coll", "allreduce", "--layouts", "4x4", "--sizes", "64K", "--jobs", "1", "-q"]
    run_cli(*base, "--provider", "colltune", "--algorithms", "multileader", "--campaign", "p")
    for sel in ("ompi", "mpich"):
        out = run_cli(*base, "--provider", "both", "--default-selector", sel,
                      "--algorithms", "colltune:multileader", "--campaign", sel).stdout
        assert "1 launches" in out, out
    runs = _rows("SELECT r.campaign, m.ttc_median_s, m.labels_json FROM measurements m "
                 "JOIN runs r USING(run_id) ORDER BY m.point_id")
    assert [r[0] for r in runs] == ["p", "ompi", "mpich"]
    assert [json.loads(r[2]).get("library_default") for r in runs] == \
        [None, "--cfg=smpi/coll-selector:ompi", "--cfg=smpi/coll-selector:mpich"]
    assert len({r[1] for r in runs}) == 3          # three different times: kept apart
    again = run_cli(*base, "--provider", "both", "--default-selector", "ompi",
                    "--algorithms", "colltune:multileader", "--campaign", "ompi").stdout
    assert "0 launches" in again


def test_overlap_refuses_colltune_algorithms(workdir):
    """The interposer serves blocking collectives: under --scenario overlap every colltune
    name had timed the library's MPI_Iallreduce (three identical times, status ok)."""
    res = run_cli("bench", "--provider", "colltune", "--coll", "allreduce", "--scenario", "overlap",
                  "--tcalc-us", "1", "--algorithms", "ring,rabenseifner", "--campaign", "ov", *ONE,
                  check=False)
    assert res.returncode == 2
    assert "colltune's algorithms (rabenseifner, ring) run through the interposer, which serves " \
        "the blocking MPI_Allreduce only" in res.stderr, res.stderr
    assert not os.path.exists(os.environ["COLLTUNE_STORE"]) or _rows("SELECT COUNT(*) FROM runs") == [(0,)]


def test_report_compares_one_root_at_a_time(workdir):
    """Root and datatype are not part of the decision key: a campaign holding bcast at
    roots 0 and 5 is refused by `report` with both named, and reported for the root given."""
    bench = ["bench", "--coll", "bcast", "--layouts", "2x4", "--sizes", "1000", "--jobs", "1",
             "-q", "--campaign", "r"]
    run_cli(*bench, "--algorithms", "ompi", "--root", "5")
    run_cli(*bench, "--algorithms", "binomial_tree,ompi", "--root", "0")
    html = os.path.join(str(workdir), "r.html")
    res = run_cli("report", "--campaign", "r", "-o", html, check=False)
    assert res.returncode == 2
    assert "bcast was measured at roots 0, 5 in these results: one is compared at a time (--root)" \
        in res.stderr, res.stderr
    run_cli("report", "--campaign", "r", "-o", html, "--root", "0")
    assert "binomial_tree" in open(html).read()
    run_cli("report", "--campaign", "r", "-o", html, "--root", "5")
    assert "binomial_tree" not in open(html).read()
    # a root nobody measured had dropped bcast from the report without a word
    res = run_cli("report", "--campaign", "r", "-o", html, "--root", "3", check=False)
    assert res.returncode == 2 and "--root 3: bcast was measured at roots 0, 5 only" in res.stderr


def test_label_errors_say_what_is_allowed(workdir):
    """A negative parameter value says what a value is (it had said only 'bad parameter');
    an unknown name lists the provider's algorithms apart from the library's selectors."""
    res = run_cli("bench", "--provider", "colltune", "--coll", "allreduce",
                  "--algorithms", "ring[segsize=-1]", *ONE, check=False)
    assert res.returncode == 2
    assert "bad parameter 'segsize=-1' in algorithm label 'ring[segsize=-1]': the value is a whole " \
        "number >= 0" in res.stderr, res.stderr
    res = run_cli("bench", "--provider", "colltune", "--coll", "allreduce", "--algorithms", "foo",
                  *ONE, check=False)
    assert res.returncode == 2
    known = res.stderr.split("known: ", 1)[1]
    algs, sels = known.split(" (library selectors: ")
    assert "multileader" in algs and "ompi" not in algs and "ompi" in sels, res.stderr


def test_barrier_sizes_are_said_to_be_one_call(workdir):
    """Barrier moves no data: several --sizes measure the same call (the size column only
    repeats them), which a developer took for a size sweep."""
    res = run_cli("bench", "--coll", "barrier", "--algorithms", "ompi", "--layouts", "2x2",
                  "--sizes", "8,64", "--jobs", "1", "-q", "--campaign", "bar")
    assert "barrier moves no data: every size measures the same call" in res.stderr
    res = run_cli("bench", "--coll", "barrier", "--algorithms", "ompi", "--layouts", "2x2",
                  "--sizes", "0", "--jobs", "1", "-q", "--campaign", "bar0")
    assert "barrier moves no data" not in res.stderr


def test_points_of_another_sidecar_are_measured_again_and_its_rates_charged(workdir, tmp_path):
    """The sidecar's SMPI settings and charge rates say how a point was simulated but are
    not in its key: a point measured before the sidecar changed had been reused (a 4x8
    point stayed faster than the 2x8 one measured after), and the sidecar's charge rates
    were never used (libcolltune charged 4e9 B/s whatever it said). Both now go with
    every launch and into its run's settings; a point of other settings is measured again."""
    from colltune import platforms
    xml = tmp_path / "mine.xml"
    xml.write_text(open(platforms.load("small").xml_path).read())
    args = ["bench", "--platform", str(xml), "--provider", "colltune", "--coll", "allreduce",
            "--algorithms", "ring", "--campaign", "s", *ONE]
    times = lambda: [r[0] for r in _rows("SELECT ttc_median_s FROM measurements")]  # noqa: E731
    run_cli(*args)
    (plain,) = times()
    xml.with_suffix(".json").write_text(json.dumps({"charge_rates": {"reduction_bytes_per_s": 1e6}}))
    out = run_cli(*args).stdout
    assert "1 stored point(s) measured again: they were measured with another charge_rates" in out, out
    (slow,) = times()
    assert slow > plain + 1e-4          # 1000 B at 1e6 B/s: the ring reduces ~750 B per rank
    xml.with_suffix(".json").write_text(json.dumps({"charge_rates": {"reduction_bytes_per_s": 1e6},
                                                    "smpi_config": {"smpi/os": "0:1e-5:0"}}))
    out = run_cli(*args).stdout
    assert "1 stored point(s) measured again: they were measured with another smpi_config" in out, out
    assert "0 launches" in run_cli(*args).stdout
