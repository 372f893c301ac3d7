"""Exported files on the real Open MPI and MPICH: each one is loaded and
honoured (`colltune verify` passes), and a deliberately broken one is caught
(`verify` exits 1 and says the library dropped or rejected it)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli

from colltune.decision import DecisionTable


def save_table(path, entries, lib):
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "local", "platform": "test", "mpi_library": lib,
                       "mpi_version": "x"},
        "entries": [{"collective": c, "nodes": n, "ppn": p,
                     "rules": [{"min_size": s, "algorithm": a, "provider": prov, "params": {}}
                               for s, a, prov in rules]} for c, n, p, rules in entries]}
    ).save(str(path))
    return str(path)


OMPI_TABLE = [("bcast", 1, 2, [(0, "basic_linear", "openmpi"), (1000, "binomial", "openmpi")]),
              ("allgather", 1, 2, [(0, "bruck", "smpi"), (512, "ring", "smpi")])]
MPICH_TABLE = [("bcast", 1, 2, [(0, "scatter_ring_allgather", "mpich"), (1000, "binomial", "mpich")]),
               ("allgather", 1, 2, [(0, "bruck", "smpi"), (512, "ring", "smpi")])]


def export(tmp_path, table, fmt, target=None, name=None):
    out = tmp_path / (name or f"{fmt}.out")
    args = ["export", "--table", table, "--format", fmt, "-o", str(out)]
    run_cli(*args, *(["--target", target] if target else []))
    return str(out)


def verify(rules, library, *extra):
    return run_cli("verify", "--rules", rules, "--library", library, "--reps", "5", *extra,
                   check=False, timeout=300)


def point_lines(stdout):
    return [ln for ln in stdout.splitlines() if re.match(r"\s+(ok|FAIL)", ln)]


def assert_honoured(proc, telling: str):
    """verify passed at every point, and at some point of collective `telling`
    the file's algorithm differs from the library default (a proof, not ok*)."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = point_lines(proc.stdout)
    assert len(lines) >= 6 and all(ln.strip().startswith("ok") for ln in lines)
    assert any(telling in ln and ln.strip().startswith("ok ") for ln in lines)
    assert "(3) default/file time ratio" in proc.stdout


@pytest.mark.parametrize("target", ["5.0.11", "5.0.6"])   # rule-file-version-2 and classic
def test_openmpi_tuned_file_is_loaded_and_honoured(tmp_path, target):
    table = save_table(tmp_path / "t.json", OMPI_TABLE, "Open MPI")
    rules = export(tmp_path, table, "openmpi-tuned", target)
    proc = verify(rules, "openmpi", "--table", table)
    assert_honoured(proc, "bcast")
    assert "(1) file accepted: yes" in proc.stdout


def test_openmpi_tuned_malformed_file_is_shown_dropped(tmp_path):
    table = save_table(tmp_path / "t.json", OMPI_TABLE, "Open MPI")
    text = open(export(tmp_path, table, "openmpi-tuned")).read()
    broken = tmp_path / "broken.rules"       # first rule of a block not at message size 0
    broken.write_text(re.sub(r"\n0 (\d+ 0 0 0)\n", r"\n1 \1\n", text, count=1))
    proc = verify(str(broken), "openmpi")
    assert proc.returncode == 1
    assert "(1) file accepted: NO" in proc.stdout and "the file was dropped" in proc.stdout
    assert "ran: the library default" in proc.stdout
    assert "the first rule must be for message size 0" in proc.stdout


def test_openmpi_han_file_is_read_and_broken_one_dropped(tmp_path):
    table = save_table(tmp_path / "t.json",
                       [("bcast", 2, 2, [(0, "SMP_binomial", "smpi"), (4096, "binomial_tree", "smpi")]),
                        ("allreduce", 2, 2, [(0, "rdb", "smpi")])], "SimGrid")
    rules = export(tmp_path, table, "openmpi-han")
    proc = verify(rules, "openmpi")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "coll/han says it read 3 rules" in proc.stdout and "dump equals the file" in proc.stdout
    broken = tmp_path / "broken.han"
    broken.write_text(open(rules).read().replace("      0 han", "      7 han"))
    proc = verify(str(broken), "openmpi")
    assert proc.returncode == 1
    assert "coll/han dropped the file" in proc.stdout and "must be 0" in proc.stdout


