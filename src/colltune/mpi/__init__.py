"""Discovery of the MPI implementations colltune can build against and run.

    from colltune.mpi import discover, find, MPIImpl, MPINotFound
    impl = find("openmpi")          # or "smpi", "mpich"; MPINotFound if absent
    subprocess.run([impl.cc, "x.c", "-o", "x"], env=impl.run_env(), check=True)
    subprocess.run([impl.launcher, "-n", "2", "./x"], env=impl.run_env())

Discovery order, environment variables (COLLTUNE_MPICC, COLLTUNE_DEPS) and
what `make setup` installs: see discovery.py and docs/install.md.
`python -m colltune.mpi` lists what is found. Standard library only.
"""

from .discovery import deps_dir, discover, find, repo_root
from .impl import NAMES, MPIImpl, MPINotFound
from .wheels import WHEELS

__all__ = ["MPIImpl", "MPINotFound", "NAMES", "WHEELS", "deps_dir", "discover",
           "find", "repo_root"]
