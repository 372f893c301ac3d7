"""Online tuning, the Python half (docs/online.md): state file, update rule, priors from
the active learner's forest, samples -> store records, export through the exporters,
`colltune online show|update|export`, and end to end on SMPI with libcolltune's online
mode (C state == Python's re-derived state)."""
from __future__ import annotations

import json
import re
import math
import os
import random
import shlex
import subprocess

import pytest

from colltune.errors import InputError
from colltune.online import prior, state, update
from colltune.online.state import Arm, Block, State, StateError

from conftest import have_mpi, run_cli

GOOD = """colltune-online-state 1
fingerprint 3f2a9c0d1e5b7788          # hash
run-count 7
block allreduce nodes=16 ppn=4 bytes=0..16 calls=1234 source=measured
arm library p=0.050 n=40 mean=1.25e-05 m2=3.1e-12
arm recursive_doubling p=0.850 n=120 mean=8.1e-06 m2=1.0e-12
arm han:imod=2 p=0.100 n=40 mean=2.0e-05 m2=4.0e-12
block bcast nodes=24 ppn=12 bytes=1048577.. calls=0 source=prior
arm library p=0.3 n=0
arm binomial p=0.7 n=0
"""


# ---- state file -----------------------------------------------------------------
def test_state_round_trip():
    st = state.parse(GOOD, "s.txt")
    assert st.fingerprint == "3f2a9c0d1e5b7788" and st.run_count == 7
    b = st.blocks[("allreduce", 16, 4, 0)]
    assert [a.arm for a in b.arms] == ["library", "recursive_doubling", "han:imod=2"]
    assert b.arm("recursive_doubling").n == 120 and b.best().arm == "recursive_doubling"
    assert st.blocks[("bcast", 24, 12, 5)].source == "prior"
    again = state.parse(state.format_state(st), "t.txt")
    assert again == st
    assert state.format_state(again) == state.format_state(st)
    # a block's setup statistics (written only when it had setup calls) round-trip too
    with_setups = state.parse(GOOD.replace("calls=1234", "calls=1234 setups=2 setup_s=0.000181"), "u.txt")
    b = with_setups.blocks[("allreduce", 16, 4, 0)]
    assert (b.setups, b.setup_s) == (2, 0.000181)
    assert "setups=2 setup_s=0.000181" in state.format_state(with_setups)
    assert state.parse(state.format_state(with_setups), "v.txt") == with_setups


def test_size_classes():
    assert [state.class_of(b) for b in (0, 16, 17, 256, 257, 4096, 65536, 1048576, 1048577)] == \
        [0, 0, 1, 1, 2, 2, 3, 4, 5]
    assert [state.class_text(c) for c in (0, 1, 5)] == ["0..16", "17..256", "1048577.."]


@pytest.mark.parametrize("text,where,what", [
    ("", "s.txt:1", "empty state file"),
    ("colltune-online-state 2\n", "s.txt:1", "expected 'colltune-online-state 1'"),
    (GOOD.replace("run-count 7", "run-count seven"), "s.txt:3", "run-count: bad value 'seven'"),
    (GOOD.replace("bytes=0..16", "bytes=0..17"), "s.txt:4", "bytes: bad value '0..17'"),
    (GOOD.replace("source=prior", "source=guess"), "s.txt:8", "source: bad value 'guess'"),
    (GOOD.replace("p=0.850", "p=-0.85"), "s.txt:6", "p: bad value '-0.85'"),
    (GOOD.replace("p=0.3 n=0", "p=0 n=0").replace("p=0.7", "p=0"), "s.txt:10", "no arm with p > 0"),
    (GOOD.replace("n=120", "n=1.5"), "s.txt:6", "n: bad value '1.5'"),
    (GOOD.replace("m2=1.0e-12", "m2=nan"), "s.txt:6", "m2: bad value 'nan'"),
    (GOOD.replace(" calls=1234", ""), "s.txt:4", "missing calls"),
    (GOOD.replace("n=120", "n=120 colour=red"), "s.txt:6", "unknown field 'colour=red'"),
    (GOOD.replace("run-count 7", "runs 7"), "s.txt:3", "unknown line 'runs 7'"),
    (GOOD.replace("calls=1234", "calls=1234 setups=2 setup_s=-1e-05"), "s.txt:4",
     "setup_s: bad value '-1e-05'"),
    (GOOD.replace("calls=1234", "calls=1234 setups=two setup_s=1e-05"), "s.txt:4",
     "setups: bad value 'two'"),
    ("colltune-online-state 1\narm library p=1 n=0\n", "s.txt:2", "before any block"),
    (GOOD + "arm library p=0.1 n=0\n", "s.txt:11", "arm 'library' given twice"),
    (GOOD + GOOD.splitlines()[3] + "\n", "s.txt:11", "given twice"),
])
def test_state_errors_name_file_and_line(text, where, what):
    with pytest.raises(StateError) as err:
        state.parse(text, "s.txt")
    assert str(err.value).startswith(where + ":") and what in str(err.value), str(err.value)


