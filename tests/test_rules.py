"""colltune's rules file: the Python reader and the interposer's C parser
(colltune-rules, built against a real MPI) agree on good files and on every
kind of error (same FILE:LINE: message), and the exporter writes files that
select, at every layout and size, what the decision table says."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import CACHE

from colltune import mpi
from colltune.decision import DecisionTable, Entry, Rule, rules_from_points
from colltune.errors import InputError
from colltune.exporters import EXPORTERS
from colltune.exporters.colltune_rules import (RulesError, catalogue_index, match, parse_rules,
                                               read_rules)
from colltune.providers.colltune import catalogue, rules_tool_command


@pytest.fixture(scope="module")
def tool(tmp_path_factory):
    impl = mpi.find("openmpi")
    return rules_tool_command(impl, CACHE, str(tmp_path_factory.mktemp("tool"))), impl


@pytest.fixture(scope="module")
def cat(tool):
    return catalogue_index(catalogue(tool[1], CACHE))


def c_tool(tool, *args):
    cmd, impl = tool
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60,
                          env=impl.run_env())


GOOD = """# a comment line
  colltune-rules 1   # header with a comment

bcast size=2..8 bytes=0..1k -> binomial
bcast nodes=2.. ppn=4 bytes=1025.. -> pipeline segsize=16k fanout=2
bcast -> library
reduce bytes=..64 -> linear
allreduce nodes=1 size=* -> ring segsize=4096
allgather ppn=3..3 -> bruck\t# tab before the comment
reduce bytes=..4k -> logp_tree lf=-1 inter=800
"""


def _normal(rules):
    """Python RulesLine list -> the C tool's JSON form."""
    out = []
    for r in rules:
        d = {"line": r.line, "collective": r.collective}
        for k in ("size", "nodes", "ppn", "bytes"):
            d[k] = list(r.ranges.get(k, (0, None)))
        d.update(algorithm=r.algorithm, params=r.params)
        out.append(d)
    return out


def test_good_file_python_and_c_agree(tool, cat, tmp_path):
    path = tmp_path / "good.rules"
    path.write_text(GOOD)
    rules = read_rules(str(path), cat)
    assert [r.line for r in rules] == [4, 5, 6, 7, 8, 9, 10]
    assert rules[6].params["lf"] == -1 and rules[6].params["inter"] == 800   # below 0: allowed
    assert rules[1].ranges == {"nodes": (2, None), "ppn": (4, 4), "bytes": (1025, None)}
    assert rules[1].params == {"segsize": 16384, "fanout": 2}
    assert rules[4].params == {"segsize": 4096}
    assert rules[3].params == {}                       # linear has no parameters
    proc = c_tool(tool, "check", str(path))
    assert proc.returncode == 0, proc.stderr
    c_rules = [json.loads(line) for line in proc.stdout.splitlines()]
    # C groups rules by collective; within one, file order is kept
    key = lambda d: (["bcast", "reduce", "allreduce", "allgather"].index(d["collective"]), d["line"])
    assert sorted(_normal(rules), key=key) == c_rules


@pytest.mark.parametrize("point", [
    ("bcast", 4, 1, 4, 1024), ("bcast", 4, 1, 4, 1025), ("bcast", 16, 4, 4, 1 << 20),
    ("bcast", 16, 4, 3, 1 << 20), ("reduce", 2, 1, 2, 64), ("reduce", 2, 1, 2, 65),
    ("allreduce", 7, 1, 7, 0), ("allreduce", 8, 2, 4, 8), ("allgather", 6, 2, 3, 12),
    ("allgather", 6, 3, 2, 12)])
def test_first_match_python_and_c_agree(tool, cat, tmp_path, point):
    path = tmp_path / "good.rules"
    path.write_text(GOOD)
    r = match(read_rules(str(path), cat), *point)
    want = "library @line 0" if r is None else " ".join(
        [r.algorithm, *(f"{k}={v}" for k, v in r.params.items())]) + f" @line {r.line}"
    got = c_tool(tool, "match", str(path), *map(str, point)).stdout.strip()
    assert got == want


