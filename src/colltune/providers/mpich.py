"""MPICH's collective algorithms, read from the library through MPI_T.

Discovery: a tiny MPI_T program (below), compiled with the library's own mpicc
and run without mpiexec (MPI_T works before MPI_Init), prints every control
variable's name and description. The algorithms of a collective are the names
listed in the description of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` (lines
``name - what it does``; ``auto`` is the library's own choice, not an algorithm).
Enum codes change between versions, names are what the environment accepts.
The program and its output are cached per MPICH identity under the cache dir.

Forcing (environment, which Hydra passes to every rank):
``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>``, ``MPIR_CVAR_COLLECTIVE_FALLBACK=error``
(a forced algorithm whose preconditions fail raises an error instead of silently
running another one, so the point is recorded as a failure, never mislabelled) and
``MPIR_CVAR_DEVICE_COLLECTIVES=none`` (otherwise ch4's shared-memory collectives
take over on one node and the CVAR is not used). Selector ``default``: no
environment at all.

Caveat: the environment applies from MPI_Init on, so MPICH's own internal
collectives (communicator creation, address exchange) also use the forced
algorithm; if it is unusable for them the launch aborts in MPI_Init and every
point of it is recorded as crashed, with MPICH's message.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ..errors import BackendError, BuildError
from . import PROVIDERS
from .base import ALGORITHM, COLLECTIVES, SELECTOR, Algorithm, LaunchMods, Provider
from .openmpi import LabelledMods

# colltune collective -> MPICH's <COLL> in MPIR_CVAR_<COLL>_INTRA_ALGORITHM.
MPICH_NAME = {
    "bcast": "BCAST", "reduce": "REDUCE", "allreduce": "ALLREDUCE",
    "allgather": "ALLGATHER", "gather": "GATHER", "scatter": "SCATTER",
    "alltoall": "ALLTOALL", "reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    "barrier": "BARRIER",
}
assert set(MPICH_NAME) == set(COLLECTIVES)

MPIT_SOURCE = r"""/* colltune: print every MPI_T control variable's name and description */
#include <mpi.h>
#include <stdio.h>
int main(void) {
    int provided, n, i;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 1;
    MPI_T_cvar_get_num(&n);
    for (i = 0; i < n; i++) {
        static char name[4096], desc[1 << 16];
        int name_len = sizeof name, desc_len = sizeof desc, verb, bind, scope;
        MPI_Datatype dt; MPI_T_enum et;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verb, &dt, &et, desc, &desc_len,
                                &bind, &scope) != MPI_SUCCESS) continue;
        printf("@@cvar %s\n%s\n", name, desc);
    }
    printf("@@end\n");
    MPI_T_finalize();
    return 0;
}
"""

_ITEM = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s+-\s+(.*)$")


def parse_cvars(text: str) -> dict[str, str]:
    """{cvar name: description} from the MPI_T program's output."""
    if "@@end" not in text:
        raise BackendError("MPI_T listing is truncated (no @@end line)")
    out: dict[str, str] = {}
    name, lines = None, []
    for line in text.splitlines():
        if line.startswith("@@cvar ") or line == "@@end":
            if name is not None:
                out[name] = "\n".join(lines)
            name, lines = (line[7:].strip(), []) if line != "@@end" else (None, [])
        elif name is not None:
            lines.append(line)
    return out


def enum_names(description: str) -> list[tuple[str, str]]:
    """[(name, what it does)] from a CVAR description's "name - text" lines."""
    return [(m.group(1), m.group(2).strip()) for m in map(_ITEM.match, description.splitlines()) if m]