def test_state_file_truncated_or_binary(tmp_path):
    path = tmp_path / "state.txt"
    path.write_bytes(GOOD.encode()[:GOOD.index("arm han") + 12])     # cut in the middle of a line
    with pytest.raises(StateError, match=r"state.txt:7: missing"):
        state.load(str(path))
    path.write_bytes(GOOD.encode().replace(b"run-count", b"run\0count"))
    with pytest.raises(StateError, match=r"state.txt:3: not a text line"):
        state.load(str(path))
    with pytest.raises(StateError, match=r"nope.txt:0: cannot read"):
        state.load(str(tmp_path / "nope.txt"))


# ---- update rule ----------------------------------------------------------------
def test_choice_needs_the_library_measured():
    # the block leaves the library only on a measured comparison with it (C: ct_online_choice)
    b = Block("allreduce", 2, 2, 0, arms=[Arm("library", 0.5, 0), Arm("ring", 0.5, 3, 0.5)])
    assert b.best().arm == "library"          # never timed: the library stays
    b.arms[0].n, b.arms[0].mean = 1, 1.0      # timed once, slower: a slow library fades
    assert b.best().arm == "ring"             # under the rule before its 3rd sample
    b.arms[0].mean = 0.4
    assert b.best().arm == "library"
    b.arms[1].n = 2                           # nothing else timed 3 times: the library
    assert b.best().arm == "library"
    # a user review: only the other arm timed, once, and the most probable; C runs the
    # library there once the budget is spent, and show/export said the other arm
    b = Block("reduce", 2, 2, 0, arms=[Arm("library", 0.2, 0), Arm("binary_pipelined", 0.8, 1, 1.0)])
    assert b.best().arm == "library"
    # a state that lists no library arm: the lowest measured mean
    assert Block("bcast", 2, 2, 0, arms=[Arm("han", 0.5, 3, 2.0), Arm("binomial", 0.5, 4, 1.0)]).best().arm \
        == "binomial"


