"""Exporters: the format details of each dialect (no MPI run here but one small
smpirun tuning; the real libraries load these files in test_verify.py)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import have_mpi, run_cli

from colltune.decision import DecisionTable
from colltune.errors import InputError
from colltune.exporters import EXPORTERS
from colltune.exporters.mpich_json import MPICHJsonExporter, library_json
from colltune.exporters.openmpi_tuned import IDS_5_0, parse_version, rules_version
from colltune.verify.rules import csel_leaf, parse_han, parse_tuned


def table(entries, provider_lib="Open MPI") -> DecisionTable:
    return DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "sim", "platform": "small", "mpi_library": provider_lib,
                       "mpi_version": "x"},
        "entries": [{"collective": c, "nodes": n, "ppn": p,
                     "rules": [{"min_size": s, "algorithm": a, "provider": prov, "params": par}
                               for s, a, prov, par in rules]}
                    for c, n, p, rules in entries]})


def ompi(entries, target="5.0.11", **attrs):
    exp = EXPORTERS.get("openmpi-tuned")()
    for k, v in attrs.items():
        setattr(exp, k, v)
    return exp.export(table(entries), target)


def test_version_2_header_only_where_open_mpi_reads_it():
    assert [rules_version(parse_version(v)) for v in
            ("4.1.7", "4.1.8", "5.0.0", "5.0.6", "5.0.7", "5.0.11", "6.0.0")] == [1, 2, 1, 1, 2, 2, 2]
    old = ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {})])], "5.0.6").text
    new = ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {})])], "5.0.7").text
    assert not old.startswith("rule-file-version") and parse_tuned(old, "old").version == 1
    assert new.splitlines()[0] == "rule-file-version-2" and parse_tuned(new, "new").version == 2
    # version 1 rows have 4 columns, version 2 rows 5 (max requests)
    assert parse_tuned(old, "o").blocks["bcast"][0][1][0] == (0, 6, 0, 0)
    assert parse_tuned(new, "n").blocks["bcast"][0][1][0] == (0, 6, 0, 0, 0)
    with pytest.raises(InputError, match="expected a library version"):
        parse_version("five")


def test_size_keys_ids_and_order():
    text = ompi([("allgather", 1, 4, [(0, "bruck", "openmpi", {}), (512, "ring", "openmpi", {})]),
                 ("bcast", 1, 4, [(0, "basic_linear", "openmpi", {}),
                                  (1000, "binomial", "openmpi", {"segsize": 8192, "fanout": 3})]),
                 ("barrier", 1, 4, [(0, "bruck", "openmpi", {})])]).text
    rules = parse_tuned(text, "t")
    ids = {c: {n: i + 1 for i, n in enumerate(ns)} for c, ns in IDS_5_0.items()}
    # allgather is keyed by the total (512 B/rank x 4 ranks), bcast by bytes per rank
    assert rules.blocks["allgather"] == [(4, [(0, ids["allgather"]["bruck"], 0, 0, 0),
                                              (2048, ids["allgather"]["ring"], 0, 0, 0)])]
    assert rules.blocks["bcast"][0][1] == [(0, ids["bcast"]["basic_linear"], 0, 0, 0),
                                           (1000, ids["bcast"]["binomial"], 3, 8192, 0)]
    assert rules.blocks["barrier"][0][1] == [(0, ids["barrier"]["bruck"], 0, 0, 0)]
    # collective ids as Open MPI numbers them, in ascending order
    ids_in_file = [int(ln.split()[0]) for ln in text.splitlines() if ln.endswith(tuple(
        f"# {c}" for c in ("allgather", "bcast", "barrier")))]
    assert ids_in_file == [0, 6, 7]


def test_comm_sizes_switch_at_geometric_midpoint_and_same_size_layouts():
    text = ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {})]),
                 ("bcast", 2, 4, [(0, "chain", "openmpi", {})]),
                 ("bcast", 4, 2, [(0, "pipeline", "openmpi", {})]),
                 ("bcast", 1, 32, [(0, "knomial", "openmpi", {})])]).text
    rules = parse_tuned(text, "t")
    # 2 and 8 ranks -> block from ceil(sqrt(16)) = 4; 8 and 32 -> from 16
    assert [c for c, _ in rules.blocks["bcast"]] == [2, 4, 16]
    # 2x4 and 4x2 both have 8 ranks: the layout with more nodes (4x2, pipeline) is kept
    assert rules.lookup("bcast", 8, 100)[1] == IDS_5_0["bcast"].index("pipeline") + 1
    assert "2x4 left out: same comm size 8 as 4x2" in text
    assert rules.lookup("bcast", 3, 100)[1] == IDS_5_0["bcast"].index("binomial") + 1


def test_smpi_rules_map_to_equivalents_or_fail_naming_the_rule():
    smpi = [("allreduce", 2, 2, [(0, "rdb", "smpi", {}), (4096, "lr", "smpi", {})])]
    rows = parse_tuned(ompi(smpi).text, "t").blocks["allreduce"][0][1]
    assert [r[1] for r in rows] == [IDS_5_0["allreduce"].index(n) + 1
                                    for n in ("recursive_doubling", "ring")]
    bad = [("allreduce", 2, 2, [(0, "rdb", "smpi", {}), (4096, "smp_rsag", "smpi", {})])]
    with pytest.raises(InputError) as err:
        ompi(bad)
    msg = str(err.value)
    assert "allreduce layout 2x2 from 4096 B/rank" in msg and "'smp_rsag'" in msg
    assert "--allow-substitute would leave it to openmpi's own selection (coll/tuned's " \
           "fixed decision, algorithm 0) there" in msg
    sub = ompi(bad, allow_substitute=True).text
    assert "NOTE allreduce layout 2x2 from 4096 B/rank: smpi algorithm 'smp_rsag' -> " \
           "substituted by openmpi's own selection (coll/tuned's fixed decision, algorithm 0)" in sub
    # the substitute is algorithm 0 (coll/tuned's fixed decision), not a fixed algorithm
    assert parse_tuned(sub, "s").blocks["allreduce"][0][1] == [
        (0, IDS_5_0["allreduce"].index("recursive_doubling") + 1, 0, 0, 0), (4096, 0, 0, 0, 0)]
    with pytest.raises(InputError, match="have no coll/tuned rules column"):
        ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {"k": 3})])])
    with pytest.raises(InputError, match="no such bcast algorithm"):
        ompi([("bcast", 1, 2, [(0, "warp_drive", "openmpi", {})])])


def test_smpi_exact_tie_goes_to_the_arm_the_library_has(workdir):
    """SMPI is deterministic: at allreduce 2x4, 8 B, mvapich2_rs and rdb send the same
    messages and take the same time, and the tie goes to the first name; mvapich2_rs
    has no Open MPI or MPICH equivalent, rdb has (both recursive doubling)."""
    t, t2 = str(workdir / "t.json"), str(workdir / "t2.json")
    run_cli("tune", "--platform", "small", "--collectives", "allreduce", "--layouts", "2x4",
            "--sizes", "8", "--provider", "library", "--algorithms", "mvapich2_rs,rdb,lr",
            "--table", t, "-q")
    entry = DecisionTable.load(t).entries[0]
    times = {alg: s for _, _, alg, s in entry.measured}
    assert entry.rules[0].algorithm == "mvapich2_rs" and times["mvapich2_rs"] == times["rdb"]
    for fmt, name in (("openmpi-tuned", "recursive_doubling"), ("mpich-json", "recursive_doubling")):
        proc = run_cli("export", "--table", t, "--format", fmt, "-o", str(workdir / fmt))
        assert f"'mvapich2_rs' -> '{name}', the equivalent of SMPI's 'rdb'" in proc.stdout
    rows = parse_tuned(open(workdir / "openmpi-tuned").read(), "t").blocks["allreduce"][0][1]
    assert [r[1] for r in rows] == [IDS_5_0["allreduce"].index("recursive_doubling") + 1]
    # no tie, no equivalent: still an error naming the rule (a measured 1 % apart is no tie)
    data = json.load(open(t))
    data["entries"][0]["measured"] = [[8, "smpi", a, s * (1.01 if a == "rdb" else 1)]
                                      for _, _, a, s in data["entries"][0]["measured"]]
    json.dump(data, open(t2, "w"))
    bad = run_cli("export", "--table", t2, "--format", "openmpi-tuned", check=False)
    assert bad.returncode != 0 and "'mvapich2_rs' has no openmpi equivalent" in bad.stderr


def test_header_comment_and_env():
    exp = ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {})])])
    assert exp.text.splitlines()[1].startswith("# colltune ")
    assert "source platform: small (backend sim)" in exp.text
    env = exp.env_for("/x/r.rules")
    assert env["OMPI_MCA_coll_tuned_dynamic_rules_filename"] == "/x/r.rules"
    assert env["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"


def test_tuned_parser_rejects_what_open_mpi_drops():
    good = ompi([("bcast", 1, 2, [(0, "binomial", "openmpi", {}), (64, "chain", "openmpi", {})])])
    lines = good.text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("0 6 "))
    lines[i] = "1" + lines[i][1:]
    with pytest.raises(InputError, match=r":\d+: bcast comm 2: the first rule must be for message "
                                         r"size 0, got 1"):
        parse_tuned("\n".join(lines), "bad.rules")


BASE = {"collective=bcast": {"comm_type=intra": {"any": {"algorithm=MPIR_Bcast_intra_binomial": {}}},
                             "comm_type=inter": {"any": {"algorithm=MPIR_Bcast_inter_x": {}}}},
        "collective=allgather": {"comm_type=intra": {"any": {"algorithm=MPIR_Allgather_intra_ring": {}}}},
        "collective=barrier": {"comm_type=intra": {"any": {"algorithm=MPIR_Barrier_intra_smp": {}}}}}


def mpich(entries, target, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(BASE))
    exp = MPICHJsonExporter()
    exp.base_path = str(base)
    return exp.export(table(entries, "MPICH"), target)


def test_mpich_any_spelling_order_keys_and_params(tmp_path):
    entries = [("bcast", 1, 4, [(0, "binomial", "mpich", {}), (100, "tree", "mpich", {"k": 4}),
                                (20000, "scatter_ring_allgather", "mpich", {})]),
               ("bcast", 1, 2, [(0, "binomial", "mpich", {})]),
               ("allgather", 1, 4, [(0, "brucks", "mpich", {}), (1000, "ring", "mpich", {})])]
    old = json.loads(mpich(entries, "4.1.2", tmp_path).text)
    new = json.loads(mpich(entries, "4.3.0", tmp_path).text)
    intra = old["collective=bcast"]["comm_type=intra"]
    # comm sizes 2 and 4 switch at ceil(sqrt(8)) = 3: "<= 2", then the any branch
    assert list(intra) == ["comm_size<=2", "comm_size=any"]
    ladder = intra["comm_size=any"]
    assert list(ladder) == ["avg_msg_size<=99", "avg_msg_size<=19999", "avg_msg_size=any"]
    assert list(new["collective=bcast"]["comm_type=intra"]) == ["comm_size<=2", "any"]
    assert list(new["collective=bcast"]["comm_type=intra"]["any"])[-1] == "any"
    # every parameter of the tree leaf is given; tree_type integer up to 4.2, name from 4.3
    tree_old = ladder["avg_msg_size<=19999"]["algorithm=MPIR_Bcast_intra_tree"]
    tree_new = new["collective=bcast"]["comm_type=intra"]["any"]["avg_msg_size<=19999"][
        "algorithm=MPIR_Bcast_intra_tree"]
    assert "tree_type=0" in tree_old and "tree_type=kary" in tree_new and "k=4" in tree_new
    assert {k.split("=")[0] for k in tree_new} >= {"tree_type", "k", "is_non_blocking",
                                                   "topo_overhead", "topo_diff_groups",
                                                   "topo_diff_switches", "topo_same_switches"}
    # allgather is keyed by total bytes: 1000 B/rank x 4 ranks
    assert list(old["collective=allgather"]["comm_type=intra"]["comm_size=any"]) == \
        ["total_msg_size<=3999", "total_msg_size=any"]
    # untouched: the inter branch of a tuned collective and collectives not in the table
    assert old["collective=bcast"]["comm_type=inter"] == BASE["collective=bcast"]["comm_type=inter"]
    assert old["collective=barrier"] == BASE["collective=barrier"]
    # the header sits in the first leaf's parameter object (MPICH ignores unknown params)
    first = old["collective=bcast"]["comm_type=intra"]["comm_size<=2"]["avg_msg_size=any"]
    assert any(k.startswith("colltune: colltune ") for k in first["algorithm=MPIR_Bcast_intra_binomial"])
    # the verifier's reading of the tree agrees with the table
    assert csel_leaf(old, "bcast", 4, 150)[0] == "MPIR_Bcast_intra_tree"
    assert csel_leaf(old, "bcast", 2, 150)[0] == "MPIR_Bcast_intra_binomial"
    assert csel_leaf(old, "allgather", 4, 1000)[0] == "MPIR_Allgather_intra_ring"
    assert csel_leaf(old, "allgather", 4, 999)[0] == "MPIR_Allgather_intra_brucks"


def test_mpich_errors_name_the_rule(tmp_path):
    with pytest.raises(InputError, match="MPIR_Bcast_intra_binomial takes no parameter"):
        mpich([("bcast", 1, 2, [(0, "binomial", "mpich", {"k": 3})])], "5.0.2", tmp_path)
    # ccl would be a valid name, but a CSEL file selecting it crashes MPICH 5.0.2 in MPI_Init
    with pytest.raises(InputError, match=r"allreduce layout 1x2 from 0 B/rank: mpich algorithm "
                                         r"'ccl': it needs NCCL/RCCL"):
        mpich([("allreduce", 1, 2, [(0, "ccl", "mpich", {})])], "5.0.2", tmp_path)
    # another library's namesake is another implementation (a user review found the old
    # wording refuse a name it listed as known)
    with pytest.raises(InputError, match=r"bcast layout 1x2 from 0 B/rank: openmpi algorithm "
                                         r"'chain': measured on openmpi, not mpich: the rules "
                                         r"file of mpich names only mpich's own algorithms .*; "
                                         r"--allow-substitute would leave it to mpich's own "
                                         r"selection \(its built-in CSEL branch\) there"):
        mpich([("bcast", 1, 2, [(0, "chain", "openmpi", {})])], "5.0.2", tmp_path)


def test_mpich_default_tree_comes_from_the_installed_library():
    from colltune import mpi
    from pathlib import Path
    lib = sorted(Path(mpi.find("mpich").prefix, "lib").glob("libmpi.so.*"))[0]
    tree, leaves = library_json(str(lib))
    assert {"collective=bcast", "collective=barrier", "collective=allgather"} <= set(tree)
    assert "MPIR_Bcast_intra_binomial" in leaves and "MPIR_Allreduce_intra_ring" in leaves


def test_han_format():
    exp = EXPORTERS.get("openmpi-han")().export(table([
        ("bcast", 2, 4, [(0, "SMP_binomial", "smpi", {"low": "sm", "up": "libnbc"}),
                         (4096, "binomial_tree", "smpi", {})]),
        ("bcast", 4, 4, [(0, "binomial", "openmpi", {})])]), "5.0.11")
    rules = parse_han(exp.text, "h")
    assert ("bcast", 2, 1, 0, "han") in rules and ("bcast", 2, 1, 4096, "tuned") in rules
    assert ("bcast", 2, 12, 0, "tuned") in rules     # 4x4: flat tuned from ceil(sqrt(8*16))
    assert ("bcast", 0, 1, 0, "sm") in rules and ("bcast", 1, 1, 0, "libnbc") in rules
    # every level's first configuration size is 1 and the first message size 0
    assert all(conf >= 1 for _, _, conf, _, _ in rules)
    with pytest.raises(InputError, match="coll/han has no dynamic rules for it"):
        EXPORTERS.get("openmpi-han")().export(table([("alltoall", 2, 2, [(0, "pair", "smpi", {})])]))


def test_export_cli_prints_path_and_settings(tmp_path):
    t = tmp_path / "t.json"
    table([("bcast", 1, 2, [(0, "binomial", "openmpi", {})])]).save(str(t))
    out = tmp_path / "r.rules"
    proc = run_cli("export", "--table", str(t), "--format", "openmpi-tuned", "--target", "5.0.6",
                   "-o", str(out))
    assert f"wrote {out}" in proc.stdout
    assert f"OMPI_MCA_coll_tuned_dynamic_rules_filename={out}" in proc.stdout
    assert "--mca coll_tuned_use_dynamic_rules 1" in proc.stdout
    assert parse_tuned(out.read_text(), str(out)).version == 1
    bad = run_cli("export", "--table", str(t), "--format", "nope", check=False)
    assert bad.returncode == 2 and "unknown export format 'nope'" in bad.stderr
    assert "mpich-json" in bad.stderr and "openmpi-han" in bad.stderr


def test_export_guarded_colltune_rules(tmp_path):
    """--guarded: the colltune format's rules for a guarded job (header says so); any
    other format refuses the flag."""
    t = tmp_path / "t.json"
    table([("bcast", 1, 2, [(0, "binomial", "colltune", {})])]).save(str(t))
    out = tmp_path / "r.rules"
    proc = run_cli("export", "--table", str(t), "--format", "colltune", "--guarded", "-o", str(out))
    assert "COLLTUNE_GUARD=N" in proc.stdout and "checks each rule" in out.read_text()
    plain = run_cli("export", "--table", str(t), "--format", "colltune", "-o", str(tmp_path / "p.rules"))
    assert "COLLTUNE_GUARD" not in plain.stdout + (tmp_path / "p.rules").read_text()
    bad = run_cli("export", "--table", str(t), "--format", "openmpi-tuned", "--guarded", check=False)
    assert bad.returncode != 0 and "--guarded does not apply to format openmpi-tuned" in bad.stderr


def test_all_inexpressible_rules_in_one_error_and_parametrised_equivalents(tmp_path):
    entries = [("bcast", 1, 2, [(0, "NTSB", "smpi", {}), (4096, "SMP_binary", "smpi", {})]),
               ("bcast", 2, 2, [(0, "NTSL", "smpi", {}), (100, "arrival_scatter", "smpi", {})])]
    with pytest.raises(InputError) as err:
        ompi(entries)
    msg = str(err.value)
    assert msg.startswith("2 rule(s) cannot be exported as openmpi-tuned")
    assert "bcast layout 1x2 from 4096 B/rank" in msg and "bcast layout 2x2 from 100 B/rank" in msg
    rules = parse_tuned(ompi(entries, allow_substitute=True).text, "t")
    ids = {n: i + 1 for i, n in enumerate(IDS_5_0["bcast"])}
    # SMPI's pipelined bcasts map to Open MPI's with SMPI's 8192-byte segments
    assert rules.lookup("bcast", 2, 10)[1:4] == (ids["binary_tree"], 0, 8192)
    assert rules.lookup("bcast", 4, 10)[1:4] == (ids["pipeline"], 0, 8192)
    assert rules.lookup("bcast", 2, 5000)[1:4] == (0, 0, 0)   # substitute: the fixed decision
    exp = MPICHJsonExporter()
    base = tmp_path / "b.json"
    base.write_text(json.dumps(BASE))
    exp.base_path, exp.allow_substitute = str(base), True
    tree = json.loads(exp.export(table(entries), "5.0.2").text)
    func, params = csel_leaf(tree, "bcast", 4, 10)
    assert func == "MPIR_Bcast_intra_pipelined_tree"
    assert params["k"] == "1" and params["chunk_size"] == "8192"
    # the substitutes: the default tree's own intra branch under their size ranges
    assert tree["collective=bcast"]["comm_type=intra"]["any"]["any"] == \
        BASE["collective=bcast"]["comm_type=intra"]


def test_verify_samples_the_branch_the_ranks_reach():
    from colltune.verify.mpich import sample_sizes
    from colltune.verify.rules import comm_branch
    tree = {"collective=bcast": {"comm_type=intra": {
        "comm_size<=2": {"avg_msg_size<=99": {"algorithm=MPIR_Bcast_intra_binomial": {}},
                         "any": {"algorithm=MPIR_Bcast_intra_smp": {}}},
        "any": {"avg_msg_size<=4999": {"algorithm=MPIR_Bcast_intra_binomial": {}},
                "any": {"algorithm=MPIR_Bcast_intra_tree": {}}}}}}
    assert sample_sizes(comm_branch(tree, "bcast", 2), "bcast", 2) == [1, 99, 100]
    assert sample_sizes(comm_branch(tree, "bcast", 4), "bcast", 4) == [1, 4999, 5000]
    # reductions sample whole ints: the first size above 724 is 728, not 724 (a user
    # review found the range above a threshold never run)
    red = {"collective=allreduce": {"comm_type=intra": {"any": {
        "avg_msg_size<=724": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
        "any": {"algorithm=MPIR_Allreduce_intra_ring": {}}}}}}
    assert sample_sizes(comm_branch(red, "allreduce", 2), "allreduce", 2) == [4, 724, 728]


# ---- --allow-substitute: the library's own selection (review F13) ---------------------
SUB_TABLE = [("bcast", 1, 2, [(0, "binomial_tree", "smpi", {}),
                              (65536, "SMP_binomial", "smpi", {"segsize": 8192})]),
             ("allreduce", 1, 2, [(0, "smp_rsag", "smpi", {}), (4096, "smp_rdb", "smpi", {})])]


def test_substitute_is_the_librarys_own_selection_and_warns_when_it_is_all(tmp_path, capsys):
    """A rule without an equivalent becomes the library's default decision at its
    sizes (coll/tuned's algorithm 0, MPICH's built-in branch), not a fixed algorithm
    at every size; the header names each substituted rule, and a collective with
    every rule substituted is a warning on stderr and a NOTE."""
    exp = ompi(SUB_TABLE, allow_substitute=True)
    rules = parse_tuned(exp.text, "t")
    binomial = IDS_5_0["bcast"].index("binomial") + 1
    # bcast keeps its tuned small sizes; 64 KiB and up (1 MiB included) is the fixed decision
    assert rules.blocks["bcast"] == [(2, [(0, binomial, 0, 0, 0), (65536, 0, 0, 0, 0)])]
    assert rules.lookup("bcast", 2, 1 << 20)[1] == 0
    # allreduce: both rules substituted, merged into one algorithm-0 row
    assert rules.blocks["allreduce"] == [(2, [(0, 0, 0, 0, 0)])]
    for where in ("bcast layout 1x2 from 65536 B/rank: smpi algorithm 'SMP_binomial'",
                  "allreduce layout 1x2 from 0 B/rank: smpi algorithm 'smp_rsag'",
                  "allreduce layout 1x2 from 4096 B/rank: smpi algorithm 'smp_rdb'"):
        assert f"# NOTE {where} -> substituted by openmpi's own selection (coll/tuned's fixed " \
               f"decision, algorithm 0)" in exp.text
    err = capsys.readouterr().err
    assert "colltune: warning: every allreduce rule (2) was substituted: the file leaves " \
           "allreduce to openmpi's own selection" in err
    assert "bcast" not in err                              # bcast kept a tuned rule
    assert "# NOTE every allreduce rule (2) was substituted" in exp.text
    # no rule of the table names the library default: the table-default note is not written
    assert "where the table names the library's default decision" not in exp.text
    # MPICH: a copy of the built-in intra branch under the substituted size ranges
    base = tmp_path / "b.json"
    base.write_text(json.dumps({**BASE, "collective=allreduce": {"comm_type=intra": {
        "any": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}}}}}))
    mexp = MPICHJsonExporter()
    mexp.base_path, mexp.allow_substitute = str(base), True
    text = mexp.export(table(SUB_TABLE), "5.0.2").text
    tree = json.loads(text)
    bcast = tree["collective=bcast"]["comm_type=intra"]["any"]
    assert list(bcast) == ["avg_msg_size<=65535", "any"]
    assert bcast["any"] == BASE["collective=bcast"]["comm_type=intra"]
    assert csel_leaf(tree, "bcast", 2, 1 << 20)[0] == "MPIR_Bcast_intra_binomial"   # BASE's
    allreduce = tree["collective=allreduce"]["comm_type=intra"]["any"]
    assert list(allreduce) == ["avg_msg_size<=4095", "any"] and \
        all(b == {"any": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}}}
            for b in allreduce.values())
    assert "substituted by mpich's own selection (its built-in CSEL branch)" in text
    assert "every allreduce rule (2) was substituted" in capsys.readouterr().err
    # without --allow-substitute: the error says what the option would write
    with pytest.raises(InputError, match=r"3 rule\(s\) cannot be exported[\s\S]*--allow-substitute "
                                         r"would leave it to openmpi's own selection"):
        ompi(SUB_TABLE)


@pytest.mark.skipif(not (have_mpi("openmpi") and have_mpi("mpich")), reason="needs Open MPI and MPICH")
def test_substituted_rules_run_the_librarys_own_selection_on_the_real_libraries(workdir):
    """The exported substitutes are read and honoured (colltune verify, 2 ranks): Open
    MPI runs its fixed decision at the algorithm-0 ranges and the tuned binomial below
    64 KiB; MPICH runs, at the substituted ranges, the leaf its built-in tree names
    there (both checked against the table)."""
    from colltune import mpi
    from pathlib import Path
    t = workdir / "t.json"
    table(SUB_TABLE, "SimGrid").save(str(t))
    out = workdir / "o.rules"
    proc = run_cli("export", "--table", str(t), "--format", "openmpi-tuned", "-o", str(out),
                   "--allow-substitute")
    assert "warning: every allreduce rule (2) was substituted" in proc.stderr
    proc = run_cli("verify", "--rules", str(out), "--library", "openmpi", "--table", str(t),
                   "--reps", "3", check=False, timeout=300)
    assert proc.returncode == 0 and "RESULT: PASS" in proc.stdout, proc.stdout + proc.stderr
    lines = [ln.split() for ln in proc.stdout.splitlines() if re.match(r"\s+(ok|FAIL)", ln)]
    says = {(ln[1], int(ln[2])): (ln[0], ln[6], " ".join(ln[7:])) for ln in lines}
    assert says[("bcast", 1)][:2] == ("ok", "binomial")     # differs from the default: a proof
    for point in (("bcast", 65536), ("allreduce", 4)):
        mark, name, ran = says[point]
        assert mark.startswith("ok") and name == "default" and \
            ran.startswith("ran: the fixed decision:"), proc.stdout
    out = workdir / "m.json"
    run_cli("export", "--table", str(t), "--format", "mpich-json", "-o", str(out),
            "--allow-substitute")
    tree = json.loads(out.read_text())
    builtin = library_json(str(sorted(Path(mpi.find("mpich").prefix, "lib").glob("libmpi.so.*"))[0]))[0]
    for coll, nbytes in (("bcast", 65536), ("bcast", 1 << 20), ("allreduce", 4), ("allreduce", 4096)):
        assert csel_leaf(tree, coll, 2, nbytes)[0] == csel_leaf(builtin, coll, 2, nbytes)[0]
    proc = run_cli("verify", "--rules", str(out), "--library", "mpich", "--table", str(t),
                   "--reps", "3", check=False, timeout=300)
    assert proc.returncode == 0 and "RESULT: PASS" in proc.stdout, proc.stdout + proc.stderr
    assert "MPICH's debug summary says its MPIR selection came from" in proc.stdout
    assert any(re.match(r"\s+ok\*? +bcast +65536 B/rank", ln) for ln in proc.stdout.splitlines())


def test_header_and_stdout_name_the_resolved_target(tmp_path):
    """Without --target the file and `export` name the version the exporter resolved
    to (Open MPI 5.0.11, MPICH 5.0.2), not "latest"; a given --target as given."""
    entries = [("bcast", 1, 2, [(0, "binomial", "openmpi", {})])]
    t = tmp_path / "t.json"
    table(entries).save(str(t))
    out = tmp_path / "r.rules"
    proc = run_cli("export", "--table", str(t), "--format", "openmpi-tuned", "-o", str(out))
    assert "(openmpi-tuned, for openmpi 5.0.11)" in proc.stdout and "latest" not in proc.stdout
    assert "format openmpi-tuned, target 5.0.11\n" in out.read_text()
    assert "latest" not in out.read_text()
    proc = run_cli("export", "--table", str(t), "--format", "openmpi-tuned", "--target", "5.0.6",
                   "-o", str(out))
    assert "for openmpi 5.0.6)" in proc.stdout and "target 5.0.6\n" in out.read_text()
    han = EXPORTERS.get("openmpi-han")().export(table(entries))
    assert han.target == "5.0.11" and "format openmpi-han, target 5.0.11\n" in han.text
    mexp = MPICHJsonExporter()
    base = tmp_path / "b.json"
    base.write_text(json.dumps(BASE))
    mexp.base_path = str(base)
    m = mexp.export(table([("bcast", 1, 2, [(0, "binomial", "mpich", {})])], "MPICH"))
    assert m.target == "5.0.2" and "colltune: colltune" in m.text
    assert "format mpich-json, target 5.0.2" in m.text and "latest" not in m.text
    # colltune's own format is read by the interposer, not a library release: no target
    table([("bcast", 1, 2, [(0, "binomial", "colltune", {})])]).save(str(t))
    proc = run_cli("export", "--table", str(t), "--format", "colltune", "-o", str(out))
    assert "(colltune, for colltune)" in proc.stdout
    assert "format colltune\n" in out.read_text() and "latest" not in out.read_text()


def test_knomial_radix_is_one_variable_for_the_job():
    """coll/tuned passes one MCA variable (coll_tuned_bcast_algorithm_knomial_radix) to
    every knomial bcast, rules file or forced: the export sets it once, leaves it out at
    the default, and refuses a table that asks for two radices."""
    from colltune.providers.openmpi import RADIX_VAR
    radix8 = ompi([("bcast", 1, 4, [(0, "knomial", "openmpi", {"radix": 8}),
                                    (65536, "binomial", "openmpi", {})]),
                   ("bcast", 4, 4, [(0, "knomial", "openmpi", {"radix": 8, "segsize": 8192})])])
    assert radix8.env[RADIX_VAR] == "8"
    rows = parse_tuned(radix8.text, "t").blocks["bcast"][0][1]
    assert rows[0] == (0, 7, 0, 0, 0)                     # knomial, no radix column
    assert RADIX_VAR not in ompi([("bcast", 1, 4, [(0, "knomial", "openmpi", {})])]).env
    assert RADIX_VAR not in ompi([("bcast", 1, 4, [(0, "knomial", "openmpi", {"radix": 4})])]).env
    with pytest.raises(InputError) as exc:
        ompi([("bcast", 1, 4, [(0, "knomial", "openmpi", {"radix": 8})]),
              ("bcast", 4, 4, [(0, "knomial", "openmpi", {})])])
    assert "radix: Open MPI takes one value per job (coll_tuned_bcast_algorithm_knomial_radix), " \
        "the table asks for 2: radix=4 at " in str(exc.value) and "; radix=8 at " in str(exc.value)