def mpit_listing(impl, cache_dir: str) -> str:
    """The MPI_T program's output for impl, built and run once per identity."""
    out = Path(cache_dir).resolve() / f"mpich-{impl.identity()}-mpit"
    listing = out / "cvars.txt"
    if listing.exists():
        return listing.read_text()
    out.mkdir(parents=True, exist_ok=True)
    src, exe = out / "mpit.c", out / "colltune-mpit"
    src.write_text(MPIT_SOURCE)
    proc = subprocess.run([impl.cc, str(src), "-o", str(exe)], capture_output=True, text=True,
                          env=impl.run_env())
    if proc.returncode != 0:
        raise BuildError(f"building the MPI_T lister with {impl.cc} failed:\n"
                         f"{proc.stdout[-1000:]}{proc.stderr[-2000:]}")
    try:
        run = subprocess.run([str(exe)], capture_output=True, text=True, env=impl.run_env(),
                             timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BackendError(f"{exe} (MPI_T listing) hung for 60 s") from None
    if run.returncode != 0 or "@@end" not in run.stdout:
        raise BackendError(f"{exe} (MPI_T listing) failed (exit {run.returncode}): "
                           f"{(run.stdout + run.stderr)[-1000:]}")
    tmp = listing.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(run.stdout)
    os.replace(tmp, listing)
    return run.stdout


def algorithm_cvar(collective: str) -> str:
    return f"MPIR_CVAR_{MPICH_NAME[collective]}_INTRA_ALGORITHM"


@PROVIDERS.register("mpich")
class MPICHProvider(Provider):
    name = "mpich"
    description = "MPICH algorithms (MPIR_CVAR_<COLL>_INTRA_ALGORITHM, fallback=error)"
    backends = ("local",)
    default_baselines = ("default",)

    def __init__(self, impl, cache_dir: str = ".colltune-cache"):
        self.impl = impl
        self.cvars = parse_cvars(mpit_listing(impl, cache_dir))
        self._algos: dict[str, list[tuple[str, str]]] = {}
        for coll in COLLECTIVES:
            desc = self.cvars.get(algorithm_cvar(coll))
            if desc is not None:
                self._algos[coll] = [(n, d) for n, d in enum_names(desc) if n != "auto"]
        if not self._algos:
            raise BackendError(f"MPICH at {impl.cc} lists no MPIR_CVAR_*_INTRA_ALGORITHM "
                               f"control variables through MPI_T")
        fallback = [n for n, _ in enum_names(self.cvars.get("MPIR_CVAR_COLLECTIVE_FALLBACK", ""))]
        if "error" not in fallback:
            raise BackendError(f"MPICH at {impl.cc} has no MPIR_CVAR_COLLECTIVE_FALLBACK=error: "
                               f"forced algorithms could fall back silently")
        device = [n for n, _ in enum_names(self.cvars.get("MPIR_CVAR_DEVICE_COLLECTIVES", ""))]
        self._device_none = "none" in device

    def collectives(self) -> list[str]:
        return [c for c in COLLECTIVES if self._algos.get(c)]

    def algorithms(self, collective: str) -> list[Algorithm]:
        return [Algorithm(self.name, collective, n, ALGORITHM, description=d)
                for n, d in self._algos.get(collective, [])]

    def selectors(self, collective: str) -> list[Algorithm]:
        if collective not in self.collectives():
            return []
        return [Algorithm(self.name, collective, "default", SELECTOR,
                          description="MPICH untouched (auto selection, device collectives on)")]

    def force(self, algorithm: Algorithm) -> LaunchMods:
        if algorithm.kind == SELECTOR:
            return LabelledMods(labels={"forced": "none (library default)"})
        if algorithm.name not in {n for n, _ in self._algos.get(algorithm.collective, [])}:
            self.lookup(algorithm.collective, algorithm.name)   # raises, listing the names
        env = {algorithm_cvar(algorithm.collective): algorithm.name,
               "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
        if self._device_none:
            env["MPIR_CVAR_DEVICE_COLLECTIVES"] = "none"
        return LabelledMods(env=env, labels={
            "forced": " ".join(f"{k}={v}" for k, v in env.items()), "ran": algorithm.name})