def test_rule_hand_checked():
    # t = 1 (first run timing the block): means 1, 1.1, 2: r = 1, 1.1, 2; w = 1, e^-1, e^-10
    # -> p = .7310, .2689, 3.3e-5; floor .02/(3 r) = .00333 for the last lifts it; / 1.0033
    arms = [Arm("a", 0.3, 10, 1.0), Arm("b", 0.3, 10, 1.1), Arm("c", 0.4, 10, 2.0)]
    assert update.probabilities(arms) == pytest.approx([0.728630, 0.268048, 0.003322], abs=1e-6)
    # t = 2: exploration shrinks: w = 1, e^-2, e^-20; floors .02/(3 r 2): c gets .001667
    w = [1.0, math.exp(-2.0)]
    p = [w[0] / sum(w), w[1] / sum(w), 0.02 / 12]
    assert update.probabilities(arms, runs=2) == pytest.approx([x / sum(p) for x in p], abs=1e-9)
    # an arm 20x slower than the best: floor .02/(2 x 20) = .0005, expected excess .0005 x 19
    # = 0.95 % of the best's mean (with the flat floor .01: 19 %); at t = 5 a fifth of it
    p = update.probabilities([Arm("a", 0.5, 10, 1.0), Arm("z", 0.5, 10, 20.0)])
    assert p[1] == pytest.approx(0.0005 / 1.0005) and p[1] * 19 < 0.02
    p = update.probabilities([Arm("a", 0.5, 10, 1.0), Arm("z", 0.5, 10, 20.0)], runs=5)
    assert p[1] == pytest.approx(0.0001 / 1.0001)
    # one timed call is evidence: b (n=2) is the best, a twice as slow weighs e^-10 -> its floor
    arms = [Arm("a", 0.9, 10, 1.0), Arm("b", 0.1, 2, 0.5)]
    p = [0.005, 1 / (1 + math.exp(-10.0))]
    assert update.probabilities(arms) == pytest.approx([x / sum(p) for x in p])
    # an arm never timed is presumed as good as the best: max(K p, 1), a prior's favourite
    # more: w = 1 (a), max(3 x .6, 1) = 1.8 (b), e^-2 (c, 20 % slower)
    arms = [Arm("a", 0.2, 5, 1.0), Arm("b", 0.6, 0), Arm("c", 0.2, 5, 1.2)]
    w = [1.0, 1.8, math.exp(-2.0)]
    assert update.probabilities(arms) == pytest.approx([x / sum(w) for x in w])
    # ... whatever t, until timed once (a weight decaying as 1/t had left a block called a
    # few times per run on its first draws, never meeting its other arms or the library)
    arms = [Arm("a", 1 / 3, 5, 1.0), Arm("b", 1 / 3, 0), Arm("c", 1 / 3, 0)]
    assert update.probabilities(arms, runs=4) == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert update.probabilities(arms, runs=40) == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    # after the first run p is the rule's own: max(K p, 1) would inflate an untimed arm
    # run after run (one left among six took 5/6 of the draws); it weighs 1
    arms = [Arm("a", 1 / 6, 5, 1.0), Arm("b", 5 / 6, 0)]
    assert update.probabilities(arms, runs=3) == pytest.approx([0.5, 0.5])
    # nothing timed: the probabilities stay (a prior's, or uniform)
    assert update.probabilities([Arm("a", 0.9), Arm("b", 0.1), Arm("c", 0.0)]) == [0.9, 0.1, 0.0]


def test_welford_merge_equals_one_pass():
    xs = [1.0, 2.0, 4.0, 8.0, 3.0]
    a = Arm("x", 0.5)
    for chunk in (xs[:2], xs[2:3], xs[3:]):
        m = sum(chunk) / len(chunk)
        update.merge(a, len(chunk), m, sum((x - m) ** 2 for x in chunk))
    mean = sum(xs) / len(xs)
    assert (a.n, a.mean, a.m2) == (5, pytest.approx(mean), pytest.approx(sum((x - mean) ** 2 for x in xs)))


def _samples(run: int, blocks: list[dict], fingerprint: str = "fp1", records=()) -> dict:
    return {"schema": update.SAMPLES_SCHEMA, "fingerprint": fingerprint, "run_id": f"r{run:03d}",
            "job": {"size": 16, "library": "SMPI test", "platform": "small",
                    "started": f"2026-01-01T00:00:{run:02d}", "argv0": "app", "budget": 200,
                    "max_samplers": 16, "seed": 0},
            "blocks": blocks, "records": list(records)}


def _draw_run(st: State, costs: dict, calls: int, rng: random.Random) -> list[dict]:
    """One simulated run: per block `calls` calls drawn from the state's probabilities
    (uniform for a new block), cost fixed per arm with 1 % noise."""
    blocks = []
    for key, arm_costs in costs.items():
        b = st.blocks.get(key)
        names = list(arm_costs)
        p = [b.arm(a).p for a in names] if b else [1 / len(names)] * len(names)
        stats = {a: [] for a in names}
        for _ in range(calls):
            a = rng.choices(names, p)[0]
            stats[a].append(arm_costs[a] * (1 + 0.01 * rng.random()))
        arms = []
        for a, pa in zip(names, p):
            xs = stats[a]
            m = sum(xs) / len(xs) if xs else 0.0
            arms.append({"arm": a, "p": pa, "n": len(xs), "mean": m,
                         "m2": sum((x - m) ** 2 for x in xs), "min": min(xs, default=0.0)})
        lo, hi = state.class_range(key[3])
        blocks.append({"collective": key[0], "nodes": key[1], "ppn": key[2], "bytes_lo": lo,
                       "bytes_hi": hi, "calls": calls, "sampled": calls, "arms": arms})
    return blocks


