"""The taskmodel tuner's optional heuristics (taskmodel/heuristics.py,
docs/taskmodel.md "Heuristics"): the pruning rules on the real configuration
space and model helpers, and, with real smpirun on the small platform, that a
pruned configuration's pipelines are never measured and that the mechanism
each rule relies on holds (the pruned configuration is the slower one)."""
from __future__ import annotations

import pytest

from colltune.store import Store
from colltune.taskmodel import heuristics as H
from colltune.taskmodel.costs import PIPE_SEGMENTS, PIPE_SEGMENTS_SHORT, TaskCosts
from colltune.taskmodel.runner import TaskRunner
from colltune.taskmodel.search import (best_predicted, configurations, measure_whole,
                                       predict_config)

KI = 1024


def test_parse():
    assert H.parse(True) == set(H.SAFE) == H.parse("safe") == {"H1", "H3", "H4", "H5"}
    assert H.parse("all") == set(H.ALL) == {"H1", "H2", "H3", "H4", "H5"}
    assert H.parse(False) == H.parse(None) == H.parse("") == H.parse("none") == set()
    assert H.parse("h1,H3") == {"H1", "H3"}
    from colltune.errors import ConfigError
    with pytest.raises(ConfigError, match="--heuristics: unknown taskmodel heuristic.s. H9"):
        H.parse("H1,H9")


def test_h2_chain_pruned_only_when_it_needs_more_piece_steps_than_binomial():
    chain = {"fs": 128 * KI, "imod": 1, "smod": 1, "ibalg": 3}
    # 100000 B = 2 pieces of 64 KiB. 3 nodes: chain 2 + 1 steps, binomial 2 x 2;
    # 8 nodes: chain 2 + 6 = 8 steps, binomial 3 x 2 = 6
    assert H.inter_pieces(chain, 100_000) == 2
    assert not H.chain_unfilled("bcast", 3, chain, 100_000)
    assert H.chain_unfilled("bcast", 8, chain, 100_000)
    # 3 segments of 128 KiB (last partial: 300000 - 262144 = 37856 B) -> 2 + 2 + 1 pieces
    assert H.inter_pieces(chain, 300_000) == 5
    assert not H.chain_unfilled("bcast", 7, chain, 300_000)     # 5 + 5 < 3 x 5
    # 16 nodes (the measured 16x12 cases): 150000 B = 3 pieces, 3 + 14 > 4 x 3: pruned
    # (binomial measured faster); 450000 B = 7 pieces, 7 + 14 < 4 x 7: kept (chain faster)
    assert H.inter_pieces(chain, 150_000) == 3 and H.chain_unfilled("bcast", 16, chain, 150_000)
    assert H.inter_pieces(chain, 450_000) == 7
    assert not H.chain_unfilled("bcast", 16, chain, 450_000)
    # a tie is kept (8 nodes, 3 pieces: 9 steps each)
    assert not H.chain_unfilled("bcast", 8, chain, 150_000)
    # ibs = 0: one piece per segment
    assert H.inter_pieces(dict(chain, ibs=0), 300_000) == 3
    # only the chain tree of colltune's inter-node module; one node has no chain
    assert not H.chain_unfilled("bcast", 8, dict(chain, ibalg=1), 100_000)
    assert not H.chain_unfilled("bcast", 8, dict(chain, imod=0), 100_000)
    assert not H.chain_unfilled("bcast", 1, chain, 100_000)


def test_h3_blocking_intra_only_for_pipelined_bcast():
    c = {"fs": 128 * KI, "imod": 1, "smod": 0, "ibalg": 1}
    assert H.blocking_intra("bcast", 4, c, 1_000_000)          # u = 8
    assert not H.blocking_intra("bcast", 4, c, 100_000)        # u = 1: nothing to overlap
    assert not H.blocking_intra("bcast", 4, dict(c, smod=1), 1_000_000)
    assert not H.blocking_intra("bcast", 4, dict(c, imod=0), 1_000_000)
    assert not H.blocking_intra("allreduce", 4, dict(c, iralg=1), 1_000_000)


