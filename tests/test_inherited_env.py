"""A deployment's env.sh sourced in the shell must not leak into what colltune
launches: `colltune run --default-selector ompi` there ran the deployment's rules,
and a local bench of the library's `default` ran an inherited forced algorithm.
`run` drops the interposer's variables and says which library settings pass on;
bench and tune drop both."""
from __future__ import annotations

import os

from conftest import REPO, have_mpi, run_cli

import pytest

APP = os.path.join(REPO, "tests", "data", "interpose", "collcheck.c")


def test_run_ignores_inherited_interposer_variables(workdir):
    rules = workdir / "r.rules"
    rules.write_text("colltune-rules 1\nbcast -> binomial\n")
    env = {"COLLTUNE_RULES": str(rules), "COLLTUNE_FORCE": "allreduce:ring",
           "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}
    proc = run_cli("run", "--layout", "2x2", "--verbose", "--", APP, env=env)
    # the library's own settings pass on to the program (profiling a forced library
    # algorithm is a use), said on stderr
    assert "the library settings of this shell pass on to the program: " \
           "MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial" in proc.stderr
    assert "interposer active: rules none (0 rules), COLLTUNE_FORCE none" in proc.stderr, proc.stderr
    assert "colltune run: not passing on COLLTUNE_FORCE, COLLTUNE_RULES from this shell" in proc.stderr
    assert " 0 failures" in proc.stdout
    # given as colltune's own option, the same file is used
    proc = run_cli("run", "--layout", "2x2", "--verbose", "--rules", str(rules), "--", APP, env=env)
    assert f"interposer active: rules {rules} (1 rules)" in proc.stderr, proc.stderr


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed")
def test_local_bench_default_is_the_librarys_own(workdir):
    """An inherited forced algorithm id that does not exist (Open MPI aborts on it)
    no longer reaches the `default` arm."""
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_allgather_algorithm": "42",
           # an export's env.sh sets bcast knomial's radix: an algorithm's parameter too
           "OMPI_MCA_coll_tuned_bcast_algorithm_knomial_radix": "8"}
    proc = run_cli("bench", "--backend", "local", "--mpi", "openmpi", "--coll", "allgather",
                   "--algorithms", "default", "--layouts", "1x2", "--sizes", "8", "-q", env=env)
    assert " ok" in proc.stdout and "crashed" not in proc.stdout, proc.stdout
    assert "OMPI_MCA_coll_tuned_allgather_algorithm" in proc.stderr
    assert "OMPI_MCA_coll_tuned_bcast_algorithm_knomial_radix" in proc.stderr
