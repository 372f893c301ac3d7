"""Modelled MPICH traffic (colltune.profile.model) == what the real MPICH 5.0.2 wheel sends.

Each modelled algorithm is forced (MPIR_CVAR_<COLL>_INTRA_ALGORITHM through the MPI_T shim,
fallback=error, as verify does) and run by the verify probe under the verify tracer with
MPIR_CVAR_NOLOCAL=1, so every message, collective-internal ones included, is handed to UCX and
recorded (endpoint, bytes). The tracer names no peers, only endpoints, so per rank the
multiset over peers of (messages, sorted message sizes) must equal the model's, on 3, 4 and 5
ranks (non-powers of two take MPICH's fold / fix-up paths) and sizes around MPICH's
thresholds (a ring chunk of 32 KiB, blocks that do not divide evenly, blocks of 0 bytes).
"""
from __future__ import annotations

import pytest

from colltune.profile import model

from pathlib import Path

from colltune.profile.counts import load_profile

from conftest import CACHE, REPO, have_mpi, run_cli

pytestmark = pytest.mark.skipif(not have_mpi("mpich"), reason="the MPICH wheel is not installed")

SIZES = {"bcast": [13, 1000, 80001], "reduce": [4, 1000, 80004], "allreduce": [12, 1000, 80004],
         "allgather": [1, 1000, 40000], "alltoall": [1, 1000]}
CASES = [(n, coll, alg) for n in (3, 4, 5) for coll, algs in model.MODELS.items() for alg in algs]


@pytest.fixture(scope="module")
def mpich():
    from colltune import mpi
    from colltune.providers.mpich import MPICHProvider
    from colltune.verify import probe
    impl = mpi.find("mpich")
    return impl, MPICHProvider(impl, CACHE), probe.build(impl, CACHE)


def _signature(per_peer: dict) -> list:
    return sorted((len(v), tuple(sorted(v))) for v in per_peer.values())


@pytest.mark.parametrize("n,coll,alg", CASES, ids=[f"{c[1]}-{c[2]}-{c[0]}" for c in CASES])
def test_model_equals_mpich(mpich, n, coll, alg):
    from colltune.providers.base import Algorithm
    from colltune.verify import probe
    impl, prov, tools = mpich
    ts = 4 if coll in ("reduce", "allreduce") else 1          # the probe reduces floats
    sizes = [b for b in SIZES[coll] if model.usable(coll, alg, n, b, ts)]
    if not sizes:
        pytest.skip(f"MPICH refuses {coll} {alg} on {n} ranks")
    mods = prov.force(Algorithm("mpich", coll, alg))
    cmd = [impl.launcher, "-genv", "LD_PRELOAD", f"{mods.launcher_args[2]} {tools.tracer}", "-n", str(n)]
    obs = probe.require_ok(probe.launch(cmd, tools, [f"{coll}:{b}" for b in sizes], 1,
                                        {**impl.run_env(), "MPIR_CVAR_NOLOCAL": "1", **mods.env}, 300),
                           f"MPICH {coll} {alg} on {n} ranks")
    for point, nbytes in enumerate(sizes):
        msgs = model.collective_messages(coll, alg, n, 0, nbytes, ts)
        assert msgs, "a model that sends nothing checks nothing"
        for rank in range(n):
            want: dict[int, list[int]] = {}
            for s, d, b in msgs:
                if s == rank:
                    want.setdefault(d, []).append(b)
            got = obs.messages.get((rank, point), {})
            assert _signature(got) == _signature(want), (nbytes, rank)


def test_model_sends_by_world_rank():
    job = {"settings": {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}}
    members = [7, 3, 5]                                  # communicator rank order
    # ring, 3 floats on 3 ranks: rank 1 sends 2 reduce-scatter and 2 allgather blocks of 4 B to rank 2
    assert model.model_sends("allreduce", members, -1, 12, job, rank=3, type_size=4) == [(5, 16, 4)]
    assert model.model_sends("allreduce", members, -1, 12, job, rank=3) is None     # type size unknown
    assert model.model_sends("bcast", members, 0, 8, job, rank=3) is None           # not forced
    assert model.model_sends("allreduce", members, -1, 12, job, rank=9, type_size=4) is None


def test_mpich_run_is_labelled(tmp_path):
    """A real MPICH run with a forced bcast: its library bcasts are modelled, the other
    library collectives not visible (never zero without a label)."""
    out = tmp_path / "prof"
    run_cli("run", "--backend", "local", "--mpi", "mpich", "--profile", str(out), "-n", "3", "--",
            str(Path(REPO, "native", "tests", "profcount.c")),
            env={"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}, timeout=300)
    prof = load_profile(out)
    assert prof.visibility("coll", "bcast") == "modelled"
    B, M = prof.matrix("coll", "bcast")
    assert M[0, 1] == M[0, 2] == 2 and M.sum() == 4 and B.sum() == 4 * 1000   # 2 calls, root 0
    assert prof.visibility("coll", "gather") == "not visible"
    assert prof.matrix("coll", "gather")[0].sum() == 0
    assert prof.visibility("p2p", "p2p") == "exact"
