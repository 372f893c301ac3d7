"""The algorithm matrix (native/tests/algotest.c, both blocking and
non-blocking forms) on the real libraries: built with the Open MPI and MPICH
wheels' mpicc (found by colltune.mpi discovery) and run with 5 oversubscribed
ranks on communicators of 1..5 ranks, every root. Same counting rule as
the SMPI runs (test_algorithms_smpi.py): every case the matrix implies is
checked and none fails."""
from __future__ import annotations

import subprocess

import pytest

from colltune.backends.local import oversubscribe_args
from colltune.mpi import discovery
from test_algorithms_smpi import build, check_run, expected_cases, parse_listing

# ranks > cores: the launcher options colltune itself uses (Open MPI must be told to
# oversubscribe; MPICH's progress loop is throttled instead of busy-polling)
REAL_MPIS = ("mpich", "openmpi")
COUNTS = [0, 1, 7, 1031]


def impl_or_skip(name: str):
    try:
        return discovery.find(name)
    except discovery.MPINotFound as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("mpi", REAL_MPIS)
def test_matrix_real_mpi_5_ranks(mpi, tmp_path):
    impl = impl_or_skip(mpi)
    exe = build(impl.cc, tmp_path / "build")

    def run(np_: int, args: list[str]) -> str:
        cmd = [impl.launcher, *oversubscribe_args(impl, np_), "-np", str(np_), str(exe), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=impl.run_env())
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    catalogue = parse_listing(run(1, ["-l"]))
    assert catalogue, "empty catalogue listing"
    out = run(5, ["-s", "5", "-r", "all", "-c", ",".join(map(str, COUNTS))])
    check_run(out, expected_cases(catalogue, 5, 5, True, COUNTS))