BAD = [
    ("bcast -> linear\n", 1, "expected the header 'colltune-rules 1' before any rule, got 'bcast'"),
    ("colltune-rules 2\n", 1, "unsupported rules version '2' (this interposer reads version 1)"),
    ("colltune-rules\n", 1, "unsupported rules version ''"),
    ("# nothing\n\n", 2, "no 'colltune-rules 1' header (empty file?)"),
    ("colltune-rules 1\nbcastx -> linear\n", 2, "unknown collective 'bcastx'"),
    ("colltune-rules 1\n\nbcast linear\n", 3, "missing '->' between the conditions and the algorithm"),
    ("colltune-rules 1\nbcast size -> linear\n", 2, "expected KEY=RANGE (size, nodes, ppn, bytes), got 'size'"),
    ("colltune-rules 1\nbcast count=3 -> linear\n", 2, "unknown key 'count'"),
    ("colltune-rules 1\nbcast ppn=2 ppn=3 -> linear\n", 2, "key 'ppn' given twice"),
    ("colltune-rules 1\nbcast bytes=1..x -> linear\n", 2, "bytes: 'x' is not a non-negative integer (range '1..x')"),
    ("colltune-rules 1\nbcast bytes=-5 -> linear\n", 2, "bytes: '-5' is not a non-negative integer"),
    # beyond what the interposer's 64-bit parser takes: both refuse it the same way
    ("colltune-rules 1\nbcast bytes=18446744073709551615 -> linear\n", 2,
     "bytes: '18446744073709551615' is too large"),
    ("colltune-rules 1\nbcast bytes=1..99999999999999999999 -> linear\n", 2,
     "bytes: '99999999999999999999' is too large"),
    ("colltune-rules 1\nbcast bytes=17179869184g -> linear\n", 2,
     "bytes: '17179869184g' is too large"),
    ("colltune-rules 1 extra\nbcast -> linear\n", 1,
     "the header is 'colltune-rules 1' alone, got 'extra' after it"),
    ("colltune-rules 1\nbcast bytes=9..3 -> linear\n", 2, "bytes: empty range '9..3' (start above end)"),
    ("colltune-rules 1\nbcast bytes=.. -> linear\n", 2, "bytes: empty range '..'"),
    ("colltune-rules 1\nbcast nodes=0 -> linear\n", 2, "nodes: range '0' must not go below 1"),
    ("colltune-rules 1\nbcast ->\n", 2, "no algorithm after '->'"),
    ("colltune-rules 1\nreduce -> ring\n", 2, "unknown reduce algorithm 'ring' (known: linear, binomial"),
    ("colltune-rules 1\nbcast -> pipeline seg=4\n", 2, "bcast pipeline has no parameter 'seg' (parameters: segsize, fanout)"),
    ("colltune-rules 1\nbcast -> linear segsize=4\n", 2, "bcast linear has no parameter 'segsize' (parameters: none)"),
    ("colltune-rules 1\nbcast -> pipeline fanout=0\n", 2, "bcast pipeline: fanout=0 is not an integer in [1, 64]"),
    ("colltune-rules 1\nbcast -> pipeline fanout=two\n", 2, "fanout=two is not an integer in [1, 64]"),
    ("colltune-rules 1\nbcast -> pipeline fanout=-1\n", 2, "fanout=-1 is not an integer in [1, 64]"),
    ("colltune-rules 1\nbcast -> logp_tree lf=-2\n", 2, "bcast logp_tree: lf=-2 is not an integer in [-1, 1024]"),
    ("colltune-rules 1\nbcast -> logp_tree lf=--1\n", 2, "lf=--1 is not an integer in [-1, 1024]"),
    ("colltune-rules 1\nbcast -> pipeline fanout=2 fanout=3\n", 2, "parameter 'fanout' given twice"),
    ("colltune-rules 1\nbcast -> pipeline 4\n", 2, "expected PARAMETER=VALUE after the algorithm, got '4'"),
    ("colltune-rules 1\nbcast -> library segsize=1\n", 2, "'library' takes no parameters, got 'segsize=1'"),
    ("colltune-rules 1\nbcast -> linear\nbcast -> linear \x01\n", 3, "not a text line (byte 0x01 at column 17)"),
    # UTF-8 is for comments only (there it is fine: test_utf8_comments_are_fine)
    ("colltune-rules 1\nbcast -> lin\u00b5ear # 10 \u00b5s\n", 2, "not a text line (byte 0xc2 at column 13)"),
    ("colltune-rules 1\n" + "#" * 5000 + "\n", 2, "line longer than 4096 characters"),
    # what a user's editor or a mix-up gives: named (a user's review)
    ("\ufeffcolltune-rules 1\nbcast -> linear\n", 1,
     "not a text line (byte 0xef at column 1): a UTF-8 byte-order mark, save the file without it"),
    ("rule-file-version-2\n1\n2\n", 1, "got 'rule-file-version-2': this looks like Open MPI's "
     "coll/tuned rules file, which Open MPI reads (coll_tuned_dynamic_rules_filename)"),
    ('{\n  "collective=bcast": {}\n}\n', 1, "got '{': this looks like MPICH's JSON selection file"),
]