def test_mpich_json_file_is_loaded_and_honoured(tmp_path):
    table = save_table(tmp_path / "t.json", MPICH_TABLE, "MPICH")
    rules = export(tmp_path, table, "mpich-json", "5.0.2")
    assert "colltune: colltune" in open(rules).read()     # the header inside a leaf: ignored
    proc = verify(rules, "mpich", "--table", table)
    # bcast's scatter_ring_allgather and binomial send differently from each other
    assert_honoured(proc, "bcast")
    assert "MPICH's debug summary says its MPIR selection came from" in proc.stdout


def test_mpich_rejected_and_disagreeing_files(tmp_path):
    table = save_table(tmp_path / "t.json", MPICH_TABLE, "MPICH")
    good = json.loads(open(export(tmp_path, table, "mpich-json")).read())
    # a top-level comment key is not ignored by MPICH 5.0: it aborts
    commented = tmp_path / "commented.json"
    commented.write_text(json.dumps({"_comment": "x", **good}))
    proc = verify(str(commented), "mpich")
    assert proc.returncode == 1 and "MPICH rejected the file" in proc.stdout
    assert "Assertion failed" in proc.stdout
    # a file without a collective MPICH needs (barrier, inside MPI_Init) aborts too
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({k: v for k, v in good.items() if k != "collective=barrier"}))
    proc = verify(str(missing), "mpich")
    assert proc.returncode == 1 and "MPICH rejected the file" in proc.stdout
    # bcast's two leaves swapped: MPICH honours the file, which no longer says what the table says
    intra = good["collective=bcast"]["comm_type=intra"]
    ladder = next(iter(intra.values()))
    (k1, v1), (k2, v2) = ladder.items()
    ladder.clear()
    ladder.update({k1: v2, k2: v1})
    swapped = tmp_path / "swapped.json"
    swapped.write_text(json.dumps(good))
    proc = verify(str(swapped), "mpich", "--table", table)
    assert proc.returncode == 1
    assert "[the table says scatter_ring_allgather, the file binomial]" in proc.stdout


def test_openmpi_tuned_canary_when_the_file_agrees_with_the_default(tmp_path):
    # pipeline is what 5.0's fixed decision runs for a small bcast on 2 ranks: no
    # sample point can tell the file from the default, so verify appends a canary
    table = save_table(tmp_path / "t.json", [("bcast", 1, 2, [(0, "pipeline", "openmpi")])],
                       "Open MPI")
    text = open(export(tmp_path, table, "openmpi-tuned")).read()
    good = tmp_path / "same.rules"
    good.write_text(text)
    proc = verify(str(good), "openmpi")
    assert proc.returncode == 0, proc.stdout
    assert any(ln.strip().startswith("ok*") for ln in point_lines(proc.stdout))
    assert "a copy of the file with a barrier rule (linear) appended was read" in proc.stdout
    # a block for a collective id Open MPI does not have: it drops the whole file
    bad = tmp_path / "bad.rules"
    bad.write_text(text.replace("1  # collectives", "2  # collectives") + "99\n1\n1 1\n0 1 0 0 0\n")
    proc = verify(str(bad), "openmpi")
    assert proc.returncode == 1 and "does not parse to its end" in proc.stdout


def test_a_failed_forced_launch_is_named_by_its_message_not_its_frame():
    """A forced launch that failed is reported with the library's last line that says
    something, not the rule of dashes Open MPI frames its messages in."""
    from colltune.verify import Point, compare
    from colltune.verify.probe import Observed
    banner = "-" * 74
    failed = Observed(False, ["mpirun"], f"{banner}\nprterun noticed that process rank 1 exited "
                                         f"on signal 9 (Killed).\n{banner}\n")
    fine = Observed(True, ["mpirun"], "")
    (res,) = compare([Point("bcast", 65537, "binomial", ("b",))], fine, fine, {("b",): failed})
    assert not res.honoured
    assert "exited on signal 9" in res.ran and "----" not in res.ran, res.ran
