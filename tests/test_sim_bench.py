"""The native bench on the real SimGrid SMPI backend: record schema, determinism,
every collective and scenario, non-power-of-two sizes and participant counts."""
from __future__ import annotations

import pytest

from colltune.backends.base import Launch
from colltune.plan import BenchSpec
from colltune.providers.base import COLLECTIVES

MEASUREMENT_FIELDS = {
    "type", "collective", "scenario", "participants", "msg_size", "bytes", "count", "dtype",
    "root", "delay_us", "delayed_rank", "tcalc_us", "warmup", "reps", "late_starts",
    "ttc_median_s", "ttc_mean_s", "ttc_min_s", "ttc_max_s", "ttc_stddev_s", "rse_median",
    "rank_max_mean_s", "rank_mean_mean_s", "pure_median_s", "overlap_pct", "valid",
    "check_error", "labels"}


def _run(backend, settings, tmp_path, spec: BenchSpec, check="first", name="run"):
    launch = Launch(spec.nodes, spec.ppn, spec.bench_args(settings, check),
                    backend.provider().force(spec.algorithm), timeout=120)
    res = backend.run(launch, str(tmp_path / name))
    assert res.clean, f"launch failed: {res.exit_code} {res.output_tail}"
    return res


def _alg(backend, coll, name):
    return backend.provider().lookup(coll, name)


def test_schema_values_and_determinism(sim_backend, settings, tmp_path):
    spec = BenchSpec("bcast", _alg(sim_backend, "bcast", "binomial_tree"), 2, 4,
                     (0, 1, 7, 1000, 4096, 65536))
    a = _run(sim_backend, settings, tmp_path, spec, name="a")
    b = _run(sim_backend, settings, tmp_path, spec, name="b")
    assert a.header["world_size"] == 8 and a.header["nodes"] == 2
    assert a.header["clock"] == "global"
    assert [r["msg_size"] for r in a.records] == [0, 1, 7, 1000, 4096, 65536]
    for r in a.records:
        assert MEASUREMENT_FIELDS <= set(r), set(MEASUREMENT_FIELDS) - set(r)
        assert r["valid"] is True and r["participants"] == 8 and r["dtype"] == "char"
        assert r["bytes"] == r["msg_size"] and r["reps"] >= settings.min_reps
        assert r["ttc_min_s"] <= r["ttc_median_s"] <= r["ttc_max_s"]
        assert r["rank_max_mean_s"] <= r["ttc_max_s"] + 1e-12
    times = [r["ttc_median_s"] for r in a.records]
    assert all(t > 0 for t in times[1:])
    assert times[-1] > times[3] > times[1]          # 64 KiB > 1000 B > 1 B
    # SimGrid with simulate-computation:no is deterministic to the bit
    assert times == [r["ttc_median_s"] for r in b.records]


@pytest.mark.parametrize("coll", COLLECTIVES)
def test_every_collective_any_participant_count(sim_backend, settings, tmp_path, coll):
    """Sub-communicators of 1..9 ranks, odd and non-power-of-two sizes, data checked."""
    # SMPI's `default` logic (basic algorithms; its `ompi` selector crashes at count 0)
    spec = BenchSpec(coll, _alg(sim_backend, coll, "default"), 3, 3, (0, 1, 7, 1000),
                     procs=tuple(range(1, 10)))
    res = _run(sim_backend, settings, tmp_path, spec)
    assert len(res.records) == 9 * 4
    assert {r["participants"] for r in res.records} == set(range(1, 10))
    for r in res.records:
        assert r["valid"] is True, r
        if r["msg_size"] >= 4 or coll == "barrier":
            assert r["ttc_median_s"] > 0 or r["participants"] == 1


def test_delayed_scenario_grows_with_delay(sim_backend, settings, tmp_path):
    spec = BenchSpec("allreduce", _alg(sim_backend, "allreduce", "rdb"), 2, 3, (1000,),
                     scenario="delayed", delays_us=(1, 16, 256), delayed_rank="first")
    res = _run(sim_backend, settings, tmp_path, spec)
    t = {r["delay_us"]: r["ttc_median_s"] for r in res.records}
    assert t[256] > t[16] > t[1]
    assert t[256] >= 256e-6                         # the late rank's delay is inside ttc
    assert all(r["delayed_rank"] == "first" for r in res.records)


def test_overlap_scenario(sim_backend, settings, tmp_path):
    spec = BenchSpec("bcast", _alg(sim_backend, "bcast", "ompi"), 2, 2, (65536,),
                     scenario="overlap", tcalc_us=(1, 64, 4096))
    res = _run(sim_backend, settings, tmp_path, spec)
    recs = {r["tcalc_us"]: r for r in res.records}
    for tc, r in recs.items():
        assert r["pure_median_s"] > 0 and 0 <= r["overlap_pct"] <= 100
        assert r["ttc_median_s"] >= tc * 1e-6      # compute time is inside the total
    assert recs[4096]["ttc_median_s"] > recs[1]["ttc_median_s"]


