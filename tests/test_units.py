"""Pure-Python parts: size grammar, settings precedence, decision tables."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from colltune import config
from colltune.decision import DecisionTable, Entry, Rule, boundary, rules_from_points
from colltune.errors import ConfigError, InputError
from colltune.plan import DEFAULT_OP, REDUCTION_OPS
from colltune.sizes import parse_list


def test_size_grammar():
    assert parse_list("8..64") == [8, 16, 32, 64]
    assert parse_list("1K,1000,3-5") == [3, 4, 5, 1000, 1024]
    assert parse_list("8..4M")[-1] == 4 * 1024 * 1024
    assert parse_list("0,1") == [0, 1]
    for bad in ("", "x", "8..4", "5-2", "-1"):
        with pytest.raises(InputError):
            parse_list(bad)
    with pytest.raises(InputError, match="below the minimum 1"):
        parse_list("0,2", "node count", 1)


def test_settings_precedence(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("jobs = 3\ntimeout = 50\nplatform = 'fattree64x12'\n")
    s = config.load({"jobs": 1}, environ={"COLLTUNE_TIMEOUT": "7"}, config_file=str(cfg))
    assert s.jobs == 1 and s.source_of("jobs") == "command line"
    assert s.timeout == 7.0 and s.source_of("timeout") == "environment COLLTUNE_TIMEOUT"
    assert s.platform == "fattree64x12" and s.source_of("platform").startswith("file ")
    assert s.rse == config.DEFAULTS["rse"]
    # paths in a file are the file's, not the working directory's (a site file named
    # by COLLTUNE_CONFIG); a bundled platform's name stays a name
    cfg.write_text("store = 'db/s.sqlite'\noutput_dir = '/abs/out'\nplatform = 'my.xml'\n")
    s = config.load({}, environ={}, config_file=str(cfg))
    assert s.store == str(tmp_path / "db" / "s.sqlite") and s.output_dir == "/abs/out"
    assert s.platform == str(tmp_path / "my.xml")
    with pytest.raises(ConfigError, match=r"min_reps from command line: 10 is above setting "
                                          r"max_reps 5 from environment COLLTUNE_MAX_REPS"):
        config.load({"min_reps": 10}, environ={"COLLTUNE_MAX_REPS": "5"})


def test_settings_errors_name_the_source(tmp_path):
    with pytest.raises(ConfigError, match="COLLTUNE_JOBS"):
        config.load({}, environ={"COLLTUNE_JOBS": "many"})
    with pytest.raises(ConfigError, match="jobs from command line"):
        config.load({"jobs": 0}, environ={})
    with pytest.raises(ConfigError, match="COLLTUNE_TUNE_PRESETS.*yes or no"):
        config.load({}, environ={"COLLTUNE_TUNE_PRESETS": "maybe"})
    assert config.load({}, environ={"COLLTUNE_TUNE_PRESETS": "no"}).tune_presets is False
    assert config.load({}, environ={}).tune_presets is True
    bad = tmp_path / "bad.toml"
    bad.write_text("jbos = 2\n")
    with pytest.raises(ConfigError, match=r"bad.toml: unknown setting\(s\) jbos"):
        config.load({}, environ={}, config_file=str(bad))


def test_rules_merge_and_boundaries():
    pts = [(8, "a", "p", {}, 1.0), (64, "a", "p", {}, 2.0), (512, "b", "p", {}, 3.0),
           (4096, "b", "p", {}, 4.0), (32768, "a", "p", {}, 5.0)]
    rules = rules_from_points(pts)
    assert [r.algorithm for r in rules] == ["a", "b", "a"]
    assert rules[0].min_size == 0
    assert rules[1].min_size == boundary(64, 512) == 182
    assert rules[1].measured_sizes == (512, 4096)
    t = DecisionTable("exhaustive", {"platform": "x"}, (Entry("bcast", 4, 4, rules),))
    assert t.lookup("bcast", 4, 4, 100).algorithm == "a"
    assert t.lookup("bcast", 4, 4, 182).algorithm == "b"
    assert t.lookup("bcast", 4, 4, 10 ** 9).algorithm == "a"
    # nearest layout when the exact one was not tuned
    assert t.lookup("bcast", 5, 4, 300).algorithm == "b"


def test_decision_table_round_trip_and_validation(tmp_path):
    rules = (Rule(0, "binomial_tree", "smpi", {}, 1e-6, (8,)), Rule(100, "flattree", "smpi"))
    t = DecisionTable("exhaustive", {"platform": "small"}, (Entry("bcast", 2, 4, rules),))
    p = t.save(str(tmp_path / "t.json"))
    back = DecisionTable.load(p)
    assert back.to_dict() == t.to_dict()
    data = json.loads(open(p).read())
    data["entries"][0]["rules"][1]["min_size"] = 0
    (tmp_path / "dup.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="dup.json: entries/0/rules: min_size"):
        DecisionTable.load(str(tmp_path / "dup.json"))
    data["version"] = 99
    (tmp_path / "v.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="v.json: not a valid decision table at version"):
        DecisionTable.load(str(tmp_path / "v.json"))
    (tmp_path / "broken.json").write_text('{"format": \n')
    with pytest.raises(InputError, match="broken.json:2"):
        DecisionTable.load(str(tmp_path / "broken.json"))


def test_tune_help_lists_every_registered_strategy():
    """`colltune tune --help` names each tuning strategy, from the tuner registry."""
    from colltune.cli import build_parser
    from colltune.tuners import TUNERS
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = sub.choices["tune"].format_help()
    assert {"exhaustive", "active", "taskmodel"} <= set(TUNERS.names())
    for name, cls in TUNERS.items():
        assert name in text and cls.summary.split()[0] in text


def test_reduction_ops_agree_with_the_schema_and_the_bench():
    """The operator names live in plan.REDUCTION_OPS; the config schema's enum and the
    C bench's operator table (native/bench/reduction.c) must name the same ones."""
    schema = json.loads(resources.files("colltune").joinpath("schemas/config.schema.json").read_text())
    assert tuple(schema["properties"]["reduction_op"]["enum"]) == REDUCTION_OPS
    assert config.DEFAULTS["reduction_op"] == DEFAULT_OP
    text = (Path(__file__).parents[1] / "native/bench/reduction.c").read_text()
    assert all(f'"{op}"' in text for op in REDUCTION_OPS)


