"""Build colltune's native programs against a given MPI, cached by identity.

The cache key joins the MPI's identity (name, version, wrapper flags) with a
hash of the native sources, so a different MPI or an edited source rebuilds and
anything else is reused. Builds are serialised with a file lock so concurrent
campaigns or tests never race on the same directory.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

from .errors import BuildError

REPO_ROOT = Path(__file__).resolve().parents[2]


def native_dir() -> Path:
    d = Path(os.environ.get("COLLTUNE_NATIVE_DIR", REPO_ROOT / "native"))
    if not (d / "Makefile").exists():
        raise BuildError(f"native sources not found in {d} (set COLLTUNE_NATIVE_DIR to the "
                         f"colltune checkout's native/ folder)")
    return d


def _sources_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".c", ".h") or p.name == "Makefile":
            if "build" in p.relative_to(root).parts:
                continue
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def sources_hash() -> str:
    """The hash of the native sources that builds are cached under (a point measured with
    colltune's algorithms records it: a stored point of another build is measured again)."""
    return _sources_hash(native_dir())


def build(impl, target: str = "bench", cache_dir: str = ".colltune-cache",
          product: str | None = None) -> Path:
    """Return the path of the built program ``colltune-<target>`` for ``impl``
    (or of ``product``, another file the target makes, e.g. libcolltune.so)."""
    src = native_dir()
    out = Path(cache_dir).resolve() / f"{impl.name}-{impl.identity()}-{_sources_hash(src)}"
    exe = out / (product or f"colltune-{target}")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        cmd = ["make", "-s", "-C", str(src), target, f"MPICC={impl.cc}", f"OUT={out}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=impl.run_env())
        if proc.returncode != 0 or not exe.exists():
            raise BuildError(f"building {target} with {impl.cc} ({impl.name} {impl.version}) "
                             f"failed:\n$ {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return exe
