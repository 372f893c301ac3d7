"""Best of both (docs/deploy.md): `tune --provider both` on real SMPI chooses
among deployable arms only; a mixed table (library algorithms, the library's
default decision, colltune's algorithms, all three in one collective) deploys
and verifies on the real Open MPI and MPICH; a deployment whose library part
the library rejects, or whose rules say something else than the table, fails
`verify --deployment`."""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import REPO, have_mpi, run_cli

from colltune.decision import DecisionTable

# On two ranks of this host: bcast's two library algorithms send differently from
# each other and from the default (verify proves them, not ok*).
LIB_ALGS = {"openmpi": ("basic_linear", "binomial"), "mpich": ("scatter_ring_allgather", "binomial")}


def mixed_table(path, lib, default_beside_library=False):
    first, last = LIB_ALGS[lib]
    allreduce = [(0, "recursive_doubling", "colltune"), (4096, "default", lib)]
    if default_beside_library:
        allreduce.append((65536, "ring", lib))
    entries = [("bcast", [(0, first, lib), (1000, "binomial", "colltune"), (100000, last, lib)]),
               ("allreduce", allreduce)]
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "local", "platform": "test", "mpi_library": lib, "mpi_version": "x",
                       "arms": {"provider": "both", "library": lib, "colltune": "colltune",
                                "library_default": "default",
                                "library_algorithms_deployable": True}},
        "entries": [{"collective": c, "nodes": 1, "ppn": 2,
                     "rules": [{"min_size": s, "algorithm": a, "provider": p, "params": {}}
                               for s, a, p in rules]} for c, rules in entries]}).save(str(path))
    return str(path)


def test_tune_both_chooses_the_best_deployable_arm(workdir):
    table = workdir / "t.json"
    out = run_cli("tune", "--provider", "both", "--collectives", "bcast,allreduce", "--layouts", "2x2",
            "--sizes", "8,65536", "--algorithms",
            "binomial_tree,scatter_LR_allgather,lr,rdb,binomial,pipeline,recursive_doubling,ring",
            "--baselines", "ompi,mpich", "--table", str(table), "-q", "--min-reps", "3",
            "--max-reps", "5").stdout
    # never slower than the library default it deploys with, at any measured point
    worst = re.search(r"vs the library default it deploys with \(smpi ompi\): .* worst ([0-9.]+)x", out)
    assert worst and float(worst.group(1)) >= 1.0, out
    t = DecisionTable.load(str(table))
    arms = t.provenance["arms"]
    assert (arms["provider"], arms["library"], arms["library_default"]) == ("both", "smpi", "ompi")
    assert arms["library_algorithms_deployable"] is False and "measured but not chosen" in arms["note"]
    providers = {r.provider for e in t.entries for r in e.rules}
    assert providers == {"smpi", "colltune"}                       # a mixed table
    recs = [json.loads(x) for x in run_cli("results", "export", "--format", "jsonl").stdout.splitlines()]
    assert {r["provider"] for r in recs} == {"smpi", "colltune"}
    smpi_algs = {r["algorithm"] for r in recs if r["provider"] == "smpi"
                 and r["algorithm_kind"] == "algorithm"}
    assert smpi_algs == {"binomial_tree", "scatter_LR_allgather", "lr", "rdb"}  # measured ...
    # colltune's algorithms ran under the selector the deployment runs with
    assert {(r.get("labels") or {}).get("library_default") for r in recs if r["provider"] == "colltune"} \
        == {"--cfg=smpi/coll-selector:ompi"}
    deployable = [r for r in recs if r["status"] == "ok" and (
        r["provider"] == "colltune" or (r["provider"], r["algorithm"]) == ("smpi", "ompi"))]
    for e in t.entries:
        for size in (8, 65536):
            rule = e.rule_for(size)
            assert (rule.provider, rule.algorithm) != ("smpi", "mpich")     # ... never chosen
            assert rule.algorithm not in smpi_algs or rule.provider == "colltune"
            here = [r for r in deployable if r["collective"] == e.collective and r["msg_size"] == size]
            best = min(r["ttc_median_s"] for r in here)
            chosen = [r for r in here if (r["provider"], r["algorithm"]) == (rule.provider, rule.algorithm)]
            assert chosen and chosen[0]["ttc_median_s"] == best, (e.collective, size, rule)
    # an SMPI deployment: no library file, the selector as smpirun arguments
    out = workdir / "dep"
    run_cli("deploy", "--table", str(table), "--library", "smpi", "-o", str(out))
    m = json.loads((out / "deployment.json").read_text())
    assert m["format"] == "colltune.deployment" and m["files"]["library_rules"] is None
    # the selector, after the SMPI settings of the platform tuned on (a job launched by
    # hand simulates the machine the tuner measured)
    from colltune import platforms
    assert m["launch"]["COLLTUNE_SMPIRUN_ARGS"] == " ".join(
        [*platforms.load("small").smpirun_cfg_args(), "--cfg=smpi/coll-selector:ompi"])
    assert (m["launch"]["COLLTUNE_REDUCE_RATE"], m["launch"]["COLLTUNE_COPY_RATE"]) == \
        ("4000000000.0", "8000000000.0")        # the rates colltune's points were charged at
    assert "export COLLTUNE_LDFLAGS=" in (out / "env.sh").read_text()
    proc = run_cli("verify", "--deployment", str(out), check=False)
    assert proc.returncode == 2 and "cannot be verified on a real library" in proc.stderr