def test_decision_table_collectives_agree_with_the_providers():
    """The decision-table schema's collective enum is providers.base.COLLECTIVES: a table
    naming another ('bcst') is refused with the entry's path, not deployed as a collective
    the interposer does not intercept."""
    from colltune.decision import DecisionTable
    from colltune.errors import InputError
    from colltune.providers.base import COLLECTIVES
    schema = json.loads(resources.files("colltune").joinpath("schemas/decision-table.schema.json").read_text())
    entry = schema["properties"]["entries"]["items"]["properties"]["collective"]
    assert tuple(entry["enum"]) == COLLECTIVES
    table = {"format": "colltune.decision-table", "version": 1, "tuner": "exhaustive",
             "size_unit": "bytes-per-rank", "provenance": {},
             "entries": [{"collective": "bcst", "nodes": 1, "ppn": 2,
                          "rules": [{"min_size": 0, "algorithm": "binomial", "provider": "colltune"}]}]}
    with pytest.raises(InputError, match=r"t.json: not a valid decision table at entries/0/collective"):
        DecisionTable.from_dict(table, "t.json")


def test_late_starts_beyond_the_timed_repetitions_are_noted():
    """A real-MPI tune on a busy 2-core host claimed a 9x win at points that had thrown
    away most repetitions for late starts; bench and tune now say so."""
    import pandas as pd
    from colltune.commands import late_note
    from colltune.results import Results
    pts = pd.DataFrame({"status": ["ok", "ok", "ok", "crashed"], "ttc_median_s": [1e-6, 2e-6, 3e-6, None],
                        "reps": [5, 5, 200, None], "late_starts": [0, 481, 12, None],
                        "algorithm": ["a", "b", "c", "d"]})
    note = late_note(Results(pts, pd.DataFrame({"run_id": []})))
    assert note and note.startswith("note: 1 of 3 point(s) discarded more repetitions")
    assert late_note(Results(pts.iloc[[0, 2]], pd.DataFrame({"run_id": []}))) is None