def test_rule_slow_arms_fade_floor_kept_converges():
    costs = {("allreduce", 4, 4, 1): {"library": 12e-6, "ring": 30e-6, "recursive_doubling": 8e-6,
                                      "han:imod=2": 9e-6}}
    st, rng, best_p = State("fp1"), random.Random(1), []
    for run in range(8):
        update.merge_run(st, _samples(run, _draw_run(st, costs, 40, rng)))
        best_p.append(st.blocks[("allreduce", 4, 4, 1)].arm("recursive_doubling").p)
    b = st.blocks[("allreduce", 4, 4, 1)]
    assert st.run_count == 8 and b.calls == 320
    assert b.best().arm == "recursive_doubling" and b.runs == 8
    assert best_p[-1] > 0.7 and best_p[-1] >= best_p[0]
    # faded to the floor FLOOR / (K r t), r = ring's mean / the best's (about 30 / 8), t = 8
    r = b.arm("ring").mean / b.arm("recursive_doubling").mean
    assert b.arm("ring").p == pytest.approx(update.FLOOR / (4 * r * 8), rel=0.05)
    assert all(a.p >= update.FLOOR / (4 * a.mean / b.arm("recursive_doubling").mean * 8) * 0.9
               for a in b.arms)
    assert sum(a.p for a in b.arms) == pytest.approx(1)


# ---- priors -----------------------------------------------------------------------
def _true_cost(arm: str, nodes: int, ppn: int, cls: int) -> float:
    size = prior.class_size(cls)
    ranks = nodes * ppn
    if arm == "binomial":                   # latency-bound: wins small messages
        return math.log2(ranks) * (5e-6 + size / 1e9)
    if arm == "scatter_allgather":          # bandwidth-bound: wins large ones
        return 2 * math.log2(ranks) * 5e-6 + 2 * size / 1e9
    return 1.5 * math.log2(ranks) * (5e-6 + size / 1e9)      # "library": never best


BCAST_ARMS = ["library", "binomial", "scatter_allgather"]


def _measured_bcast(runs: int = 0) -> State:
    """bcast at 2, 4, 8, 16 nodes x 12, every size class, every arm timed 30 times."""
    st = State("fp1")
    for nodes in (2, 4, 8, 16):
        for cls in range(6):
            st.add(Block("bcast", nodes, 12, cls, 100, "measured",
                         [Arm(a, 1 / 3, 30, _true_cost(a, nodes, 12, cls)) for a in BCAST_ARMS],
                         runs=runs))
    return st


def test_prior_gives_unseen_layout_a_better_than_uniform_arm():
    arms = BCAST_ARMS
    st = _measured_bcast()
    written = prior.add_priors(st, [(12, 12)], {"bcast": arms})
    assert len(written) == 6 and all(b.source == "prior" for b in written)
    gain = []
    for b in written:
        truth = {a: _true_cost(a, 12, 12, b.cls) for a in arms}
        best = min(truth, key=truth.get)
        expected_prior = sum(a.p * truth[a.arm] for a in b.arms)
        expected_uniform = sum(truth.values()) / 3
        assert b.arm(best).p > 1 / 3, (b.label(), b.arms)
        assert sum(a.p for a in b.arms) == pytest.approx(1)
        gain.append(expected_uniform / expected_prior)
    assert min(gain) > 1.0
    # measured blocks are never replaced by priors; a layout without a model stays uniform
    assert prior.add_priors(st, [(4, 12)], {"bcast": arms}) == []
    lone = prior.add_priors(st, [(3, 3)], {"reduce": ["library", "binomial"]})
    assert all(a.p == 0.5 for b in lone for a in b.arms)


def test_untimed_arm_predicted_fast_gets_draws_predicted_slow_does_not():
    st = _measured_bcast(runs=3)
    # a block called twice a run: only the library timed; binomial (the neighbours' winner
    # at small sizes) and scatter_allgather never, both at the rule's small untimed share
    small = st.add(Block("bcast", 12, 12, 0, 2, "measured",
                         [Arm("library", 0.9, 2, _true_cost("library", 12, 12, 0)),
                          Arm("binomial", 0.05), Arm("scatter_allgather", 0.05)], runs=1))
    assert prior.inform_untimed(st) == [small]
    assert small.arm("binomial").p > 0.3 > small.arm("scatter_allgather").p
    assert small.arm("scatter_allgather").p < 0.05 and small.arm("library").p > 0.45
    assert sum(a.p for a in small.arms) == pytest.approx(1)
    # timed arms and measured blocks without untimed arms are left alone
    assert prior.inform_untimed(st) == []
    # one Models instance serves add_priors and inform_untimed (statedir.update_dir)
    models = prior.Models(st)
    prior.add_priors(st, [(12, 12)], {"bcast": BCAST_ARMS}, models=models)
    assert prior.inform_untimed(st, models=models) == [] and list(models) == ["bcast"]