def test_tune_both_taskmodel_measures_its_han_choice_against_the_other_arms(workdir):
    """--provider both --strategy taskmodel: the model picks HAN's configuration per point
    (task pipelines, no whole HAN call searched), that configuration is measured there
    beside the other arms, and each rule is the fastest measured arm of its point."""
    table = workdir / "tm.json"
    run_cli("tune", "--provider", "both", "--strategy", "taskmodel", "--collectives", "bcast",
            "--layouts", "2x4", "--sizes", "1024,65536,1048576", "--algorithms", "binomial,pipeline",
            "--table", str(table), "-q", "--min-reps", "3", "--max-reps", "5")
    t = DecisionTable.load(str(table))
    assert t.provenance["taskmodel"]["han_part_of"] == "both"
    assert t.provenance["taskmodel"]["pipelines_measured"] > 0
    recs = [json.loads(x) for x in run_cli("results", "export", "--format", "jsonl").stdout.splitlines()]
    han = {(r["msg_size"], r["algorithm"]) for r in recs if r["provider"] == "colltune"
           and r["algorithm"].startswith("han[")}
    assert {m for m, _ in han} == {1024, 65536, 1048576}      # one model choice per size, measured
    assert len(han) == 3 and all("fs=" in a and "ibalg=" in a for _, a in han)
    ok = [r for r in recs if r["status"] == "ok" and r["scenario"] == "plain" and (
        (r["provider"], r["algorithm"]) == ("smpi", "ompi") or r["provider"] == "colltune")]
    (e,) = t.entries
    for size in (1024, 65536, 1048576):
        here = [r for r in ok if r["msg_size"] == size and
                (not r["algorithm"].startswith("han[") or (size, r["algorithm"]) in han)]
        rule = e.rule_for(size)
        best = min(here, key=lambda r: r["ttc_median_s"])
        assert (rule.provider, rule.algorithm) == (best["provider"], best["algorithm"]), (size, rule)


def deploy(tmp_path, lib, name="dep"):
    table = mixed_table(tmp_path / f"{lib}.json", lib)
    out = tmp_path / name
    run_cli("deploy", "--table", table, "--library", lib, "-o", str(out))
    return out


