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
    # what the reader refuses is a problem of the static check (4), which said "ok" (a
    # user review), as is a collective id past coll/tuned's (Open MPI drops the file)
    assert re.search(r"\(4\) .*: 1 problem\(s\)\n  FAIL .*broken.rules:\d+: .* the first rule "
                     r"must be for message size 0", proc.stdout), proc.stdout
    odd = tmp_path / "odd.rules"
    odd.write_text("1\n77\n1\n2 1\n0 1 0 0\n")
    proc = verify(str(odd), "openmpi", "--reps", "1")
    assert proc.returncode == 1
    assert "FAIL collective id 77: coll/tuned knows collective ids 0-21; Open MPI drops the whole " \
           "file" in proc.stdout, proc.stdout


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


# -- F1: an algorithm that calls other collectives inside -------------------------------
def test_compare_uses_the_outermost_call_of_the_collective():
    """The algorithm compared is the first function of the point's own collective; what it
    calls inside may differ (it follows the file's rules there), another algorithm may not."""
    from colltune.verify import Point, compare
    from colltune.verify.probe import Observed
    base = "ompi_coll_base_"

    def obs(*fns):
        return Observed(True, ["mpirun"], "", {},
                        {(r, 0): [base + f for f in fns] for r in (0, 1)})
    point = [Point("allreduce", 400, "nonoverlapping", ("a",))]
    forced = obs("allreduce_intra_nonoverlapping", "reduce_intra_basic_linear",
                 "bcast_intra_bintree", "bcast_intra_generic")
    default = obs("allreduce_intra_recursive_doubling")
    nested_differ = obs("allreduce_intra_nonoverlapping", "reduce_intra_basic_linear",
                        "bcast_intra_pipeline", "bcast_intra_generic")
    (res,) = compare(point, default, nested_differ, {("a",): forced})
    assert res.honoured and res.distinguishes, res.ran
    assert "the calls inside it follow the file's rules" in res.ran
    other = obs("allreduce_intra_ring", "reduce_intra_basic_linear", "bcast_intra_bintree",
                "bcast_intra_generic")
    (res,) = compare(point, default, other, {("a",): forced})
    assert not res.honoured and res.ran.startswith("something else: rank 0: allreduce_intra_ring")