# ---- state dir: re-derivation, foreign state, store, export, CLI -----------------------
def _write(d, doc):
    os.makedirs(d / "samples", exist_ok=True)
    (d / "samples" / f"{doc['run_id']}.json").write_text(json.dumps(doc))


def _state_dir(tmp_path, runs=4, fingerprint="fp1"):
    d = tmp_path / "online"
    costs = {("allreduce", 2, 4, 0): {"library": 12e-6, "recursive_doubling": 8e-6, "ring": 20e-6},
             ("bcast", 2, 4, 3): {"library": 50e-6, "binomial": 60e-6, "pipeline:segsize=16384": 40e-6}}
    st, rng = State(fingerprint), random.Random(2)
    for run in range(runs):
        blocks = _draw_run(st, costs, 30, rng)
        recs = [[b["collective"], 2, 4, 8, b["bytes_lo"] + 8, a["arm"], a["mean"]]
                for b in blocks for a in b["arms"] if a["n"]]
        doc = _samples(run, blocks, fingerprint, recs)
        update.merge_run(st, doc)
        _write(d, doc)
    return d, st


def test_update_rederives_state_stores_records_and_reports(tmp_path, workdir):
    d, expected = _state_dir(tmp_path)
    proc = run_cli("online", "update", str(d), "--layout", "3x4", "--campaign", "onl")
    assert "4 runs" in proc.stdout
    st = state.load(str(d / "state.txt"))
    measured = {k: b for k, b in st.blocks.items() if b.source == "measured"}
    assert measured.keys() == expected.blocks.keys()
    for k, b in measured.items():
        for a, e in zip(b.arms, expected.blocks[k].arms):
            assert (a.arm, a.n) == (e.arm, e.n)
            assert (a.p, a.mean, a.m2) == pytest.approx((e.p, e.mean, e.m2), rel=1e-12)
    priors = [b for b in st.blocks.values() if b.source == "prior"]
    assert {(b.nodes, b.ppn) for b in priors} == {(3, 4)} and len(priors) == 12
    # records: source online, the job's provenance; loading again adds nothing
    from colltune.results import Results
    from colltune.store import Store
    run_cli("online", "update", str(d), "--campaign", "onl")
    with Store(str(workdir / "store.sqlite")) as store:
        res = Results.from_store(store, "onl")
    assert len(res) == sum(len(json.loads(p.read_text())["records"])
                           for p in (d / "samples").iterdir())
    assert set(res.points["scenario"]) == {"online"}
    rec = res.records()[0]
    assert rec["labels"]["source"] == "online" and rec["labels"]["run_id"].startswith("r0")
    assert json.loads(res.runs.iloc[0]["settings_json"])["job"]["platform"] == "small"
    n_points = len(res)
    run_cli("online", "update", str(d), "--campaign", "onl")
    with Store(str(workdir / "store.sqlite")) as store:
        assert len(Results.from_store(store, "onl")) == n_points
    # show
    out = run_cli("online", "show", str(d)).stdout
    assert "fingerprint fp1, 4 runs" in out and "allreduce nodes=2 ppn=4 bytes=0..16" in out
    assert "-> recursive_doubling" in out
    # report: the online section with the probabilities figure
    html = open(run_cli("report", "--campaign", "onl").stdout.strip()).read()
    assert "Online tuning" in html and "progress of selection probabilities" in html
    # no benchmark summary or time-to-completion metric for records of online runs
    assert "No benchmark points in this campaign" in html and "No comparable points" not in html