def test_h4_unfilled_pipeline_needs_a_smaller_fs_that_fills():
    confs = configurations("allreduce")
    big = [c for c in confs if c["fs"] == 512 * KI]
    small = [c for c in confs if c["fs"] == 128 * KI]
    # 1e6 B: fs 512 KiB -> u = 2 < 4, fs 128 KiB -> u = 8: the big fs goes
    assert all(H.unfilled("allreduce", c, 1_000_000, confs) for c in big)
    assert not any(H.unfilled("allreduce", c, 1_000_000, confs) for c in small)
    # 300000 B: fs 128 KiB -> u = 3 < 4, but no smaller fs fills it: kept
    assert not any(H.unfilled("allreduce", c, 300_000, confs) for c in small)
    # u = 1 (no segmentation) is never pruned; bcast (D = 2) has no 1 < u < D
    assert not any(H.unfilled("allreduce", c, 100_000, confs) for c in confs)
    assert not any(H.unfilled("bcast", c, m, configurations("bcast"))
                   for c in configurations("bcast") for m in (100_000, 300_000, 1_000_000))


def test_candidates_union_and_never_empty():
    confs = configurations("allreduce")
    kept = H.candidates("allreduce", 8, 4, 1_000_000, confs, "all")
    assert all(c["fs"] == 128 * KI for c in kept)                       # H4
    assert any(c["imod"] == 1 and c["smod"] == 0 for c in kept)         # H3: bcast only
    kept = H.candidates("bcast", 8, 4, 1_000_000, configurations("bcast"), "all")
    assert kept and not any(c["imod"] == 1 and c["smod"] == 0 for c in kept)
    assert H.candidates("allreduce", 8, 4, 1_000_000, confs, "H1") == confs
    only_chain = [c for c in confs if c.get("ibalg") == 3 and c["imod"] == 1]
    assert H.candidates("bcast", 8, 4, 1000, only_chain, "H2") == only_chain


def test_h5_fill_drain_is_the_short_call_task_structure():
    from colltune.taskmodel.model import pipeline_tasks, predict_fill_drain
    # a 3-segment allreduce is the 4-segment pipeline's fill followed by its drain
    short, pipe = pipeline_tasks("allreduce", 3), pipeline_tasks("allreduce", 7)
    strip = lambda t: sorted(x.split("(")[0] for x in t.split("+"))  # noqa: E731
    assert [strip(t) for t in short] == [strip(t) for t in pipe[:3] + pipe[-3:]]
    costs = [[1.0, 2.0], [2.0, 1.0], [3.0, 3.0], [9.0, 9.0], [9.0, 9.0], [4.0, 1.0],
             [5.0, 1.0], [6.0, 1.0]]                     # per task, per rank; steady = 9s
    assert predict_fill_drain("allreduce", costs) == max(1 + 2 + 3 + 4 + 5 + 6, 2 + 1 + 3 + 3)
    with pytest.raises(ValueError):
        predict_fill_drain("allreduce", costs[:6])


# --- real smpirun (small platform) ---

@pytest.fixture(scope="module")
def tm(sim_backend, settings, tmp_path_factory):
    d = tmp_path_factory.mktemp("tmh")
    store = Store(str(d / "store.sqlite"))
    runner = TaskRunner(sim_backend, settings, str(d / "work"))
    yield store, runner, sim_backend.provenance()
    store.close()


def test_pruned_configurations_are_never_measured(tm):
    store, runner, prov = tm
    confs = configurations("allreduce")
    costs = TaskCosts(store, runner, prov, heuristics="H3,H4")
    conf, pred = best_predicted(costs, "allreduce", 2, 2, 1_000_000, confs)
    assert pred > 0 and conf["fs"] == 128 * KI
    kept = H.candidates("allreduce", 2, 2, 1_000_000, confs, "H3,H4")
    assert costs.measured == len(kept) == len(confs) - 6   # H4: the 6 fs-512K ones; H3: bcast only
    rows = store.db.execute("SELECT params_json, seg_bytes, segments FROM taskmodel_pipelines "
                            "WHERE collective='allreduce'").fetchall()
    assert {(s, u) for _, s, u in rows} == {(128 * KI, PIPE_SEGMENTS["allreduce"])}


def test_h1_short_pipeline_length(tm):
    store, runner, prov = tm
    costs = TaskCosts(store, runner, prov, heuristics="H1")
    conf = {"fs": 128 * KI, "imod": 1, "smod": 1, "ibalg": 1}
    best_predicted(costs, "bcast", 2, 2, 1_000_000, [conf])
    assert costs.measured == 1
    assert store.db.execute("SELECT segments FROM taskmodel_pipelines WHERE collective='bcast'"
                            ).fetchone()[0] == PIPE_SEGMENTS_SHORT["bcast"]


