"""The algorithm matrix (native/tests/algotest.c, both blocking and
non-blocking forms) on the real libraries: built with the Open MPI and MPICH
wheels' mpicc (found by colltune.mpi discovery) and run with 5 oversubscribed
ranks on communicators of 1..5 ranks, roots 0, k/2, k-1 (every root and
more counts pass too, docs/algorithms.md, but cost minutes on MPICH). Same counting rule as
the SMPI runs (test_algorithms_smpi.py): every case the matrix implies is
checked and none fails."""
from __future__ import annotations

import subprocess

import pytest

from colltune.mpi import discovery
from test_algorithms_smpi import build, check_run, expected_cases, parse_listing

# ranks > cores: Open MPI must be told to oversubscribe; MPICH must yield
# instead of busy-polling, or the run is ~4x slower
LAUNCH = {
    "openmpi": (["--oversubscribe"], {}),
    "mpich": ([], {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}),
}
COUNTS = [0, 1, 7, 1031]


def impl_or_skip(name: str):
    try:
        return discovery.find(name)
    except discovery.MPINotFound as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("mpi", sorted(LAUNCH))
def test_matrix_real_mpi_5_ranks(mpi, tmp_path):
    impl = impl_or_skip(mpi)
    exe = build(impl.cc, tmp_path / "build")
    extra, env = LAUNCH[mpi]
    run_env = {**impl.run_env(), **env}

    def run(np_: int, args: list[str]) -> str:
        cmd = [impl.launcher, *extra, "-np", str(np_), str(exe), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=run_env)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    catalogue = parse_listing(run(1, ["-l"]))
    assert catalogue, "empty catalogue listing"
    out = run(5, ["-s", "5", "-r", "few", "-c", ",".join(map(str, COUNTS))])
    check_run(out, expected_cases(catalogue, 5, 5, False, COUNTS))