def test_foreign_samples_and_state_ignored_with_one_warning(tmp_path, workdir):
    d, _ = _state_dir(tmp_path, runs=2, fingerprint="old")
    run_cli("online", "update", str(d))
    assert state.load(str(d / "state.txt")).fingerprint == "old"
    _write(d, _samples(9, [], "new"))                    # a run on another platform
    proc = run_cli("online", "update", str(d))
    warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
    assert len(warnings) == 2, proc.stderr       # the state (renamed) and the samples of 'old'
    assert "fingerprint old, this job's is new" in proc.stderr and "2 samples file(s)" in proc.stderr
    st = state.load(str(d / "state.txt"))
    assert st.fingerprint == "new" and st.run_count == 1
    assert [p for p in os.listdir(d) if p.startswith("state.txt.foreign-")]
    # a corrupt state is kept aside, the state re-derived
    (d / "state.txt").write_text("garbage\n")
    proc = run_cli("online", "update", str(d))
    assert "state.txt:1: expected 'colltune-online-state 1'" in proc.stderr
    assert state.load(str(d / "state.txt")).run_count == 1


def test_export_through_the_exporters(tmp_path, workdir):
    from colltune.exporters.colltune_rules import match, read_rules
    d, expected = _state_dir(tmp_path)
    run_cli("online", "update", str(d))
    out, table = tmp_path / "online.rules", tmp_path / "online.table.json"
    run_cli("online", "export", str(d), "--format", "colltune", "-o", str(out), "--table", str(table))
    rules = read_rules(str(out))
    assert match(rules, "allreduce", 8, 2, 4, 8).algorithm == "recursive_doubling"
    bcast = match(rules, "bcast", 8, 2, 4, 30000)
    assert (bcast.algorithm, bcast.params) == ("pipeline", {"segsize": 16384})
    from colltune.decision import DecisionTable
    t = DecisionTable.load(str(table))
    assert t.tuner == "online" and t.provenance["run_count"] == 4
    assert t.provenance["platform"] == "small" and t.provenance["source"] == "online"
    # a library's file: colltune's algorithms exist only under the interposer
    with pytest.raises(AssertionError, match="allow-substitute"):
        run_cli("online", "export", str(d), "--format", "openmpi-tuned", "-o", str(tmp_path / "x"))
    run_cli("online", "export", str(d), "--format", "openmpi-tuned", "-o", str(tmp_path / "x"),
            "--allow-substitute")
    assert "substituted" in (tmp_path / "x").read_text()
    assert "source platform: small (backend sim)" in (tmp_path / "x").read_text()
    # priors are predictions, not choices: left out
    assert {(e.collective, e.nodes, e.ppn) for e in t.entries} == {("allreduce", 2, 4), ("bcast", 2, 4)}


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed")
def test_exported_library_file_passes_verify(tmp_path, workdir):
    d, _ = _state_dir(tmp_path)
    run_cli("online", "update", str(d))
    out, table = tmp_path / "online.json", tmp_path / "online.table.json"
    run_cli("online", "export", str(d), "--format", "mpich-json", "-o", str(out), "--table",
            str(table), "--allow-substitute")
    proc = run_cli("verify", "--rules", str(out), "--table", str(table), "--library", "mpich",
                   timeout=300)
    assert "RESULT: PASS" in proc.stdout and "file honoured" in proc.stdout, proc.stdout


def test_bad_samples_file_skipped_with_file_and_line(tmp_path, workdir):
    d, _ = _state_dir(tmp_path, runs=1)
    (d / "samples" / "zz.json").write_text('{"schema": "colltune-online-samples/1",\n  "blocks": [}')
    proc = run_cli("online", "update", str(d))
    assert "zz.json:2: not valid JSON" in proc.stderr
    with pytest.raises(InputError, match="bytes 3..9 is not a size class"):
        (d / "samples" / "zz.json").write_text(json.dumps(_samples(5, [
            {"collective": "bcast", "nodes": 1, "ppn": 2, "bytes_lo": 3, "bytes_hi": 9, "arms": []}])))
        update.read_samples(str(d / "samples" / "zz.json"))
    # the right schema, another shape: named, not a traceback (a review)
    for blocks, where in (("x", "blocks: expected a list"),
                          ([{"collective": "bcast", "nodes": 1, "ppn": 2, "bytes_lo": 0,
                             "bytes_hi": 16, "arms": [{"arm": "ring", "mean": "fast"}]}],
                           "blocks/0/arms/0/mean: expected a number")):
        (d / "samples" / "zz.json").write_text(json.dumps({**_samples(5, []), "blocks": blocks}))
        with pytest.raises(InputError, match=re.escape(where)):
            update.read_samples(str(d / "samples" / "zz.json"))
        assert "zz.json: " + where in run_cli("online", "update", str(d)).stderr