def test_openmpi_nonoverlapping_allreduce_with_nested_rules_passes(tmp_path):
    """coll/tuned's nonoverlapping allreduce is a reduce + a bcast, which follow the file's
    own bcast rules (pipeline from 91 B) with the file and the fixed decision when forced:
    the file is honoured (the docs' local tune -> export -> verify chain)."""
    table = save_table(tmp_path / "t.json", [
        ("bcast", 1, 2, [(0, "binary_tree", "openmpi"), (91, "pipeline", "openmpi")]),
        ("allreduce", 1, 2, [(0, "basic_linear", "openmpi"), (91, "nonoverlapping", "openmpi"),
                             (8192, "segmented_ring", "openmpi")])], "Open MPI")
    proc = verify(export(tmp_path, table, "openmpi-tuned"), "openmpi", "--table", table,
                  "--reps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in point_lines(proc.stdout) if "file says nonoverlapping" in ln]
    assert len(lines) == 2 and all(ln.strip().startswith("ok") for ln in lines), proc.stdout
    assert "the calls inside it follow the file's rules" in proc.stdout


# -- F7: blocks the run does not reach -------------------------------------------------
def _edit_block(text: str, start: int, old: str, new: str) -> str:
    """Replace the first rule line `old` after the block header for comm size `start`."""
    head = re.search(rf"^{start} \d+  # comm size >= {start}.*$", text, re.MULTILINE)
    assert head, text
    rest = text[head.end():]
    assert re.search(rf"^{old}$", rest, re.MULTILINE), rest
    return text[:head.end()] + re.sub(rf"^{old}$", new, rest, count=1, flags=re.MULTILINE)


TWO_BLOCKS = [("allreduce", 1, 2, [(0, "rdb", "smpi"), (8192, "lr", "smpi")]),
              ("allreduce", 4, 4, [(0, "lr", "smpi"), (8192, "rdb", "smpi")])]


def test_openmpi_blocks_not_run_are_checked_or_named(tmp_path):
    """2 ranks reach only the first comm-size block (the second starts at 6 = sqrt(2 x 16)):
    the others are checked statically (algorithm numbers always; against the table with
    --table) and named, never passed over in silence."""
    table = save_table(tmp_path / "t.json", TWO_BLOCKS, "SimGrid")
    rules = export(tmp_path, table, "openmpi-tuned")
    text = open(rules).read()
    assert "\n6 2  # comm size >= 6" in text and "\n0 4 0 0 0\n" in text   # ring from 0 at >= 6
    proc = verify(rules, "openmpi", "--reps", "1")       # no table: named, not checked
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"not run: allreduce block for comm size >= 6 .*NOT CHECKED", proc.stdout)
    assert "RESULT: PASS (partial: 1 block(s) neither run nor checked" in proc.stdout
    proc = verify(rules, "openmpi", "--table", table, "--reps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"not run: allreduce block for comm size >= 6 .*checked statically against "
                     r"the table: agrees", proc.stdout)
    assert proc.stdout.rstrip().endswith("RESULT: PASS")
    # an algorithm number Open MPI does not have, in the block the run does not reach
    bad = tmp_path / "bad.rules"
    bad.write_text(_edit_block(text, 6, "0 4 0 0 0", "0 42 0 0 0"))
    proc = verify(str(bad), "openmpi", "--reps", "1")
    assert proc.returncode == 1, proc.stdout
    assert ("FAIL allreduce, comm size >= 6, from message size 0: algorithm 42 is not a "
            "coll_tuned_allreduce_algorithm of the installed Open MPI") in proc.stdout
    # a valid algorithm there that the table does not say (recursive_doubling, not ring)
    other = tmp_path / "other.rules"
    other.write_text(_edit_block(text, 6, "0 4 0 0 0", "0 3 0 0 0"))
    proc = verify(str(other), "openmpi", "--table", table, "--reps", "1")
    assert proc.returncode == 1, proc.stdout
    assert ("FAIL allreduce, comm size >= 6, from message size 0 B/rank: the file says "
            "recursive_doubling (#3), the table (as exported) ring (#4)") in proc.stdout
    assert "checked statically against the table: DISAGREES" in proc.stdout


def test_mpich_branches_not_run_are_checked_or_named(tmp_path):
    table = save_table(tmp_path / "t.json", TWO_BLOCKS, "SimGrid")
    good = json.loads(open(export(tmp_path, table, "mpich-json")).read())
    ladder = good["collective=allreduce"]["comm_type=intra"]
    assert list(ladder) == ["comm_size<=5", "any"]
    proc = verify(export(tmp_path, table, "mpich-json"), "mpich", "--reps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"not run: allreduce block for comm size >= 6 .*NOT CHECKED", proc.stdout)
    # the comm_size > 5 branch's first leaf says recursive_doubling where the table says ring
    first = next(iter(ladder["any"].values()))
    first.clear()
    first["algorithm=MPIR_Allreduce_intra_recursive_doubling"] = {}
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(good))
    proc = verify(str(changed), "mpich", "--table", table, "--reps", "1")
    assert proc.returncode == 1, proc.stdout
    assert re.search(r"FAIL allreduce, comm size 6, \d+ B/rank \(comm size >= 6 block\): the file "
                     r"runs MPIR_Allreduce_intra_recursive_doubling, the table \(as exported\) "
                     r"MPIR_Allreduce_intra_ring", proc.stdout), proc.stdout


def test_mpich_algorithm_names_are_checked_in_every_branch(tmp_path):
    """Without a table and without running: a leaf name the installed libmpi does not know,
    in a branch 2 ranks never reach, fails the static check."""
    from colltune import mpi
    from colltune.verify.mpich import MPICHVerifier
    from colltune.verify.static_check import check_csel, library_has
    table = save_table(tmp_path / "t.json", TWO_BLOCKS, "SimGrid")
    tree = json.loads(open(export(tmp_path, table, "mpich-json")).read())
    v = MPICHVerifier(mpi.find("mpich"), str(tmp_path / "cache"))
    has = library_has(v._libmpi())
    assert not check_csel(tree, 2, ["allreduce"], has, "x").problems
    branch = tree["collective=allreduce"]["comm_type=intra"]["any"]
    first = next(iter(branch.values()))
    first.clear()
    first["algorithm=MPIR_Allreduce_intra_no_such_thing"] = {}
    res = check_csel(tree, 2, ["allreduce"], has, "5.0.2")
    assert len(res.problems) == 1 and "MPIR_Allreduce_intra_no_such_thing" in res.problems[0]
    assert "is not an algorithm of the installed MPICH 5.0.2" in res.problems[0]


