"""`colltune online export` (docs/online.md): a block whose choice is the `library` arm
becomes the library's default-decision rule (provider = the library the state was
learnt on, from the samples' job provenance; the table's `arms` as `--provider both`
writes them), MPICH's own arms `mpich:<name>` become rules of provider `mpich`.
openmpi-tuned writes algorithm 0 there, mpich-json the built-in branch / MPIR_<Coll>_intra_<name>,
the colltune format `library`; MPICH's algorithms in another library's file are an
error naming the block. States are built here in Python; the real Open MPI and MPICH
accept the exported files (`colltune verify --rules ... --table ...`)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import have_mpi, run_cli

from colltune.decision import DecisionTable
from colltune.errors import InputError
from colltune.online import state as ostate
from colltune.online.export import check_format, decision_table, library_of
from colltune.online.state import Arm, Block, State

OMPI = "Open MPI v5.0.11, package: Open MPI, ident: 5.0.11, repo rev: v5.0.11, Nov 2026"
MPICH = "MPICH Version:\t5.0.2"          # the first line (libcolltune keeps no more)
SMPI = "SMPI Version 3.32. Copyright The SimGrid Team 2007-2022"


def _block(coll, cls, arms, nodes=1, ppn=2):
    """arms: {arm id: mean cost or None (never timed)}; every timed arm timed 5 times."""
    return Block(coll, nodes, ppn, cls, calls=50, runs=2,
                 arms=[Arm(a, 1 / len(arms), 5 if m else 0, m or 0.0, 0.0) for a, m in arms.items()])


def _state(blocks, fp="fp1") -> State:
    st = State(fp, run_count=2)
    for b in blocks:
        st.add(b)
    return st


def ompi_state():
    return _state([
        _block("allreduce", 0, {"library": 5e-6, "recursive_doubling": 7e-6, "ring": 9e-6}),
        _block("allreduce", 3, {"library": 40e-6, "recursive_doubling": 60e-6, "ring": 30e-6}),
        _block("bcast", 0, {"library": None, "binomial": 3e-6}),            # never timed: library
        _block("bcast", 4, {"library": 90e-6, "binomial": 80e-6, "pipeline:segsize=16384": 70e-6}),
        Block("reduce", 1, 2, 0, source="prior", arms=[Arm("library", 0.5), Arm("binomial", 0.5)]),
    ])


def mpich_state():
    return _state([
        _block("allreduce", 0, {"library": 9e-6, "mpich:ring": 6e-6, "ring": 9e-6}),
        _block("allreduce", 4, {"library": 300e-6, "mpich:ring": 400e-6, "ring": 350e-6}),
        _block("bcast", 0, {"library": 3e-6, "mpich:binomial": 4e-6, "binomial": 5e-6}),
        _block("bcast", 3, {"library": 90e-6, "mpich:scatter_ring_allgather": 50e-6}),
    ])


def state_dir(tmp_path, st: State, library: str, platform: str = "", name="online"):
    d = tmp_path / name
    (d / "samples").mkdir(parents=True)
    ostate.save(st, str(d / "state.txt"))
    doc = {"schema": "colltune-online-samples/1", "fingerprint": st.fingerprint, "run_id": "r001",
           "job": {"size": 2, "library": library, "platform": platform,
                   "started": "2026-01-01T00:00:01", "argv0": "app", "budget": 200,
                   "max_samplers": 2, "seed": 0}, "blocks": [], "records": []}
    (d / "samples" / "r001.json").write_text(json.dumps(doc))
    return d


def _rules(t: DecisionTable):
    return {(e.collective, r.min_size): (r.provider, r.algorithm, r.params) for e in t.entries
            for r in e.rules}


# ---- the table ------------------------------------------------------------------
def test_library_of_the_job_provenance():
    assert library_of({"mpi_library": OMPI}) == "openmpi"
    assert library_of({"mpi_library": MPICH}) == "mpich"
    assert library_of({"mpi_library": SMPI}) == "smpi"
    assert library_of({"mpi_library": "x", "backend": "sim"}) == "smpi"
    assert library_of({"mpi_library": None, "backend": None}) is None
    assert library_of({}, mpich_state()) == "mpich"          # MPICH's arms: an MPICH build


def test_library_choice_is_the_library_default_decision():
    t = decision_table(ompi_state(), {"mpi_library": OMPI, "backend": "local"})
    arms = t.provenance["arms"]
    assert arms == {**arms, "provider": "both", "library": "openmpi", "colltune": "colltune",
                    "library_default": "default", "library_default_known": True}
    assert _rules(t) == {("allreduce", 0): ("openmpi", "default", {}),
                         ("allreduce", 4097): ("colltune", "ring", {}),
                         ("bcast", 0): ("openmpi", "default", {}),
                         ("bcast", 65537): ("colltune", "pipeline", {"segsize": 16384})}
    assert {e.collective for e in t.entries} == {"allreduce", "bcast"}     # the prior: left out
    from colltune.deploy import counts
    assert counts(t) == {"colltune": 2, "default": 2, "library": 0}
    # MPICH: its own arms are MPICH's algorithms
    t = decision_table(mpich_state(), {"mpi_library": MPICH})
    assert t.provenance["arms"]["library"] == "mpich"
    assert _rules(t) == {("allreduce", 0): ("mpich", "ring", {}),
                         ("allreduce", 65537): ("mpich", "default", {}),
                         ("bcast", 0): ("mpich", "default", {}),
                         ("bcast", 4097): ("mpich", "scatter_ring_allgather", {})}
    assert counts(t) == {"colltune": 0, "default": 2, "library": 2}


def test_smpi_selector_unknown_unless_named():
    prov = {"mpi_library": SMPI, "backend": "sim", "platform": "small"}
    t = decision_table(ompi_state(), prov)
    arms = t.provenance["arms"]
    assert (arms["library"], arms["library_default"], arms["library_default_known"]) == \
        ("smpi", "unknown", False)
    assert "not recorded" in arms["note"] and arms["library_algorithms_deployable"] is False
    assert _rules(t)[("allreduce", 0)] == ("smpi", "unknown", {})
    t = decision_table(ompi_state(), prov, library_default="ompi")
    assert t.provenance["arms"]["library_default_known"] is True
    assert _rules(t)[("allreduce", 0)] == ("smpi", "ompi", {})
    # a library that the samples do not name: an error only where the library was chosen
    with pytest.raises(InputError, match="chose the library.*--library"):
        decision_table(ompi_state(), {"mpi_library": "synthetic"})
    only_colltune = _state([_block("allreduce", 0, {"library": 9e-6, "ring": 3e-6})])
    t = decision_table(only_colltune, {"mpi_library": "synthetic"})
    assert "arms" not in t.provenance and _rules(t) == {("allreduce", 0): ("colltune", "ring", {})}


# ---- the three formats (Python API) --------------------------------------------------
def test_exporters_write_what_was_measured():
    from colltune.exporters.colltune_rules import ColltuneRulesExporter, match, parse_rules
    from colltune.exporters.openmpi_tuned import OpenMPITunedExporter
    t = decision_table(ompi_state(), {"mpi_library": OMPI})
    # colltune format: the default decision is `library`, no --allow-substitute needed
    rules = parse_rules(ColltuneRulesExporter().export(t).text)
    assert match(rules, "allreduce", 2, 1, 2, 8).algorithm == "library"
    assert match(rules, "allreduce", 2, 1, 2, 8192).algorithm == "ring"
    assert match(rules, "bcast", 2, 1, 2, 8).algorithm == "library"
    # openmpi-tuned: algorithm 0 where the library's default decision won
    lib_only = decision_table(_state([_block("allreduce", 0, {"library": 5e-6, "ring": 9e-6})]),
                              {"mpi_library": OMPI})
    text = OpenMPITunedExporter().export(lib_only, "5.0.11").text
    body = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "rule-file"))]
    assert body[-1] == "0 0 0 0 0" and "algorithm 0 where the table names" in text
    exp = OpenMPITunedExporter()
    with pytest.raises(InputError, match="colltune algorithm 'ring'"):
        exp.export(t, "5.0.11")                      # colltune's algorithms: the interposer's
    exp.allow_substitute = True
    text = exp.export(t, "5.0.11").text
    assert "substituted" in text and "\n0 0 0 0 0\n" in text


def test_mpich_arms_only_in_mpichs_file():
    st = mpich_state()
    assert check_format(st, "mpich-json", "mpich", False, "mpich") == []
    for fmt, lib in (("openmpi-tuned", "openmpi"), ("colltune", "colltune")):
        with pytest.raises(InputError) as exc:
            check_format(st, fmt, lib, False, "mpich")
        msg = str(exc.value)
        assert "learnt on mpich" in msg
        assert "allreduce nodes=1 ppn=2 bytes=0..16 chose mpich:ring" in msg
        assert "bcast nodes=1 ppn=2 bytes=4097..65536 chose mpich:scatter_ring_allgather" in msg
        assert "--allow-substitute" in msg and "--format mpich-json" in msg
        assert "substituted" in check_format(st, fmt, lib, True, "mpich")[0]
    assert check_format(ompi_state(), "openmpi-tuned", "openmpi", False, "openmpi") == []


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed")
def test_mpich_json_names_mpichs_algorithms_and_builtin_branch():
    from colltune.exporters.mpich_json import MPICHJsonExporter
    t = decision_table(mpich_state(), {"mpi_library": MPICH})
    tree = json.loads(MPICHJsonExporter().export(t, "5.0.2").text)
    ladder = tree["collective=allreduce"]["comm_type=intra"]
    text = json.dumps(ladder)
    assert "MPIR_Allreduce_intra_ring" in text
    bcast = json.dumps(tree["collective=bcast"]["comm_type=intra"])
    assert "MPIR_Bcast_intra_scatter_ring_allgather" in bcast
    # the default decision: a copy of the built-in intra branch (its own operators inside)
    assert any(k.startswith(("comm_size", "comm_hierarchy", "avg_msg_size", "total_msg_size"))
               for node in _values(ladder) for k in node), text[:500]


def _values(node):
    for v in node.values():
        if isinstance(v, dict):
            yield v
            yield from _values(v)


# ---- the command -------------------------------------------------------------------
def test_cli_formats_and_errors(tmp_path, workdir):
    d = state_dir(tmp_path, mpich_state(), MPICH)
    out, table = tmp_path / "m.rules", tmp_path / "m.json"
    proc = run_cli("online", "export", str(d), "--format", "openmpi-tuned", "-o", str(out),
                   check=False)
    assert proc.returncode != 0 and "learnt on mpich" in proc.stderr, proc.stderr
    assert "allreduce nodes=1 ppn=2 bytes=0..16 chose mpich:ring" in proc.stderr
    proc = run_cli("online", "export", str(d), "--format", "colltune", "-o", str(out),
                   "--table", str(table), "--allow-substitute")
    assert "2 rule(s) the library's default decision" in proc.stdout and "substituted" in proc.stdout
    text = out.read_text()
    assert "allreduce nodes=* ppn=* bytes=65537.. -> library" in text, text
    assert "bcast nodes=* ppn=* bytes=4097.. -> library" in text, text
    t = DecisionTable.load(str(table))
    assert t.tuner == "online" and t.provenance["arms"]["library"] == "mpich"
    # SMPI: the selector named on the command line
    d = state_dir(tmp_path, ompi_state(), SMPI, "small", name="sim")
    run_cli("online", "export", str(d), "--format", "colltune", "-o", str(out),
            "--table", str(table), "--library-default", "ompi")
    assert DecisionTable.load(str(table)).provenance["arms"]["library_default"] == "ompi"
    proc = run_cli("online", "export", str(d), "--format", "colltune", "-o", str(out),
                   "--library", "openmpi", "--library-default", "ompi", check=False)
    assert proc.returncode != 0 and "'default'" in proc.stderr


# ---- the real libraries accept the files ----------------------------------------------------
def _verify(path, table, lib):
    proc = run_cli("verify", "--rules", str(path), "--table", str(table), "--library", lib,
                   "--reps", "3", check=False, timeout=300)
    assert proc.returncode == 0 and "RESULT: PASS" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.skipif(not (have_mpi("openmpi") and have_mpi("mpich")), reason="needs Open MPI and MPICH")
def test_real_libraries_accept_the_exported_files(tmp_path, workdir):
    # Open MPI: the library's default decision as algorithm 0 (colltune's arms substituted)
    d = state_dir(tmp_path, ompi_state(), OMPI, name="ompi")
    out, table = tmp_path / "o.rules", tmp_path / "o.json"
    run_cli("online", "export", str(d), "--format", "openmpi-tuned", "-o", str(out),
            "--table", str(table), "--allow-substitute")
    assert re.search(r"^0 0 0 0 0$", out.read_text(), re.M)
    stdout = _verify(out, table, "openmpi")
    assert "the fixed decision" in stdout, stdout
    # MPICH: its algorithms and its built-in branch, no substitute
    d = state_dir(tmp_path, mpich_state(), MPICH, name="mpich")
    out, table = tmp_path / "m.json", tmp_path / "m.table.json"
    run_cli("online", "export", str(d), "--format", "mpich-json", "-o", str(out), "--table",
            str(table))
    stdout = _verify(out, table, "mpich")
    points = [ln for ln in stdout.splitlines() if re.match(r"  (ok|FAIL)", ln)]
    assert any("allreduce" in ln and "file says ring " in ln and "ran: ring" in ln for ln in points)
    assert any("file says scatter_ring_allgather" in ln and ln.startswith("  ok ") for ln in points)
    assert any("bcast" in ln and "(default)" in ln for ln in points), stdout