@pytest.mark.parametrize("text,line,problem", BAD)
def test_errors_name_file_line_and_value(tool, cat, tmp_path, text, line, problem):
    path = tmp_path / "bad.rules"
    path.write_text(text)
    with pytest.raises(RulesError) as exc:
        read_rules(str(path), cat)
    assert str(exc.value).startswith(f"{path}:{line}: ")
    assert problem in str(exc.value)
    proc = c_tool(tool, "check", str(path))
    assert proc.returncode == 1
    assert proc.stderr.strip() == str(exc.value)      # the interposer says exactly the same


def test_utf8_comments_are_fine(tool, cat, tmp_path):
    """A user review: one "µs" in a comment made the interposer refuse the whole file."""
    path = tmp_path / "utf8.rules"
    path.write_text("colltune-rules 1  # r\u00e8gles\nbcast -> linear   # 10 \u00b5s, \u2264 4 KiB\n")
    assert len(read_rules(str(path), cat)) == 1
    proc = c_tool(tool, "check", str(path))
    assert proc.returncode == 0 and json.loads(proc.stdout)["algorithm"] == "linear", proc.stderr


def test_missing_and_binary_files(tool, tmp_path):
    for path, line in ((tmp_path / "absent.rules", 0), (tmp_path / "nul.rules", 2)):
        if line:
            path.write_bytes(b"colltune-rules 1\nbcast\0 -> linear\n")
        with pytest.raises(RulesError, match=rf"^{path}:{line}: "):
            read_rules(str(path))
        assert c_tool(tool, "check", str(path)).stderr.startswith(f"{path}:{line}: ")


def test_force_syntax(tool):
    proc = c_tool(tool, "force", "bcast:pipeline:segsize=1k,fanout=3; allreduce:ring")
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(g["collective"], g["algorithm"], g["params"]) for g in got] == [
        ("bcast", "pipeline", {"segsize": 1024, "fanout": 3}), ("allreduce", "ring", {"segsize": 65536})]
    for spec, problem in (("bcast", "expected COLL:ALGORITHM"), ("gather:linear", "unknown collective 'gather'"),
                          ("bcast:linear;allgather:nope", "COLLTUNE_FORCE:2: unknown allgather algorithm 'nope'"),
                          ("bcast:pipeline:fanout=99", "fanout=99 is not an integer in [1, 64]")):
        proc = c_tool(tool, "force", spec)
        assert proc.returncode == 1 and problem in proc.stderr, (spec, proc.stderr)


def _table(provider="colltune"):
    def entry(coll, n, p, rules):
        return Entry(coll, n, p, tuple(Rule(m, a, provider, {}) for m, a in rules))
    entries = []
    for n in (2, 8):
        for p in (2, 6):
            big = "pipeline[segsize=16384]" if n * p > 12 else "scatter_ring_allgather"
            entries.append(entry("bcast", n, p, [(0, "binomial"), (1000 * n, "knomial[radix=3]"),
                                                 (20000 * p, big)]))
            entries.append(entry("allreduce", n, p, [(0, "recursive_doubling"), (4096 * p, "ring")]))
    return DecisionTable("exhaustive", {"backend": "sim", "platform": "small"}, tuple(entries))