def test_a_selector_is_measured_as_a_job_runs_it(sim_backend, settings, tmp_path):
    """A selector arm sets SMPI's selector for every collective (what a job with it runs:
    the collectives its algorithms call inside are its own too), and points measured
    with only this collective's selector are not reused (their key differs)."""
    from dataclasses import replace

    from colltune.providers.base import ALGORITHM, SELECTOR
    prov = sim_backend.provider()
    sel = _alg(sim_backend, "allreduce", "ompi")
    assert sel.kind == SELECTOR
    assert prov.force(sel).launcher_args == prov.decision_mods("ompi").launcher_args \
        == ["--cfg=smpi/coll-selector:ompi"]
    assert prov.force(_alg(sim_backend, "allreduce", "rdb")).launcher_args == ["--cfg=smpi/allreduce:rdb"]
    spec = BenchSpec("allreduce", sel, 2, 4, (3000,))
    as_algorithm = replace(spec, algorithm=replace(sel, kind=ALGORITHM))
    point = next(iter(spec.points()))
    assert spec.key_of(point, {}) != as_algorithm.key_of(point, {})
    rec = _run(sim_backend, settings, tmp_path, spec).records[0]
    assert rec["valid"] is True and rec["ttc_median_s"] > 0


def test_charged_sum_charges_library_and_colltune_reductions_alike(sim_backend, settings, tmp_path):
    """SMPI charges no reduction arithmetic, colltune's algorithms charge theirs: with
    --reduction-op charged-sum the operator charges itself, so a library algorithm pays
    for its reductions (recursive doubling on 8 ranks: log2 8 = 3 whole vectors) and
    colltune's pays once, not twice (the same time as with MPI_SUM)."""
    from dataclasses import replace

    from colltune import config
    from colltune.backends.sim import SimBackend
    from colltune.platforms import load as load_platform

    size = 1 << 16
    charged = replace(settings, values={**settings.values, "reduction_op": "charged-sum"})
    lib = BenchSpec("allreduce", _alg(sim_backend, "allreduce", "rdb"), 2, 4, (size,))
    assert "--op" not in lib.bench_args(settings, "first")
    assert lib.bench_args(charged, "first")[-2:] == ["--op", "charged-sum"]
    t = {}
    for name, s in (("sum", settings), ("charged", charged)):
        rec = _run(sim_backend, s, tmp_path, lib, name=f"lib-{name}").records[0]
        assert rec["valid"] is True
        t[name] = rec["ttc_median_s"]
    per_vector = size / load_platform("small").charge_rates["reduction_bytes_per_s"]
    assert t["charged"] - t["sum"] >= 2.5 * per_vector, t

    ours_backend = SimBackend(config.load({"cache_dir": settings.cache_dir, "platform": "small",
                                           "provider": "colltune"}, environ={}), "small")
    ours_backend.prepare()
    ring = BenchSpec("allreduce", _alg(ours_backend, "allreduce", "ring"), 2, 4, (size,))
    t = {}
    for name, s in (("sum", settings), ("charged", charged)):
        rec = _run(ours_backend, s, tmp_path, ring, name=f"ours-{name}").records[0]
        assert rec["valid"] is True
        t[name] = rec["ttc_median_s"]
    assert t["charged"] == pytest.approx(t["sum"], rel=1e-9), t

    # the operator is in a reduction's key (MPI_SUM points keep theirs), not in a bcast's
    point = next(iter(lib.points()))
    ctx = {"bench": {"warmup": 1, "reduction_op": "sum"}}
    ctx_charged = {"bench": {"warmup": 1, "reduction_op": "charged-sum"}}
    assert lib.key_of(point, ctx) == lib.key_of(point, {"bench": {"warmup": 1}})
    assert lib.key_of(point, ctx) != lib.key_of(point, ctx_charged)
    bc = BenchSpec("bcast", _alg(sim_backend, "bcast", "binomial_tree"), 2, 4, (size,))
    assert bc.key_of(point, ctx) == bc.key_of(point, ctx_charged)


@pytest.mark.parametrize("coll", ["allreduce", "reduce"])
def test_multileader_one_rank_per_node_under_the_ompi_selector(settings, tmp_path, coll):
    """SMPI 3.32's `ompi` selector aborts on one-rank communicators ("Actor pid=-1 is
    gone??": MPI_Allgatherv of 32-255 bytes, MPI_Reduce of 8-31 bytes and from 256 KiB).
    colltune's algorithms run under the selector a deployment runs with (--provider both):
    with one rank per node multileader calls no library step on its one-rank nodes (the
    dragonfly's 96x1 evaluation had crashed at allreduce 128 B). Results checked."""
    from colltune import config
    from colltune.backends.sim import SimBackend
    backend = SimBackend(config.load({"cache_dir": settings.cache_dir, "platform": "small",
                                      "provider": "both", "default_selector": "ompi"}, environ={}), "small")
    backend.prepare()
    alg = backend.provider().lookup(coll, "colltune:multileader")
    res = _run(backend, settings, tmp_path, BenchSpec(coll, alg, 3, 1, (8, 128, 280000)))
    assert [(r["bytes"], r["valid"]) for r in res.records] == [(8, True), (128, True), (280000, True)]