def verify(out):
    return run_cli("verify", "--deployment", str(out), "--reps", "3", check=False, timeout=300)


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_mixed_table_deploys_and_verifies(tmp_path, lib):
    """allreduce: colltune's recursive doubling, then the library's default
    decision, then the library's ring, in one collective."""
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    table = mixed_table(tmp_path / f"{lib}.json", lib, default_beside_library=True)
    out = tmp_path / "dep"
    run_cli("deploy", "--table", table, "--library", lib, "-o", str(out))
    m = json.loads((out / "deployment.json").read_text())
    assert m["table"]["rules"] == {"colltune": 2, "library": 3, "default": 1}
    env = (out / "env.sh").read_text()
    assert 'export COLLTUNE_RULES="${COLLTUNE_DEPLOYMENT}/colltune.rules"' in env
    assert "COLLTUNE_MPIRUN_ARGS=" in env
    assert m["files"]["library_rules"] in env
    rules = (out / "colltune.rules").read_text()
    assert "bcast nodes=* ppn=* bytes=1000..99999 -> binomial" in rules
    assert "allreduce nodes=* ppn=* bytes=4096..65535 -> library" in rules
    proc = verify(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    points = [ln for ln in proc.stdout.splitlines() if re.match(r"  (ok|FAIL) ", ln)]
    assert len(points) == 10 and all(ln.strip().startswith("ok") for ln in points)
    # the library's part proves its default decision where the table names it:
    # coll/tuned's algorithm 0 ran its fixed decision, MPICH its built-in branch's leaf
    lib_points = [ln for ln in proc.stdout.splitlines() if re.match(r"      (ok|FAIL)", ln)]
    defaults = [ln for ln in lib_points if "allreduce" in ln and "(default)" in ln
                or "file says default " in ln]
    assert defaults and all(ln.strip().startswith("ok ") for ln in defaults), proc.stdout
    if lib == "openmpi":
        assert all("ran: the fixed decision: allreduce_intra_" in ln for ln in defaults)
    else:
        assert all("(same as forced)" in ln for ln in defaults)
    assert any("file says ring" in ln and "ran: ring (same as forced)" in ln for ln in lib_points)
    assert any("table: colltune:binomial" in ln and "ran: binomial" in ln for ln in points)
    assert any("table: colltune:recursive_doubling" in ln and "ran: recursive_doubling" in ln
               for ln in points)
    assert any(f"table: {lib}:default" in ln and "its default decision" in ln for ln in points)
    assert "(1) file accepted: yes" in proc.stdout and "(3) default/deployed time ratio" in proc.stdout
    assert proc.stdout.rstrip().endswith("RESULT: PASS")


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_guarded_deployment_verifies(tmp_path, lib):
    """deploy --guard: every rank gets COLLTUNE_GUARD; verify accepts, at each of
    colltune's points, the rule's algorithm or the library, whichever the guard
    measured faster, and says which (2 ranks on this host: the verdicts are noise,
    that the guard ran and decided is not)."""
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    table = mixed_table(tmp_path / f"{lib}.json", lib)
    out = tmp_path / "dep"
    run_cli("deploy", "--table", table, "--library", lib, "-o", str(out), "--guard", "1")
    assert json.loads((out / "deployment.json").read_text())["guard"] == 1
    env = (out / "env.sh").read_text()
    assert 'export COLLTUNE_GUARD="1"' in env
    assert ("-x COLLTUNE_GUARD=1" if lib == "openmpi" else "-genv COLLTUNE_GUARD 1") in env
    # where nothing was measured, the rules take the minimax arm: the guard checks it
    assert "checks each rule against the library" in (out / "colltune.rules").read_text()
    proc = run_cli("verify", "--deployment", str(out), "--reps", "10", check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = [ln for ln in proc.stdout.splitlines() if re.match(r"  (ok|FAIL) ", ln)
            and "table: colltune:" in ln]
    assert ours and all(ln.strip().startswith("ok") and "(the guard measured" in ln
                        for ln in ours), proc.stdout


def test_deploy_guard_out_of_range_is_an_error(tmp_path):
    table = mixed_table(tmp_path / "t.json", "openmpi")
    proc = run_cli("deploy", "--table", table, "--library", "openmpi", "-o",
                   str(tmp_path / "dep"), "--guard", "100001", check=False)
    assert proc.returncode != 0 and "--guard 100001" in proc.stderr


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed")
def test_library_rejecting_its_part_fails_verify(tmp_path):
    out = deploy(tmp_path, "mpich")
    path = out / "mpich-json.json"
    path.write_text(json.dumps({"_comment": "MPICH 5.0 aborts on this key",
                                **json.loads(path.read_text())}))
    proc = verify(out)
    assert proc.returncode == 1
    assert "the library REJECTED its part: MPICH rejected the file" in proc.stdout
    assert "the deployed run failed" in proc.stdout and "RESULT: FAIL" in proc.stdout


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
def test_dropped_library_part_and_rules_that_say_otherwise_fail_verify(tmp_path):
    out = deploy(tmp_path, "openmpi")
    path = out / "openmpi-tuned.rules"          # first rule not at size 0: Open MPI drops the file
    path.write_text(re.sub(r"\n0 (\d+ 0 0 0)\n", r"\n1 \1\n", path.read_text(), count=1))
    rules = out / "colltune.rules"
    rules.write_text(rules.read_text().replace("bytes=1000..99999 -> binomial",
                                               "bytes=1000..99999 -> pipeline"))
    proc = verify(out)
    assert proc.returncode == 1
    assert "the library REJECTED its part" in proc.stdout and "the file was dropped" in proc.stdout
    assert "the colltune rules file says pipeline, the table binomial" in proc.stdout


def test_default_beside_library_algorithms_in_one_rules_file(tmp_path):
    """The library's part keeps the default decision next to its algorithms: the
    openmpi-tuned file says algorithm 0 there (coll/tuned's fixed decision)."""
    from colltune.deploy import kind_of, library_part
    from colltune.exporters.openmpi_tuned import OpenMPITunedExporter
    t = DecisionTable.load(mixed_table(tmp_path / "t.json", "openmpi", default_beside_library=True))
    assert [kind_of(t, r) for r in t.entries[1].rules] == ["colltune", "default", "library"]
    bcast, allreduce = library_part(t).entries
    assert [(r.min_size, r.algorithm) for r in allreduce.rules] == [(0, "default"), (65536, "ring")]
    text = OpenMPITunedExporter().export(library_part(t), "5.0.11").text
    body = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "rule-file"))]
    assert body[:5] == ["2  # collectives", "2  # allreduce", "1  # communicator sizes",
                        "2 2  # comm size >= 2: tuned on 1x2", "0 0 0 0 0"]     # 0: default
    assert body[5] == "65536 4 0 0 0"                                           # 4: ring
    assert "algorithm 0 where the table names the library's default decision" in text
    ok = DecisionTable.load(mixed_table(tmp_path / "u.json", "openmpi"))
    (bcast,) = library_part(ok).entries                 # allreduce: no library algorithm
    assert [(r.min_size, r.algorithm) for r in bcast.rules] == [(0, "basic_linear"), (100000, "binomial")]