def test_export_selects_what_the_table_says(tool, cat, tmp_path):
    exporter = EXPORTERS.get("colltune")()
    exporter.catalogue = cat
    table = _table()
    exported = exporter.export(table)
    path = tmp_path / "t.rules"
    path.write_text(exported.text)
    assert exported.env_for(str(path)) == {"COLLTUNE_RULES": str(path)}
    rules = read_rules(str(path), cat)
    assert exported.text.splitlines()[0].startswith("# colltune ")      # provenance header
    checked = 0
    for coll in ("bcast", "allreduce"):
        for nodes in (1, 2, 3, 4, 5, 8, 40):
            for ppn in (1, 2, 3, 4, 6, 12):
                for size in (0, 999, 1000, 2000, 8000, 24575, 24576, 40000, 120000, 1 << 24):
                    want = table.lookup(coll, nodes, ppn, size)
                    got = match(rules, coll, nodes * ppn, nodes, ppn, size)
                    name = want.algorithm.split("[")[0]
                    assert got is not None and got.algorithm == name, (coll, nodes, ppn, size)
                    if "[" in want.algorithm:
                        k, v = want.algorithm[len(name) + 1:-1].split("=")
                        assert got.params[k] == int(v)
                    checked += 1
    assert checked == 2 * 7 * 6 * 10
    # and the interposer's own parser picks the same at a few of those points
    for coll, n, p, size in (("bcast", 8, 6, 1 << 24), ("bcast", 3, 3, 1500), ("allreduce", 5, 4, 20000)):
        want = match(rules, coll, n * p, n, p, size)
        got = c_tool(tool, "match", str(path), coll, str(n * p), str(n), str(p), str(size)).stdout
        assert got.startswith(want.algorithm + " ") and got.strip().endswith(f"@line {want.line}")


def test_export_refuses_other_providers_unless_substituted(cat):
    exporter = EXPORTERS.get("colltune")()
    table = _table(provider="smpi")
    with pytest.raises(InputError, match=r"allreduce 2x2 from 0 B/rank: smpi algorithm 'recursive_doubling' is not one of colltune's"):
        exporter.export(table)
    exporter.allow_substitute = True
    out = exporter.export(table)
    rules = parse_rules(out.text, "x", cat)
    assert {r.algorithm for r in rules} == {"library"} and out.notes


def _measured(times: dict) -> tuple:
    return tuple((size, prov, alg, t) for (size, prov, alg), t in sorted(times.items()))


def _tuned_table(coll: str, layouts: dict, default=("smpi", "ompi")):
    """An exhaustive table (every arm's times, round-tripped through JSON) of tuned
    layouts {(nodes, ppn): {size: {(provider, alg): seconds}}}, the library default
    (library, selector) SMPI's ompi unless said; and its entries."""
    entries = []
    for (n, p), t in layouts.items():
        best = {s: min(arms, key=arms.get) for s, arms in t.items()}
        pts = [(s, alg, prv, {}, t[s][(prv, alg)]) for s, (prv, alg) in best.items()]
        entries.append(Entry(coll, n, p, rules_from_points(pts),
                             _measured({(s, *arm): v for s, arms in t.items() for arm, v in arms.items()})))
    prov = {"arms": {"library": default[0], "library_default": default[1]}}
    table = DecisionTable("exhaustive", prov, tuple(entries))
    return DecisionTable.from_dict(json.loads(json.dumps(table.to_dict()))), entries


def test_layouts_between_tuned_ones_get_the_robust_arm(cat):
    """With every arm's times in the table (exhaustive), a tuned layout keeps its own
    winners, a layout between tuned ones gets, among the arms no slower than the library
    default around it, the one with the smallest worst slowdown (decision.robust_rules),
    not the nearest layout's winner."""
    lib, x, y = ("smpi", "ompi"), ("colltune", "bruck"), ("colltune", "han")
    a = {8: {lib: 10, x: 20, y: 12}, 128: {lib: 50, x: 100, y: 30}}     # 16x12: lib, then han
    b = {8: {lib: 10, x: 9, y: 30}, 128: {lib: 40, x: 35, y: 80}}       # 128x2: bruck
    table, entries = _tuned_table("allgather", {(16, 12): a, (128, 2): b})
    prov = table.provenance
    exporter = EXPORTERS.get("colltune")()
    exporter.catalogue = cat
    rules = parse_rules(exporter.export(table).text, "x", cat)
    pick = lambda n, p, s: match(rules, "allgather", n * p, n, p, s).algorithm  # noqa: E731
    assert [pick(16, 12, 8), pick(16, 12, 128)] == ["library", "han"]
    # between measured sizes whose winners differ: han is slower than the library
    # default at 8 B, so the default holds until han's measured size (no midpoint)
    assert [pick(16, 12, 100), pick(16, 12, 127)] == ["library", "library"]
    assert [pick(128, 2, 8), pick(128, 2, 128)] == ["bruck", "bruck"]
    # 48x4 is nearer 128x2, whose bruck is 2x / 3.3x off at 16x12; every other arm is
    # slower than the library default at one of the two layouts
    assert [pick(48, 4, 8), pick(48, 4, 128)] == ["library", "library"]
    # beyond the tuned range: the tuned layout(s) at its edge
    assert pick(256, 2, 128) == "bruck" and pick(4, 12, 128) == "han"
    # a table without every arm's times keeps the nearest layout's winners
    bare = DecisionTable("exhaustive", prov, tuple(Entry(e.collective, e.nodes, e.ppn, e.rules)
                                                   for e in entries))
    rules = parse_rules(exporter.export(bare).text, "x", cat)
    assert pick(48, 4, 8) == "bruck"


