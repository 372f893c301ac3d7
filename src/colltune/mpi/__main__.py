"""`python -m colltune.mpi [-v]`: list the MPI implementations discovered, in
discovery order; -v adds each one's compile line, environment and what was
skipped and why. Exit status 1 when any of smpi/openmpi/mpich is missing."""

from __future__ import annotations

import sys

from . import NAMES, MPINotFound, discover, find


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    impls = discover()
    for impl in impls:
        print(impl.describe())
        if verbose:
            print(f"    show: {impl.show().splitlines()[-1]}")
            print(f"    info_tool: {impl.info_tool}  prefix: {impl.prefix}")
            for key, value in sorted(impl.env.items()):
                print(f"    env {key}={value}")
    missing = 0
    for name in NAMES:
        try:
            find(name)
        except MPINotFound as exc:
            missing += 1
            print(f"missing {name}: {exc}" if verbose else
                  f"missing {name}: {str(exc).splitlines()[0]}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