def test_mpich_default_is_the_builtin_branch(tmp_path):
    """mpich-json writes the library's default decision as a copy of MPICH's own
    intra branch of that collective under the rule's message-size range."""
    from colltune.exporters.mpich_json import MPICHJsonExporter
    base = {"collective=allreduce": {"comm_type=intra": {"avg_msg_size<=8": {
        "algorithm=MPIR_Allreduce_intra_recursive_doubling": {}}, "any": {
        "algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}}},
        "comm_type=inter": {"any": {"algorithm=MPIR_Allreduce_inter_reduce_exchange_bcast": {}}}}}
    (tmp_path / "base.json").write_text(json.dumps(base))
    t = DecisionTable.load(mixed_table(tmp_path / "t.json", "mpich", default_beside_library=True))
    exp = MPICHJsonExporter()
    exp.base_path = str(tmp_path / "base.json")
    from colltune.deploy import library_part
    tree = json.loads(exp.export(library_part(t), "5.0.2").text)
    ladder = tree["collective=allreduce"]["comm_type=intra"]["any"]
    assert list(ladder) == ["avg_msg_size<=65535", "any"]
    def strip(node):        # the provenance header goes into the first leaf as "colltune: ..." keys
        return {k: strip(v) for k, v in node.items() if not k.startswith("colltune:")}
    assert strip(ladder["avg_msg_size<=65535"]) == base["collective=allreduce"]["comm_type=intra"]
    assert list(ladder["any"]) == ["algorithm=MPIR_Allreduce_intra_ring"]
    assert tree["collective=allreduce"]["comm_type=inter"] == base["collective=allreduce"]["comm_type=inter"]


def test_verify_deployment_placement_arguments(tmp_path):
    """--hosts needs --backend netns; ranks must spread evenly over the hosts."""
    for args, msg in ((["--hosts", "2"], "--hosts needs --backend netns"),
                      (["--backend", "netns", "--hosts", "2", "--ranks", "3"],
                       "cannot be spread evenly over --hosts 2"),
                      (["--backend", "sim"], "verify --deployment runs the real library")):
        proc = run_cli("verify", "--deployment", str(tmp_path), *args, check=False)
        assert proc.returncode == 2 and msg in proc.stderr, proc.stderr


def _measured_table(path, lib, measured, rules):
    DecisionTable.from_dict({
        "format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
        "size_unit": "bytes-per-rank", "created": "2026-01-01", "colltune_version": "0.1.0",
        "provenance": {"backend": "local", "platform": "test", "mpi_library": lib, "mpi_version": "x",
                       "arms": {"provider": "both", "library": lib, "colltune": "colltune",
                                "library_default": "default", "library_algorithms_deployable": True}},
        "entries": [{"collective": "bcast", "nodes": 1, "ppn": 2, "measured": measured,
                     "rules": rules}]}).save(str(path))
    return str(path)


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_verify_expects_the_safe_rules_deploy_derives_between_measured_sizes(tmp_path, lib):
    """The table says colltune's binomial up to its 32768 B boundary, but binomial beat
    the default by 2x at 1 KiB and lost at 1 MiB: deploy's safe rules (decision.
    robust_rules) send the sizes in between to the library default. verify expects
    what deploy derived there (it failed such a deployment before), and still fails a
    rules file that says otherwise."""
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    measured = [[1024, "colltune", "binomial", 1.0e-6], [1024, lib, "default", 2.0e-6],
                [1048576, "colltune", "binomial", 1.05e-3], [1048576, lib, "default", 1.0e-3]]
    path = _measured_table(tmp_path / "t.json", lib, measured, [
        {"min_size": 0, "algorithm": "binomial", "provider": "colltune", "params": {},
         "measured_sizes": [1024]},
        {"min_size": 32768, "algorithm": "default", "provider": lib, "params": {},
         "measured_sizes": [1048576]}])
    out = tmp_path / "dep"
    run_cli("deploy", "--table", str(path), "--library", lib, "-o", str(out))
    assert "bcast nodes=1 ppn=2 bytes=1025.. -> library" in (out / "colltune.rules").read_text()
    proc = verify(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    safe = [ln for ln in proc.stdout.splitlines() if "32767 B/rank" in ln]
    assert len(safe) == 1 and safe[0].strip().startswith("ok"), proc.stdout
    assert "colltune:binomial -> library (deploy: nothing measured here)" in safe[0]
    assert "ran: library (its default decision)" in safe[0]
    assert any("1 B/rank" in ln and "ran: binomial" in ln for ln in proc.stdout.splitlines())
    # a rules file that runs binomial where deploy derived the library still fails
    rules = out / "colltune.rules"
    rules.write_text(rules.read_text().replace("bytes=1025.. -> library", "bytes=1025.. -> binomial"))
    bad = verify(out)
    assert bad.returncode != 0 and "the colltune rules file says binomial" in bad.stdout, bad.stdout


def test_deploy_refuses_a_misspelt_colltune_algorithm_before_writing(tmp_path):
    """colltune's rules file is built from the table's measured points, so a rule naming
    no algorithm of colltune's catalogue ('hann') is refused up front, with its path in
    the table, and nothing is written."""
    table = json.loads(open(mixed_table(tmp_path / "t.json", "openmpi")).read())
    table["entries"][0]["rules"][1]["algorithm"] = "hann"
    (tmp_path / "bad.json").write_text(json.dumps(table))
    out = tmp_path / "dep"
    proc = run_cli("deploy", "--table", str(tmp_path / "bad.json"), "--library", "smpi", "-o", str(out),
                   check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (f"{tmp_path / 'bad.json'}: entries/0/rules/1: 'hann' is not one of colltune's bcast "
            "algorithms (known: linear, binomial") in proc.stderr
    assert not out.exists()


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
def test_a_library_rule_that_does_not_export_writes_nothing(tmp_path):
    """A rule naming no algorithm of the library failed in the exporter after deploy had
    made the folder (lib/, table.json): the retry with the table mended was then refused
    as 'a folder that is not empty and holds no deployment'. Now nothing is written."""
    good = mixed_table(tmp_path / "t.json", "openmpi")
    table = json.loads(open(good).read())
    assert table["entries"][0]["rules"][0]["provider"] == "openmpi"
    table["entries"][0]["rules"][0]["algorithm"] = "nosuchalg"
    (tmp_path / "bad.json").write_text(json.dumps(table))
    out = tmp_path / "dep"
    proc = run_cli("deploy", "--table", str(tmp_path / "bad.json"), "--library", "openmpi",
                   "-o", str(out), check=False)
    assert proc.returncode == 2 and "openmpi algorithm 'nosuchalg'" in proc.stderr, proc.stderr
    assert not out.exists()
    run_cli("deploy", "--table", good, "--library", "openmpi", "-o", str(out))
    assert (out / "deployment.json").exists()


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_verify_runs_colltunes_rule_inside_a_table_rule(tmp_path, lib):
    """Found by a user review: the table's rule for binomial starts at its boundary
    32768 B, but binomial lost at 1 KiB and won at 1 MiB, so deploy sends only 1 MiB and
    up to it. verify sampled the table's boundaries alone (1, 32767, 32768: all the
    library) and passed without running colltune's algorithm once; it now samples the
    derived rules' ranges too, and 1 MiB runs binomial."""
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    measured = [[1024, "colltune", "binomial", 2.0e-6], [1024, lib, "default", 1.0e-6],
                [1048576, "colltune", "binomial", 0.5e-3], [1048576, lib, "default", 1.0e-3]]
    table = _measured_table(tmp_path / "t.json", lib, measured, [
        {"min_size": 0, "algorithm": "default", "provider": lib, "params": {}, "measured_sizes": [1024]},
        {"min_size": 32768, "algorithm": "binomial", "provider": "colltune", "params": {},
         "measured_sizes": [1048576]}])
    out = tmp_path / "dep"
    run_cli("deploy", "--table", table, "--library", lib, "-o", str(out))
    assert "bcast nodes=1 ppn=2 bytes=1048576.. -> binomial" in (out / "colltune.rules").read_text()
    proc = verify(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any("1048576 B/rank" in ln and "table: colltune:binomial" in ln and "ran: binomial" in ln
               for ln in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_a_moved_deployment_uses_its_own_files(tmp_path, lib):
    """Found by a user review: env.sh and the manifest held absolute paths, so a copied
    deployment ran the original's files and a moved one failed every point. Both now
    use the folder they are in: verify --deployment and env.sh sourced from bash."""
    import shutil
    import subprocess
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    out = deploy(tmp_path, lib)
    moved = tmp_path / "elsewhere" / "dep"
    moved.parent.mkdir()
    shutil.move(str(out), str(moved))
    env = subprocess.run(["bash", "-c", f'. "{moved}/env.sh" && echo "$COLLTUNE_RULES" && '
                          'echo "$COLLTUNE_MPIRUN_ARGS"'], capture_output=True, text=True, check=True)
    rules, launch = env.stdout.splitlines()
    assert rules == f"{moved.resolve()}/colltune.rules"
    assert f"{moved.resolve()}/lib/libcolltune" in launch and str(out) + "/" not in launch
    proc = verify(moved)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # a copy with its rules file removed does not fall back on the original's
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    (copy / "colltune.rules").unlink()
    bad = run_cli("run", "--backend", "local", "--mpi", lib, "--deployment", str(copy), "-n", "2",
                  "--", "src/colltune/apps/collmix.c", "1", check=False)
    assert bad.returncode == 2 and f"{copy.resolve()}/colltune.rules is missing" in bad.stderr, bad.stderr


def test_a_hand_edited_deployment_is_refused_clearly(tmp_path):
    """A manifest without a key it needs, or a table changed after deploying, is
    reported with the file, not a traceback (a user review found both)."""
    if not have_mpi("openmpi"):
        pytest.skip("openmpi not installed")
    out = deploy(tmp_path, "openmpi")
    manifest = json.loads((out / "deployment.json").read_text())
    table = (out / "table.json").read_text()
    (out / "table.json").write_text(table.replace('"binomial"', '"linear"', 1))
    proc = run_cli("verify", "--deployment", str(out), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{out}/table.json: changed since it was deployed" in proc.stderr
    (out / "table.json").write_text(table)
    for key in ("files", "library"):
        broken = {k: v for k, v in manifest.items() if k != key}
        (out / "deployment.json").write_text(json.dumps(broken))
        proc = run_cli("verify", "--deployment", str(out), check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{out}/deployment.json: '{key}' missing" in proc.stderr


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed")
def test_run_refuses_a_deployment_whose_library_file_does_not_parse(tmp_path):
    """A hand-broken CSEL file made MPICH assert in MPI_Init with no file named (a
    user review): `run --deployment` names the file and line and launches nothing."""
    out = deploy(tmp_path, "mpich")
    path = out / "mpich-json.json"
    text = path.read_text()
    cut = text.rindex("}")
    path.write_text(text[:cut] + text[cut + 1:])
    app = tmp_path / "app.c"
    app.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); "
                   "MPI_Finalize(); return 0; }\n")
    proc = run_cli("run", "--backend", "local", "--mpi", "mpich", "--deployment", str(out),
                   "-n", "2", "--", str(app), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}:" in proc.stderr and "not valid JSON" in proc.stderr
    assert "Assertion failed" not in proc.stderr + proc.stdout


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
def test_linking_with_colltune_ldflags_as_a_makefile_does(tmp_path):
    """A user review: $COLLTUNE_LDFLAGS in a Makefile's LDFLAGS comes before the objects,
    and gcc's default --as-needed dropped libcolltune (the program ran without it); and
    the library had no soname, so the program named its absolute path and a moved
    deployment could not be found. Linked that way, the program records
    libcolltune.so and runs the interposer, also from the moved folder."""
    import shutil
    import subprocess
    from colltune import mpi
    impl = mpi.find("openmpi")
    out = deploy(tmp_path, "openmpi")
    app = tmp_path / "app"
    subprocess.run(["bash", "-c", f'. "{out}/env.sh" && {impl.cc} $COLLTUNE_LDFLAGS '
                    f'{REPO}/src/colltune/apps/collmix.c -o {app}'], check=True, env=impl.run_env())
    needed = subprocess.run(["readelf", "-d", str(app)], capture_output=True, text=True).stdout
    assert "Shared library: [libcolltune.so]" in needed, needed
    moved = tmp_path / "moved"
    shutil.move(str(out), str(moved))
    env = {**impl.run_env(), "LD_LIBRARY_PATH": f"{moved}/lib", "COLLTUNE_VERBOSE": "1",
           "COLLTUNE_RULES": f"{moved}/colltune.rules"}
    proc = subprocess.run([impl.launcher, "-n", "1", str(app), "1"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "interposer active" in proc.stderr, proc.stdout + proc.stderr


LMOD_INIT = "/usr/share/lmod/lmod/init/bash"        # Debian's lmod (scripts/setup.sh)


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
@pytest.mark.skipif(not os.path.exists(LMOD_INIT), reason="Lmod not installed (scripts/setup.sh installs it)")
def test_the_modulefile_sets_what_env_sh_sets_and_follows_a_moved_folder(tmp_path):
    """An HPC centre review asked for a module: the deployment writes a Tcl modulefile
    that real Lmod loads. Moved, it sets every variable env.sh (sourced from bash) sets,
    pointing into the new folder; a job launched with it runs the interposer; values with
    Tcl's special characters arrive unchanged; unloading takes everything back."""
    import shutil
    import subprocess
    from colltune import mpi
    from colltune.deploy import write_module
    impl = mpi.find("openmpi")
    out = deploy(tmp_path, "openmpi")
    assert json.loads((out / "deployment.json").read_text())["files"]["module"] == "module/colltune/openmpi"
    moved = tmp_path / "moved"
    shutil.move(str(out), str(moved))
    names = re.findall(r"^export (\w+)=", (moved / "env.sh").read_text(), re.M)
    assert {"COLLTUNE_RULES", "COLLTUNE_MPIRUN_ARGS"} <= set(names)
    names.append("COLLTUNE_DEPLOYMENT")          # exported on a line of its own
    echo = " && ".join(f'printf "%s\\0" "${{{n}-<unset>}}"' for n in names)
    want = subprocess.run(["bash", "-c", f'. "{moved}/env.sh" && {echo}'],
                          capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
    app = tmp_path / "app"
    subprocess.run([impl.cc, f"{REPO}/src/colltune/apps/collmix.c", "-o", str(app)], check=True,
                   env=impl.run_env())
    run = f'{impl.launcher} $COLLTUNE_MPIRUN_ARGS -x COLLTUNE_VERBOSE=1 -n 2 {app} 1'
    proc = subprocess.run(["bash", "-c", f'. {LMOD_INIT} && module use "{moved}/module" && '
                           f'module load colltune/openmpi && {echo} && {run} > {tmp_path}/job.log 2>&1'],
                          capture_output=True, text=True, timeout=300, env=impl.run_env())
    assert proc.returncode == 0 and "Lmod has detected" not in proc.stderr, proc.stderr
    got = proc.stdout.split("\0")[:-1]
    assert dict(zip(names, got)) == dict(zip(names, want))
    assert got[names.index("COLLTUNE_RULES")] == f"{moved.resolve()}/colltune.rules"
    assert "interposer active" in (tmp_path / "job.log").read_text()
    # Tcl's special characters, a space and the folder's path inside a longer value
    odd = {"A": 'x "$HOME" [exit 1] \\n {b} ;', "B": f"-x P={tmp_path}/m/lib/l.so -y"}
    write_module(tmp_path / "m" / "module" / "colltune" / "x", odd, [], "x", "1")
    proc = subprocess.run(["bash", "-c", f'. {LMOD_INIT} && module use "{tmp_path}/m/module" && '
                           'module load colltune/x && printf "%s\\0%s\\0" "$A" "$B" && '
                           'module unload colltune/x && printf "%s\\0" "${A-unset}"'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\0")[:-1] == [odd["A"], odd["B"], "unset"]


def test_report_of_a_both_campaign_leaves_out_what_its_table_cannot_choose(workdir):
    """A user review: the report's "best" of a --provider both campaign on SMPI included
    SMPI's own algorithms, which SMPI cannot run per size (1.305x where the table's
    choices give 1.122x)."""
    run_cli("tune", "--provider", "both", "--collectives", "bcast", "--layouts", "2x2",
            "--sizes", "8,65536", "--algorithms", "binomial_tree,flattree,binomial",
            "--campaign", "cb", "-q", "--min-reps", "3", "--max-reps", "5")
    html = open(run_cli("report", "--campaign", "cb").stdout.strip()).read()
    best = re.findall(r"<tr><td class=\"\">\d+</td><td class=\"\">\d+</td><td class=\"\">\d+</td>"
                      r"<td class=\"l\">([^<]+)</td>", html)
    assert best and not {"binomial_tree", "flattree"} & set(best), best


def test_smpi_deployment_takes_the_tables_own_simulation_settings(tmp_path):
    """A table tuned on a user platform gets its own SMPI settings and charge rates in
    env.sh, from the table's provenance: deploy had reloaded the platform by name, so a
    user file called small.xml got the bundled small's settings and any other name none
    (an HPC centre engineer's review)."""
    table = json.loads(open(mixed_table(tmp_path / "t.json", "openmpi")).read())
    table["provenance"] = {"backend": "sim", "platform": "small", "mpi_library": "SimGrid SMPI",
                           "mpi_version": "3.32", "smpi_config": {"smpi/os": "0:3e-7:0"},
                           "charge_rates": {"COLLTUNE_REDUCE_RATE": "5000000000.0",
                                            "COLLTUNE_COPY_RATE": "1e10"}}
    for e in table["entries"]:
        e["rules"] = [r for r in e["rules"] if r["provider"] == "colltune"]
        e["rules"][0]["min_size"] = 0
    (tmp_path / "mine.json").write_text(json.dumps(table))
    out = tmp_path / "dep"
    run_cli("deploy", "--table", str(tmp_path / "mine.json"), "--library", "smpi", "-o", str(out))
    launch = json.loads((out / "deployment.json").read_text())["launch"]
    assert launch["COLLTUNE_SMPIRUN_ARGS"] == "--cfg=smpi/os:0:3e-7:0"
    assert (launch["COLLTUNE_REDUCE_RATE"], launch["COLLTUNE_COPY_RATE"]) == ("5000000000.0", "1e10")
    env = (out / "env.sh").read_text()
    assert 'export COLLTUNE_REDUCE_RATE="5000000000.0"' in env or \
        "export COLLTUNE_REDUCE_RATE=5000000000.0" in env, env


def test_verify_takes_the_backend_from_the_environment_and_refuses_what_it_cannot_run(tmp_path):
    """verify read --backend / --platform from the command line only, and --rules ignored
    them: COLLTUNE_BACKEND=netns (or a typo, nets) verified on this host and passed (an
    HPC centre engineer's review). The settings' precedence now holds, and what verify
    cannot run is an error."""
    out = deploy(tmp_path, "openmpi")
    proc = run_cli("verify", "--deployment", str(out), env={"COLLTUNE_BACKEND": "nets"}, check=False)
    assert proc.returncode == 2 and "backend 'nets' (environment COLLTUNE_BACKEND)" in proc.stderr, proc.stderr
    proc = run_cli("verify", "--deployment", str(out), check=False,
                   env={"COLLTUNE_BACKEND": "netns", "COLLTUNE_PLATFORM": "zz9"})
    assert proc.returncode != 0 and "zz9" in proc.stderr and "PASS" not in proc.stdout, proc.stdout + proc.stderr
    rules = out / "openmpi-tuned.rules"
    for extra in (["--backend", "netns"], ["--hosts", "2"]):
        proc = run_cli("verify", "--rules", str(rules), "--library", "openmpi", *extra, check=False)
        assert proc.returncode == 2 and "verify --rules runs the library on this host" in proc.stderr


def test_redeploying_replaces_the_earlier_deployment_and_never_a_users_folder(tmp_path):
    """A deployment written over an earlier one had kept the earlier's library rules file
    (an HPC centre engineer's review); a folder holding something else is refused."""
    out = deploy(tmp_path, "openmpi")
    assert (out / "openmpi-tuned.rules").exists()
    table = json.loads(open(mixed_table(tmp_path / "c.json", "openmpi")).read())
    for e in table["entries"]:
        e["rules"] = [r for r in e["rules"] if r["provider"] == "colltune"]
        e["rules"][0]["min_size"] = 0
    (tmp_path / "conly.json").write_text(json.dumps(table))
    run_cli("deploy", "--table", str(tmp_path / "conly.json"), "--library", "openmpi", "-o", str(out))
    m = json.loads((out / "deployment.json").read_text())
    assert m["files"]["library_rules"] is None and not (out / "openmpi-tuned.rules").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    proc = run_cli("deploy", "--table", str(tmp_path / "conly.json"), "--library", "openmpi",
                   "-o", str(mine), check=False)
    assert proc.returncode == 2 and "not empty and holds no deployment" in proc.stderr, proc.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_deploy_refuses_a_target_of_another_release_series(tmp_path):
    """A table without a library part deployed with --target 4.1.5 said 'deployment for
    openmpi 5.0.11' and recorded target 4.1.5 (an HPC centre engineer's review): the
    interposer is built against the installed library, so the target must be its series."""
    proc = run_cli("deploy", "--table", mixed_table(tmp_path / "t.json", "openmpi"), "--library",
                   "openmpi", "--target", "4.1.5", "-o", str(tmp_path / "dep"), check=False)
    assert proc.returncode == 2 and "--target 4.1.5: a deployment runs the installed openmpi 5.0." \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "dep").exists()


def test_run_names_a_rules_file_edited_since_deploying(tmp_path):
    """A rules file edited after deploying ran without a word, and one the library
    rejects aborted the job (an HPC centre engineer's review): the manifest records the
    rules files' sha256, run --deployment names an edited one and points at verify."""
    out = deploy(tmp_path, "openmpi")
    rules = out / "openmpi-tuned.rules"
    rules.write_text(rules.read_text() + "# a site's note\n")
    proc = run_cli("run", "--backend", "local", "--mpi", "openmpi", "--deployment", str(out), "-n", "2",
                   "--", "src/colltune/apps/collmix.c", "1")
    assert f"{rules} was edited since `colltune deploy` wrote it" in proc.stderr, proc.stderr
    assert "colltune.rules was edited" not in proc.stderr