def test_a_library_algorithm_the_table_chose_holds_where_nothing_was_measured(cat):
    """A user review: the table chose MPICH's nb allreduce at every measured size of
    1x4 (its rules file applies nb at every communicator size), yet colltune.rules sent
    every other layout to colltune's recursive doubling, which beat the library default
    by more than the margin there but lost to nb. Where nothing was measured, a call
    handed to the library runs the library's file: colltune's arm must beat that."""
    lib, nb, rd = ("mpich", "default"), ("mpich", "nb"), ("colltune", "recursive_doubling")
    t = {8: {lib: 100, nb: 30, rd: 50}, 65536: {lib: 1000, nb: 368, rd: 569}}
    table, _ = _tuned_table("allreduce", {(1, 4): t}, default=lib)
    exporter = EXPORTERS.get("colltune")()
    exporter.catalogue = cat
    exporter.allow_substitute = True    # as deploy writes it: the library's file runs nb
    rules = parse_rules(exporter.export(table).text, "x", cat)
    pick = lambda n, p, s: match(rules, "allreduce", n * p, n, p, s).algorithm  # noqa: E731
    assert {pick(n, p, s) for n, p in ((1, 4), (1, 2), (1, 8), (4, 4)) for s in (8, 1000, 65536)} \
        == {"library"}
    # where colltune's arm beats what the library's file runs by the margin, it holds
    t = {8: {lib: 100, nb: 60, rd: 50}, 65536: {lib: 1000, nb: 600, rd: 500}}
    table, _ = _tuned_table("allreduce", {(1, 4): t}, default=lib)
    rules = parse_rules(exporter.export(table).text, "x", cat)
    assert pick(4, 4, 8) == pick(4, 4, 65536) == "recursive_doubling"


def test_robust_rules_keep_a_colltune_arm_that_is_safe_everywhere():
    from colltune.decision import robust_rules
    lib, z, w = ("smpi", "ompi"), ("colltune", "ring"), ("colltune", "han")
    one = Entry("allreduce", 16, 12, (), _measured({(8, *lib): 10, (8, *z): 9, (8, *w): 5}))
    two = Entry("allreduce", 128, 2, (), _measured({(8, *lib): 10, (8, *z): 8, (8, *w): 20}))
    # han wins at 16x12 but is 2x the default at 128x2; ring beats the default at both
    assert [(r.provider, r.algorithm) for r in robust_rules([one, two], default=lib)] == [z]
    # without a default to compare with: minimax regret alone (ring 1.8x, ompi 2x, han 2.5x)
    assert [(r.provider, r.algorithm) for r in robust_rules([one, two])] == [z]


def test_guarded_export_takes_the_minimax_arm_where_nothing_was_measured(cat):
    """unmeasured_margin None (deploy --guard): a layout between tuned ones, and the
    sizes between measured ones, get the arm with the smallest worst slowdown even
    where it is slower than the default at one layout around (the guard checks it at
    run time); the measured sizes of tuned layouts keep their winners."""
    lib, ml = ("smpi", "ompi"), ("colltune", "multileader")
    a = {8: {lib: 221, ml: 24}, 128: {lib: 800, ml: 40}}       # 16x12: multileader 9x faster
    b = {8: {lib: 26, ml: 27.5}, 128: {lib: 100, ml: 104}}      # 128x2: the default by 4-6 %
    table, _ = _tuned_table("allreduce", {(16, 12): a, (128, 2): b})
    exporter = EXPORTERS.get("colltune")()
    exporter.catalogue = cat

    def picks(margin):
        exporter.unmeasured_margin = margin
        text = exporter.export(table).text
        rules = parse_rules(text, "x", cat)
        at = lambda n, p, s: match(rules, "allreduce", n * p, n, p, s).algorithm  # noqa: E731
        return text, [at(48, 4, 8), at(48, 4, 100), at(128, 2, 8), at(128, 2, 64), at(16, 12, 64)]
    safe_text, safe = picks(1.10)
    assert safe == ["library", "library", "library", "library", "multileader"]
    guarded_text, guarded = picks(None)
    assert guarded == ["multileader", "multileader", "library", "library", "multileader"]
    assert "COLLTUNE_GUARD" in guarded_text and "COLLTUNE_GUARD" not in safe_text