# -- F9: a rules line missing a column -------------------------------------------------
def test_tuned_rule_line_with_a_missing_column_is_named(tmp_path):
    """A rule line of the first collective lacks its max-requests column: Open MPI reads the
    file as one stream of numbers, so everything after it is misread. verify names the file
    and line (no traceback) and fails."""
    from colltune.errors import InputError
    from colltune.verify.rules import parse_tuned
    table = save_table(tmp_path / "t.json", OMPI_TABLE, "Open MPI")
    lines = open(export(tmp_path, table, "openmpi-tuned")).read().splitlines()
    n = lines.index("1024 4 0 0 0")           # allgather's second rule, before bcast's block
    broken = tmp_path / "short.rules"
    broken.write_text("\n".join(lines[:n] + ["1024 4 0 0"] + lines[n + 1:]) + "\n")
    want = (f"{broken}:{n + 1}: allgather comm size 2, rule 2 of 2: its line has 4 number(s), "
            f"a rule-file-version-2 rule has 5 (message size, algorithm, fan-in/out, segment "
            f"size, max requests); Open MPI reads the file as one stream of numbers")
    for strict in (True, False):
        with pytest.raises(InputError) as exc:
            parse_tuned(broken.read_text(), str(broken), strict)
        assert str(exc.value).startswith(want), exc.value
    proc = verify(str(broken), "openmpi", "--table", table)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert (f"(1) file accepted: NO - not a valid coll/tuned rules file, so what Open MPI makes "
            f"of it cannot be told: {want}") in proc.stdout
    assert proc.stdout.rstrip().endswith("RESULT: FAIL")
    # the same rule line missing altogether: the message names where the numbers stop
    # lining up, not a collective id made of a misread number (formerly "id8192")
    gone = "\n".join(lines[:n] + lines[n + 1:])
    for strict in (True, False):
        with pytest.raises(InputError) as exc:
            parse_tuned(gone, "gone.rules", strict)
        assert str(exc.value).startswith(f"gone.rules:{n + 1}: allgather comm size 2, rule 2 of "
                                         f"2: its line has 1 number(s)"), exc.value
        assert not re.search(r"\bid\d", str(exc.value)), exc.value


# -- F15: total-size keys on a comm size other than the tuned one ----------------------
AG_TABLE = [("allgather", 1, 2, [(0, "rdb", "smpi")]),
            ("allgather", 2, 4, [(0, "rdb", "smpi"), (91, "bruck", "smpi"), (8192, "ring", "smpi")])]