def test_a_declined_forced_algorithm_is_not_timed_as_itself():
    """A forced colltune algorithm that handed the call to the library (the interposer
    reported ran 'library') has the library's time: not a point of that algorithm."""
    import json as _json

    import pandas as pd

    from colltune.results import Results
    lab = lambda **kw: _json.dumps(kw)  # noqa: E731
    pts = pd.DataFrame([
        dict(collective="allgather", nodes=7, ppn=1, msg_size=20000, provider="colltune",
             algorithm="neighbor_exchange", algorithm_kind="algorithm", status="ok",
             ttc_median_s=1.0e-5, scenario="plain",
             labels_json=lab(ran="library", switched_from="neighbor_exchange")),
        dict(collective="allgather", nodes=7, ppn=1, msg_size=20000, provider="colltune",
             algorithm="ring", algorithm_kind="algorithm", status="ok", ttc_median_s=2.0e-5,
             scenario="plain", labels_json=lab(ran="ring")),
        dict(collective="allgather", nodes=7, ppn=1, msg_size=20000, provider="colltune",
             algorithm="rules-abc", algorithm_kind="algorithm", status="ok", ttc_median_s=1.5e-5,
             scenario="plain", labels_json=lab(ran="library"))])     # a deployment's library rule
    res = Results(pts, pd.DataFrame())
    assert list(res.best()["algorithm"]) == ["rules-abc"]
    assert list(res.ok().points["algorithm"]) == ["ring", "rules-abc"]
    empty = Results(pts.iloc[0:0], pd.DataFrame()).ok().points      # a mask, not a column list
    assert list(empty.columns) == list(pts.columns) and empty.empty


def test_report_says_real_timings_are_noise_where_ranks_oversubscribe(monkeypatch):
    import pandas as pd

    from colltune.backends import local
    from colltune.report import _timing_note
    assert "deterministic" in _timing_note(pd.DataFrame({"backend": ["sim"], "nprocs": [32]}))
    monkeypatch.setattr(local, "host_cores", lambda: 2)   # the cores the report counts
    note = _timing_note(pd.DataFrame({"backend": ["local", "local"], "nprocs": [2, 5]}))
    assert "deterministic" not in note and "WARNING: 5 ranks on this 2-core host" in note


def test_a_crash_reason_keeps_simgrids_message_not_its_backtrace():
    """An SMPI algorithm's abort had been stored as backtrace frames only."""
    from colltune.backends.base import LaunchResult
    from colltune.campaign import _failure_text
    tail = "\n".join([
        "[node-1:5:(6) 0.000054] ./src/xbt/exception.cpp:48: [xbt_exception/CRITICAL] Uncaught "
        "exception std::invalid_argument: allreduce rab1 algorithm can't be used with non power "
        "of two number of processes!",
        "[node-1:5:(6) 0.000054] ./src/xbt/exception.cpp:75: [xbt_exception/CRITICAL] Current backtrace:",
        *[f"  ->  {i}# 0x00007F27CB8597F0 in /tmp/colltune-bench_1_0.so" for i in range(12)],
        "Aborted", "Execution failed with code 134."])
    why = _failure_text(LaunchResult(["smpirun"], 134, False, 1.0, None, [], False, tail))
    assert why.startswith("exit code 134 (SIGABRT): Uncaught exception std::invalid_argument: "
                          "allreduce rab1 algorithm can't be used"), why
    assert "->" not in why and "Current backtrace" not in why


def test_the_classic_table_marks_a_declined_point():
    import json as _json

    import pandas as pd

    from colltune.tables import classic
    row = dict(collective="allgather", algorithm="neighbor_exchange", scenario="plain", nodes=7,
               ppn=1, participants=7, msg_size=20000, status="ok", ttc_mean_s=1e-5, ttc_min_s=1e-5,
               ttc_max_s=1e-5, ttc_stddev_s=0.0, ttc_median_s=1e-5, reps=5,
               labels_json=_json.dumps({"ran": "library", "switched_from": "neighbor_exchange"}))
    assert "ok (declined: the library ran it)" in classic(pd.DataFrame([row]))


def test_commands_ask_traits_not_backend_or_simulator_names():
    """A command asks what a backend or library is (Backend.simulated / real_library /
    emulated_hosts, Library.simulated / rank_env / pml_monitoring, the Runner hooks), never
    compares its name: a new backend is a new plugin, no code path to edit. The discovery
    layer (colltune.mpi) is where each library is probed by its name."""
    import re
    import colltune
    from colltune.backends import BACKENDS, trait
    from colltune.mpi.impl import LIBRARIES, simulated
    names = "|".join(sorted(set(BACKENDS.names()) | {n for n, lib in LIBRARIES.items() if lib.simulated}))
    pattern = re.compile(rf'(==|!=)\s*"({names})"|\bin \(\s*"({names})"')
    root = Path(colltune.__file__).parent
    found = [f"{p.relative_to(root)}:{k}: {line.strip()}"
             for p in sorted(root.rglob("*.py")) if p.parent.name != "mpi"
             for k, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line) and "kind ==" not in line]     # kind: a file format sniffed
    assert found == []
    assert trait("sim", "simulated") and not trait("local", "simulated") and not trait("nope", "simulated")
    assert trait("netns", "emulated_hosts") and trait("netns", "real_library")
    assert simulated("smpi") and not simulated("openmpi") and not simulated(None)