def _one_layout_table(times: dict, nodes: int = 64, ppn: int = 12) -> DecisionTable:
    """An exhaustive table of one tuned layout: times {size: {(provider, alg): s}}."""
    best = {s: min(arms, key=arms.get) for s, arms in times.items()}
    pts = [(s, alg, prv, {}, times[s][(prv, alg)]) for s, (prv, alg) in best.items()]
    entry = Entry("allreduce", nodes, ppn, rules_from_points(pts),
                  _measured({(s, *arm): v for s, arms in times.items() for arm, v in arms.items()}))
    prov = {"arms": {"library": "smpi", "library_default": "ompi"}}
    return DecisionTable.from_dict(json.loads(json.dumps(
        DecisionTable("exhaustive", prov, (entry,)).to_dict())))


def test_unmeasured_sizes_and_layouts_need_a_margin_over_the_default(cat):
    """Where nothing was measured an arm replaces the default only if it beat it by
    decision.UNMEASURED_MARGIN at every point around; the measured sizes of the tuned
    layout keep their winners however narrow; a tie goes to the default. One tuned
    layout gets these rules too (not the nearest layout's)."""
    from colltune.decision import UNMEASURED_MARGIN
    assert UNMEASURED_MARGIN > 1.05
    lib, x, y, z = ("smpi", "ompi"), ("colltune", "ring"), ("colltune", "rabenseifner"), \
        ("colltune", "recursive_doubling")
    t = {8: {lib: 10, x: 20, y: 30, z: 10},          # z ties the default
         64: {lib: 10, x: 9.7, y: 30, z: 12},        # x wins by 3 %
         512: {lib: 40, x: 20, y: 30, z: 50},        # x wins by 2x
         4096: {lib: 100, x: 50, y: 45, z: 200}}     # y wins, x by 2x
    exporter = EXPORTERS.get("colltune")()
    exporter.catalogue = cat
    rules = parse_rules(exporter.export(_one_layout_table(t)).text, "x", cat)
    pick = lambda n, p, s: match(rules, "allreduce", n * p, n, p, s).algorithm  # noqa: E731
    # the tuned layout: measured winners (a tie: the default), margins in between
    assert [pick(64, 12, s) for s in (8, 64, 512, 4096)] == ["library", "ring", "ring", "rabenseifner"]
    assert pick(64, 12, 30) == "library"          # x won by 3 % at 64 B: not enough in between
    assert pick(64, 12, 100) == "library"
    assert pick(64, 12, 2000) == "ring"           # 2x at 512 B and at 4 KiB: x in between
    assert pick(64, 12, 1 << 20) == "rabenseifner"
    # untuned layouts, even at the measured sizes: the margin everywhere
    for n, p in ((32, 12), (64, 4), (128, 12), (64, 16)):
        assert [pick(n, p, s) for s in (8, 64, 512, 2000, 4096)] == \
            ["library", "library", "ring", "ring", "rabenseifner"], (n, p)


def test_reading_a_device_or_a_huge_file_is_refused(tmp_path):
    """A rules file that is /dev/urandom had ended in a MemoryError traceback."""
    from colltune.inputs import MAX_TEXT_BYTES, read_text
    with pytest.raises(InputError, match=r"^/dev/urandom:0: not a regular file"):
        read_text("/dev/urandom")
    big = tmp_path / "big.rules"
    with open(big, "wb") as fh:
        fh.truncate(MAX_TEXT_BYTES + 1)
    with pytest.raises(InputError, match=rf"big.rules:0: {MAX_TEXT_BYTES + 1} bytes, more than"):
        read_text(str(big))