def test_openmpi_allgather_export_verifies_on_an_untuned_comm_size(tmp_path):
    """allgather is keyed by total bytes = bytes per rank x the block's tuned comm size (8);
    on 4 ranks (same block) the file's breaks are at 182 and 16384 B/rank: verify --table
    predicts the same, so a pristine export passes and a contradicting one fails."""
    table = save_table(tmp_path / "t.json", AG_TABLE, "SimGrid")
    rules = export(tmp_path, table, "openmpi-tuned")
    text = open(rules).read()
    assert "\n728 2 0 0 0\n65536 4 0 0 0\n" in text
    proc = verify(rules, "openmpi", "--table", table, "--ranks", "4", "--reps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any("182 B/rank  file says bruck" in ln for ln in point_lines(proc.stdout))
    bad = tmp_path / "bad.rules"
    bad.write_text(text.replace("\n728 2 0 0 0\n", "\n728 4 0 0 0\n"))   # ring, not bruck
    proc = verify(str(bad), "openmpi", "--table", table, "--ranks", "4", "--reps", "1")
    assert proc.returncode == 1, proc.stdout
    assert "[the table says bruck, the file ring]" in proc.stdout


def test_mpich_allgather_export_verifies_on_an_untuned_comm_size(tmp_path):
    table = save_table(tmp_path / "t.json", AG_TABLE, "SimGrid")
    proc = verify(export(tmp_path, table, "mpich-json"), "mpich", "--table", table,
                  "--ranks", "4", "--reps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any("182 B/rank  file says brucks" in ln for ln in point_lines(proc.stdout))


def test_default_ranks_is_a_tuned_comm_size(tmp_path):
    """Tuned on 2 and 8 ranks, the file's second block starts at 4: verify runs 2 ranks
    (a tuned size), as --help says, for both libraries, with or without the table."""
    from colltune.decision import DecisionTable
    from colltune.exporters.openmpi_tuned import OpenMPITunedExporter
    from colltune.verify.mpich import default_ranks as mpich_ranks
    from colltune.verify.openmpi import default_ranks
    from colltune.verify.rules import parse_tuned
    table = DecisionTable.load(save_table(tmp_path / "t.json", AG_TABLE, "SimGrid"))
    text = OpenMPITunedExporter().export(table, "5.0.11").text
    rules = parse_tuned(text, "t")
    assert [c for c, _ in rules.blocks["allgather"]] == [2, 4]
    assert default_ranks(rules, text, table) == 2 and default_ranks(rules, text) == 2
    assert mpich_ranks(table) == 2
    assert default_ranks(rules, "") == 4      # nothing names the tuned sizes: a block start
    # an MPICH file names its tuned layouts in its header key (it was 2 ranks whatever
    # it was tuned on: every point then looked like the default)
    four = DecisionTable.load(save_table(tmp_path / "f.json", [
        ("bcast", 1, 4, [(0, "binomial", "mpich")]), ("bcast", 1, 8, [(0, "binomial", "mpich")])], "MPICH"))
    from colltune.exporters.mpich_json import MPICHJsonExporter
    assert mpich_ranks(None, MPICHJsonExporter().export(four, "5.0.2").text) == 4
    assert mpich_ranks(None, "{}") == 2


def test_openmpi_segment_size_and_chain_fanout_are_exported_and_proven(tmp_path):
    """Tuned segmented algorithms (pipeline[segsize=16384], a plain chain measured with
    coll/tuned's forced chain fan-out 4) go into the file's columns; verify proves from the
    arguments the library's functions were called with that Open MPI used them, and a file
    whose segment size differs from the table's fails, run and static check both."""
    table = save_table(tmp_path / "t.json", [
        ("bcast", 1, 2, [(0, "chain", "openmpi"), (65536, "pipeline[segsize=16384]", "openmpi")]),
        ("reduce", 1, 2, [(0, "binary[segsize=1024]", "openmpi")])], "openmpi")
    rules = export(tmp_path, table, "openmpi-tuned")
    rows = [ln.split() for ln in open(rules).read().splitlines() if re.match(r"\d+ \d+ \d+ \d+", ln)]
    assert ["0", "2", "4", "0", "0"] in rows            # chain: fan-out 4, as measured
    assert ["65536", "3", "0", "16384", "0"] in rows and ["0", "4", "0", "1024", "0"] in rows
    proc = verify(rules, "openmpi", "--table", table)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = point_lines(proc.stdout)
    assert any("file says pipeline segsize 16384" in ln and "bcast_intra_pipeline(segsize=16384)" in ln
               for ln in lines), proc.stdout
    assert any("bcast_intra_chain(segsize=0,fanout=4)" in ln for ln in lines), proc.stdout
    assert any("reduce_intra_binary(segsize=1024)" in ln for ln in lines), proc.stdout
    bad = tmp_path / "bad.rules"
    bad.write_text(open(rules).read().replace("65536 3 0 16384 0", "65536 3 0 0 0"))
    proc = verify(str(bad), "openmpi", "--table", table)
    assert proc.returncode == 1, proc.stdout
    assert any(ln.strip().startswith("FAIL") and "the table says pipeline fan-in/out 0 segsize "
               "16384, the file fan-in/out 0 segsize 0" in ln for ln in point_lines(proc.stdout))
    assert "pipeline (#3, segsize 16384)" in proc.stdout          # the static check (4)


def test_openmpi_provider_parameters_force_and_refuse():
    from colltune import mpi
    from colltune.errors import ColltuneError
    from colltune.providers.openmpi import OpenMPIProvider
    try:
        prov = OpenMPIProvider(mpi.find("openmpi"))
    except ColltuneError as exc:
        pytest.skip(str(exc))
    env = prov.force(prov.lookup("reduce", "chain[segsize=4096,fanout=2]")).env
    assert env["OMPI_MCA_coll_tuned_reduce_algorithm_segmentsize"] == "4096"
    assert env["OMPI_MCA_coll_tuned_reduce_algorithm_chain_fanout"] == "2"
    labels = [a.label for a in prov.algorithms("bcast")]
    assert "pipeline[segsize=131072]" in labels and "split_binary_tree[segsize=1024]" in labels
    assert [a.label for a in OpenMPIProvider(mpi.find("openmpi"), presets=False).algorithms("bcast")
            if a.params] == []
    for bad, why in (("basic_linear[segsize=4]", "has no parameter 'segsize'"),
                     ("chain[fanout=0]", "fanout=0 outside [1, 1024]")):
        with pytest.raises(ColltuneError, match=re.escape(why)):
            prov.lookup("bcast", bad)


def test_mpich_parameters_are_exported_and_proven(tmp_path):
    """MPICH's radix and tree shape (tree[k=4], k_brucks[k=4]) go into the leaves'
    parameters; a plain allreduce tree is written with the tree shape its forced
    measurement had (the control variable's default, knomial_1, not kary); verify proves
    on 4 ranks, from the messages, that MPICH used them, and a file whose radix differs
    from the table's fails."""
    table = save_table(tmp_path / "t.json", [
        ("bcast", 1, 4, [(0, "tree[k=4]", "mpich")]),
        ("allreduce", 1, 4, [(0, "tree", "mpich")]),
        ("allgather", 1, 4, [(0, "k_brucks[k=4]", "mpich")])], "MPICH")
    rules = export(tmp_path, table, "mpich-json", "5.0.2")
    tree = json.loads(open(rules).read())

    def leaf(coll):
        node = tree[f"collective={coll}"]["comm_type=intra"]
        while not any(k.startswith("algorithm=") for k in node):
            node = next(iter(node.values()))
        return next(v for k, v in node.items() if k.startswith("algorithm="))
    assert {"k=4", "tree_type=kary"} <= set(leaf("bcast"))
    assert {"k=2", "tree_type=knomial_1"} <= set(leaf("allreduce"))
    assert "k=4" in leaf("allgather")
    proc = verify(rules, "mpich", "--table", table, "--ranks", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = point_lines(proc.stdout)
    assert any("bcast" in ln and "k 4" in ln and ln.strip().startswith("ok ") for ln in lines), \
        proc.stdout
    assert any("allreduce" in ln and "tree_type knomial_1" in ln for ln in lines), proc.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(open(rules).read().replace('"k=4"', '"k=2"'))
    proc = verify(str(bad), "mpich", "--table", table, "--ranks", "4")
    assert proc.returncode == 1, proc.stdout
    assert any(ln.strip().startswith("FAIL") and "k 4 in the table, 2 in the file" in ln
               for ln in point_lines(proc.stdout)), proc.stdout


def test_mpich_parameter_defaults_are_the_librarys():
    """The defaults an exported leaf is filled with are the control variables' defaults
    of the installed MPICH (what a forced measurement ran with), read through MPI_T;
    labels with parameters are forced through those variables and checked."""
    from colltune import mpi
    from colltune.errors import ColltuneError
    from colltune.providers.mpich import MPICHProvider
    from colltune.providers.mpich_params import _BY_FUNC, leaf_defaults, param_cvars
    try:
        prov = MPICHProvider(mpi.find("mpich"))
    except ColltuneError as exc:
        pytest.skip(str(exc))
    for func in _BY_FUNC:
        for param, cvar in param_cvars(func).items():
            assert prov.read_cvar(cvar) == leaf_defaults(func)[param], (func, param, cvar)
    env = prov.force(prov.lookup("bcast", "tree[k=8,tree_type=1]")).env
    assert env["MPIR_CVAR_BCAST_TREE_KVAL"] == "8" and env["MPIR_CVAR_BCAST_TREE_TYPE"] == "knomial_1"
    assert "k_brucks[k=4]" in [a.label for a in prov.algorithms("allgather")]
    assert prov.lookup("bcast", "pipelined_tree[k=1]").params == (("k", 1),)   # a chain
    for bad, why in (("binomial[k=4]", "has no parameter 'k'"), ("tree[k=0]", "k=0 outside [1, 64]"),
                     ("tree[k=1,tree_type=1]", "only a kary tree takes a radix below 2"),
                     ("tree[tree_type=3]", "tree_type=3 outside [0, 2]")):
        with pytest.raises(ColltuneError, match=re.escape(why)):
            prov.lookup("bcast", bad)


def test_openmpi_reduce_chain_under_the_tracer(tmp_path):
    """coll/tuned's reduce chain takes 11 arguments; the verify tracer forwarded 10, so
    the 11th (max_outstanding_reqs) was stack garbage and MPI_Reduce failed at random
    (in about half the runs on 4 ranks), reported as the library rejecting the file.
    Open MPI's own choice at 8 KiB on 4 ranks is the chain, so the default runs hit it."""
    table = save_table(tmp_path / "t.json", [
        ("reduce", 1, 4, [(0, "binomial", "openmpi"), (4096, "chain", "openmpi"),
                          (65536, "binary", "openmpi")])], "openmpi")
    rules = export(tmp_path, table, "openmpi-tuned")
    for _ in range(2):
        proc = verify(rules, "openmpi", "--table", table, "--ranks", "4", "--reps", "2")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert any("reduce_intra_chain(segsize=0,fanout=4)" in ln for ln in point_lines(proc.stdout))


def test_mpich_leaf_parameters_are_checked_and_invalid_json_is_named(tmp_path):
    """A user review: a leaf without one of its algorithm's parameters (MPICH reads it from
    uninitialised memory) passed verify; a misspelt or out-of-range one failed only as
    "MPICH rejected the file"; a file that is not JSON was reported as nine missing
    collectives. The static check (4) now names each, and the JSON error is the verdict."""
    from colltune.verify.static_check import leaf_problems
    f = "MPIR_Bcast_intra_pipelined_tree"
    full = ["tree_type=kary", "k=2", "is_non_blocking=1", "chunk_size=8192", "recv_pre_posted=0"]
    assert leaf_problems(f, full + ["colltune: header"], "p") == []
    assert leaf_problems(f, [k for k in full if not k.startswith("chunk")], "p") == \
        [f"p: {f} needs chunk_size (MPICH reads a parameter the leaf does not give from "
         f"uninitialised memory)"]
    assert "takes no parameter 'kk'" in leaf_problems(f, full + ["kk=4"], "p")[0]
    assert leaf_problems(f, [k.replace("k=2", "k=0") for k in full], "p") == [f"p: {f} k=0 outside [1, 64]"]
    assert "only a kary tree" in leaf_problems(
        f, [k.replace("k=2", "k=1").replace("kary", "knomial_1") for k in full], "p")[0]
    assert leaf_problems("MPIR_Bcast_intra_binomial", [], "p") == []
    table = save_table(tmp_path / "t.json", [("bcast", 1, 2, [(0, "pipelined_tree", "mpich")])], "MPICH")
    rules = export(tmp_path, table, "mpich-json")
    text = open(rules).read()
    missing = tmp_path / "missing.json"
    missing.write_text(text.replace('"chunk_size=8192": {},', ""))
    proc = verify(str(missing), "mpich", "--reps", "1")
    assert proc.returncode == 1 and f"{f} needs chunk_size" in proc.stdout, proc.stdout
    broken = tmp_path / "broken.json"
    broken.write_text(text.replace('"any":', '"any"', 1))
    proc = verify(str(broken), "mpich")
    assert proc.returncode == 1 and "(1) file accepted: NO - " in proc.stdout
    assert "broken.json:" in proc.stdout and "not valid JSON" in proc.stdout
    assert "not checked" not in proc.stdout


def test_a_pass_where_nothing_was_told_apart_says_so():
    """A PASS whose points all looked like the library default (ok*) is consistent, not
    a proof; the result line says so (a user review: verify on 2 ranks of a 1x4 table)."""
    from colltune.verify import Point, PointResult, Report
    alike = [PointResult(Point("bcast", 8, "binomial"), True, False, "binomial (same as forced)")]
    text = Report("mpich", "mpich-json", "f.json", 2, True, "yes", alike).render()
    assert "RESULT: PASS (consistent, not proven: at no point did the file's algorithm look " \
           "different from the library default on 2 ranks; try more --ranks)" in text
    told = [PointResult(Point("bcast", 8, "binomial"), True, True, "binomial (same as forced)")]
    assert Report("mpich", "mpich-json", "f.json", 4, True, "yes", told).render().endswith(
        "RESULT: PASS")
