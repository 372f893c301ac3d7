"""Traffic profiling across emulated hosts (issue 17): `colltune run --backend netns
--profile` of native/tests/profcount.c on 2 hosts x 2 ranks of a real emulated cluster.

- Open MPI: its bcast forced to linear (coll_tuned dynamic rules) is counted by pml
  monitoring as exactly root -> every other rank, 2 calls of 1000 B; the ranks' hosts are
  the cluster's, and routed on the emulated topology the bcast crosses the bridge only to
  the other host's two ranks.
- MPICH: its bcast forced to binomial (MPIR_CVAR_BCAST_INTRA_ALGORITHM) is labelled
  *modelled* and the modelled matrix is the binomial tree from root 0 (0->2, 0->1, 2->3),
  every edge carrying the whole 1000 B twice; its other collectives are *not visible*.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import REPO, emulated_cluster, have_mpi, run_cli


from colltune.profile import link_loads, load_profile, resolve_topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
APP = os.path.join(REPO, "native", "tests", "profcount.c")
NAME, SUBNET = "cpn", "10.213.74.0/24"


@pytest.fixture(scope="module")
def emulated():
    with emulated_cluster(2, NAME, SUBNET) as c:
        yield c


def _run(lib: str, out, env: dict):
    proc = run_cli("run", "--backend", "netns", "--platform", NAME, "--mpi", lib, "--layout", "2x2",
                   "--force", "allreduce:ring", "--profile", str(out), "--", APP, env=env,
                   timeout=300)
    assert "profcount ok" in proc.stdout, proc.stdout + proc.stderr
    assert "all 4 rank files written" in proc.stderr
    return proc


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
def test_openmpi_forced_linear_bcast_across_hosts(emulated, tmp_path):
    out = tmp_path / "prof"
    # coll/han off: on 2 nodes it takes MPI_COMM_WORLD's bcast from coll/tuned (then the
    # counts show HAN's hierarchy instead: 0->2 across, 0->1 and 2->3 inside the hosts)
    _run("openmpi", out, {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                          "OMPI_MCA_coll_tuned_bcast_algorithm": "1", "OMPI_MCA_coll_han_priority": "0"})
    job = json.loads((out / "job.json").read_text())
    assert job["monitoring"] == "on"
    prof = load_profile(out)
    hosts = [h.name for h in emulated.hosts]
    assert prof.hosts == [hosts[0], hosts[0], hosts[1], hosts[1]]       # block placement
    assert prof.visibility("coll", "bcast") == "monitoring"
    B, M = prof.matrix(region="coll", kind="bcast")
    want = np.zeros((4, 4), dtype=np.int64)
    want[0, 1:] = 2000
    assert (B == want).all() and (M == (want > 0) * 2).all()
    # on the emulated star: only ranks 2 and 3 are across the bridge
    topo = resolve_topology(NAME)
    HB, HM, hnames = prof.host_matrix(region="coll", kind="bcast")
    ld = link_loads(topo, HB, HM, hosts=hnames)
    up = next(lk.id for lk in topo.links.values() if lk.src == hosts[0] and lk.dst != hosts[0])
    down = next(lk.id for lk in topo.links.values() if lk.dst == hosts[1] and lk.src != hosts[1])
    assert ld.of(up) == (4000, 4) and ld.of(down) == (4000, 4)
    assert sum(b for b, _ in ld.nonzero().values()) == 8000          # nothing else loaded
    # the profile says which cluster it ran on: report draws it without --topology
    page = tmp_path / "p.html"
    run_cli("profile", "report", str(out), "--kind", "bcast", "--region", "coll", "-o", str(page))
    assert hosts[0] in page.read_text()
    # and once the cluster is down (no state file: here another state folder), from the
    # cluster the profile saved (it could not be drawn again: an analyst's review)
    from colltune.cluster.state import RUN_DIR_ENV
    page.unlink()
    run_cli("profile", "report", str(out), "--kind", "bcast", "--region", "coll", "-o", str(page),
            env={RUN_DIR_ENV: str(tmp_path / "no-clusters")})
    assert hosts[0] in page.read_text()


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed (make setup)")
def test_mpich_forced_binomial_bcast_is_modelled_across_hosts(emulated, tmp_path):
    out = tmp_path / "prof"
    _run("mpich", out, {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"})
    prof = load_profile(out)
    assert prof.visibility("coll", "bcast") == "modelled"
    assert prof.visibility("coll", "alltoall") == "not visible"
    B, M = prof.matrix(region="coll", kind="bcast")
    want = np.zeros((4, 4), dtype=np.int64)
    for s, d in ((0, 2), (0, 1), (2, 3)):
        want[s, d] = 2000
    assert (B == want).all() and (M == (want > 0) * 2).all()
    assert any("modelled" in n or "not visible" in n for n in prof.notes)