def test_h3_mechanism_blocking_intra_node_stalls_the_tree(tm):
    """The configuration H3 prunes is the slower one on a pipelined call."""
    store, runner, prov = tm
    costs = TaskCosts(store, runner, prov)
    tree = {"fs": 128 * KI, "imod": 1, "smod": 1, "ibalg": 1}
    blocking = dict(tree, smod=0)
    assert H.blocking_intra("bcast", 4, blocking, 1 << 20)
    t_tree = measure_whole(costs, "bcast", 4, 2, tree, 1 << 20)["completion_s"]
    t_block = measure_whole(costs, "bcast", 4, 2, blocking, 1 << 20)["completion_s"]
    assert t_block > t_tree


def test_h2_mechanism_unfilled_chain_loses_to_binomial(tm):
    store, runner, prov = tm
    costs = TaskCosts(store, runner, prov)
    chain = {"fs": 128 * KI, "imod": 1, "smod": 1, "ibalg": 3}
    assert H.chain_unfilled("bcast", 8, chain, 100_000)
    t_chain = measure_whole(costs, "bcast", 8, 1, chain, 100_000)["completion_s"]
    t_bin = measure_whole(costs, "bcast", 8, 1, dict(chain, ibalg=1), 100_000)["completion_s"]
    assert t_chain > t_bin


def test_h5_fill_drain_needs_no_short_pipeline(tm):
    """allreduce, u = D = 4 with a partial last segment: H5 measures only the
    steady pipeline (no exact 3-segment one) and stays within the tolerance."""
    store, runner, prov = tm
    conf = {"fs": 128 * KI, "imod": 0, "smod": 0, "ibalg": 1, "iralg": 1}
    m = 450_000                                   # 3 x 128 KiB < m < 4 x 128 KiB
    where = "collective='allreduce' AND nodes=2 AND ppn=4"
    h5 = TaskCosts(store, runner, prov, heuristics="H5")
    pred = predict_config(h5, "allreduce", 2, 4, conf, m)
    segs = [r[0] for r in store.db.execute(f"SELECT segments FROM taskmodel_pipelines WHERE {where}")]
    assert segs == [PIPE_SEGMENTS["allreduce"]] and h5.measured == 1
    exact = TaskCosts(store, runner, prov)
    pred_exact = predict_config(exact, "allreduce", 2, 4, conf, m)
    assert exact.measured == 1                    # the 3-segment pipeline H5 did without
    whole = measure_whole(exact, "allreduce", 2, 4, conf, m)["completion_s"]
    assert abs(pred / whole - 1) <= 0.10, (pred, pred_exact, whole)


def test_h5_not_for_one_segment_bcast(tm):
    store, runner, prov = tm
    conf = {"fs": 128 * KI, "imod": 1, "smod": 1, "ibalg": 1}
    h5 = TaskCosts(store, runner, prov, heuristics="H5")
    predict_config(h5, "bcast", 2, 2, conf, 200_000)   # u = 2 = D, partial: needs u-1 = 1
    assert 1 in [r[0] for r in store.db.execute(
        "SELECT segments FROM taskmodel_pipelines WHERE collective='bcast' AND nodes=2 AND ppn=2")]


def test_cli_heuristics_subset_and_all(workdir):
    from colltune.decision import DecisionTable
    from conftest import run_cli
    base = ["tune", "--strategy", "taskmodel", "--collectives", "allreduce", "--layouts", "2x2",
            "--sizes", "1000000", "--platform", "small"]
    run_cli(*base, "--campaign", "hsub", "--heuristics", "H3,H4")
    t = DecisionTable.load(str(workdir / "out" / "hsub.table.json"))
    assert t.provenance["taskmodel"]["heuristics"] == ["H3", "H4"]
    rule = t.lookup("allreduce", 2, 2, 1000000)
    assert rule.params["fs"] == 128 * KI
    run_cli(*base, "--campaign", "hsafe", "--heuristics")
    t = DecisionTable.load(str(workdir / "out" / "hsafe.table.json"))
    assert t.provenance["taskmodel"]["heuristics"] == list(H.SAFE)
    run_cli(*base, "--campaign", "hall", "--heuristics", "all")
    t = DecisionTable.load(str(workdir / "out" / "hall.table.json"))
    assert t.provenance["taskmodel"]["heuristics"] == list(H.ALL)