# ---- end to end with libcolltune's online mode (SMPI) -------------------------------------
APP = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    static double buf[1 << 15], out[1 << 15];
    double sum = 0;
    for (int it = 0; it < 60; it++) {
        for (int i = 0; i < 1 << 15; i++) buf[i] = rank + i % 7;
        MPI_Allreduce(buf, out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        sum += out[1];
        MPI_Bcast(buf, 4096, MPI_DOUBLE, it % size, MPI_COMM_WORLD);
        sum += buf[5];
    }
    if (rank == 0) printf("checksum %.1f\n", sum);
    MPI_Finalize();
    return 0;
}
"""


def test_run_online_twice_on_smpi_c_state_equals_python(tmp_path, workdir):
    src = tmp_path / "app.c"
    src.write_text(APP)
    d = tmp_path / "state"
    outs = []
    # run 1 through colltune run --online (which re-derives the state afterwards); run 2
    # self-launched with smpirun and the documented variables, so state.txt is what C wrote
    from colltune import platforms
    from colltune.online.job import platform_id
    proc = run_cli("run", "--backend", "sim", "--platform", "small", "--layout", "2x4",
                   "--online", str(d), "--", str(src), timeout=300)
    outs.append([l for l in proc.stdout.splitlines() if l.startswith("checksum")])
    build = shlex.split(run_cli("run", "--link-flags", "--", str(src)).stdout.strip())
    app = tmp_path / "app"
    subprocess.run([build[0], str(src), "-o", str(app), *build[4:]], check=True, cwd=tmp_path)
    plat = platforms.load("small")
    hosts = plat.write_hostfile(2, 4, str(tmp_path / "hosts"))
    proc = subprocess.run(["smpirun", "-np", "8", "-platform", plat.xml_path, "-hostfile", hosts,
                           *plat.smpirun_cfg_args(), "--cfg=smpi/coll-selector:ompi", str(app)],
                          capture_output=True, text=True, timeout=300, check=True,
                          env={**os.environ, "COLLTUNE_ONLINE": str(d),
                               "COLLTUNE_PLATFORM": platform_id("small")})
    outs.append([l for l in proc.stdout.splitlines() if l.startswith("checksum")])
    assert outs[0] == outs[1] and outs[0]           # the same result whatever the arms
    samples = sorted(os.listdir(d / "samples"))
    assert len(samples) == 2
    runs = update.samples_files(str(d))
    c_state = state.load(str(d / "state.txt"))      # after run 2, the update colltune run did
    assert c_state.run_count == 2
    blocks = [b for b in c_state.blocks.values() if b.source == "measured"]
    assert {b.collective for b in blocks} == {"allreduce", "bcast"}
    assert all(sum(a.n for a in b.arms) == 120 for b in blocks)      # 60 calls a run, both runs
    # HAN and the schedules build state on a communicator's first call of them: such calls
    # are flagged, and their arms learn them amortised over the communicator's 60 calls
    setups = [x for r in runs for x in r.data["blocks"] if x["setup_calls"]]
    assert setups and all(x["setup_s"] >= 0 for x in setups)
    assert sum(b.setups for b in blocks) == sum(x["setup_calls"] for x in setups)
    assert all(max(a.p for a in b.arms) > 1.5 / len(b.arms) for b in blocks)   # learnt something
    assert {r.fingerprint for r in runs} == {c_state.fingerprint}
    # run 1's samples are records of the store (colltune run --online updated afterwards)
    from colltune.results import Results
    from colltune.store import Store
    with Store(str(workdir / "store.sqlite")) as store:
        res = Results.from_store(store, f"online-{c_state.fingerprint}")
    assert len(res) and set(res.points["scenario"]) == {"online"}
    assert sum(res.points["reps"]) == len(runs[0].data["records"])
    # what C wrote at run 2's MPI_Finalize == Python's re-derivation from both samples files
    again = update.rederive(runs, c_state.fingerprint)
    for b in blocks:
        mine = again.blocks[b.key]
        assert (mine.setups, mine.setup_s) == (b.setups, b.setup_s)     # C read and kept them
        assert mine.calls == b.calls == sum(
            x["calls"] for r in runs for x in r.data["blocks"]
            if (x["collective"], x["nodes"], x["ppn"]) == b.key[:3]
            and state.class_from_range(x["bytes_lo"], x.get("bytes_hi")) == b.cls)
        for a in b.arms:
            m = mine.arm(a.arm)
            assert m.n == a.n
            # equal up to the samples file's %.9g (C merges the run's unrounded statistics);
            # a different rule or merge order would differ in the first digits
            assert (m.p, m.mean, m.m2) == pytest.approx((a.p, a.mean, a.m2), rel=1e-7, abs=1e-18)


def test_run_online_passes_the_online_settings_of_the_shell(tmp_path, workdir):
    """COLLTUNE_ONLINE_BUDGET (and SEED, RISK, SAMPLERS, LOG), which `run --online` has no
    option for, had been dropped as an inherited choice: the run used budget 200 (a review)."""
    src = tmp_path / "app.c"
    src.write_text(APP)
    d = tmp_path / "state"
    proc = run_cli("run", "--layout", "2x2", "--online", str(d), "--", str(src),
                   env={**os.environ, "COLLTUNE_ONLINE_BUDGET": "7", "COLLTUNE_ONLINE_SEED": "5"},
                   timeout=300)
    assert "COLLTUNE_ONLINE_BUDGET" not in proc.stderr, proc.stderr
    (run,) = update.samples_files(str(d))
    assert run.data["job"]["budget"] == 7 and run.data["job"]["seed"] == 5


DUPFREE = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    int x = 1, y;
    MPI_Comm c[70];
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 70; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c[i]);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c[i]);
        if (FREE_AT_ONCE) MPI_Comm_free(&c[i]);
    }
    for (int i = 0; !FREE_AT_ONCE && i < 70; i++) MPI_Comm_free(&c[i]);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.parametrize("free_at_once", [0, 1])
def test_online_says_once_when_it_stops_tracking_communicators(tmp_path, workdir, free_at_once):
    """Past 64 communicators in use at once online mode left every later one to the
    library without a word (a review): one warning now says so. A freed communicator
    gives its slot back: 70 used one after another are all tracked, without a word."""
    src = tmp_path / "dupfree.c"
    src.write_text(DUPFREE.replace("FREE_AT_ONCE", str(free_at_once)))
    proc = run_cli("run", "--layout", "1x2", "--online", str(tmp_path / "state"), "--", str(src),
                   timeout=300)
    warned = proc.stderr.count("online mode tracks at most 64 communicators in use at once")
    assert warned == 1 - free_at_once, proc.stderr


def test_online_show_says_why_each_block_chose_its_arm(tmp_path):
    """'-> han' with bruck's mean lower had looked like a contradiction (a review)."""
    b = Block("allgather", 7, 3, 1, arms=[Arm("bruck", 0.9, 2, 4.85e-6), Arm("han", 0.1, 5, 7.63e-6)])
    assert b.best().arm == "han"
    assert b.why() == ("the lowest mean of the arms timed at least 3 times; not yet bruck "
                       "(lower mean, n=2 < 3)")
    lib = Block("bcast", 2, 2, 1, arms=[Arm("library", 0.5), Arm("ring", 0.5, 4, 1e-6)])
    assert lib.best().arm == "library" and "its own arm not timed yet" in lib.why()
    st = State("f")
    st.add(b)
    d = tmp_path / "s"
    d.mkdir()
    state.save(st, str(d / "state.txt"))
    out = run_cli("online", "show", str(d)).stdout
    assert "-> han (the lowest mean of the arms timed at least 3 times; not yet bruck" in out


def test_online_state_keeps_the_smpi_selector_it_was_learnt_under(tmp_path, workdir):
    """On SMPI the library arm is the run's selector, which the fingerprint does not
    cover: runs under `ompi` and SMPI's built-in default mixed in one state (a review).
    The first run records it; a run under another selector is refused, naming both."""
    src = tmp_path / "app.c"
    src.write_text(APP)
    d = tmp_path / "state"
    run_cli("run", "--layout", "2x2", "--default-selector", "ompi", "--online", str(d), "--",
            str(src), timeout=300)
    assert (d / "smpi-selector").read_text() == "ompi\n"
    proc = run_cli("run", "--layout", "2x2", "--online", str(d), "--", str(src), check=False,
                   timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "its state was learnt under SMPI's 'ompi' selector (its library arm), this run uses " \
           "'default'" in proc.stderr
    run_cli("run", "--layout", "2x2", "--default-selector", "ompi", "--online", str(d), "--",
            str(src), timeout=300)
