"""MPICH's collective algorithms, read from the library through MPI_T.

Discovery: a tiny MPI_T program (below), compiled with the library's own mpicc
and run without mpiexec (MPI_T works before MPI_Init), prints every control
variable's name and description. The algorithms of a collective are the names
listed in the description of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` (lines
``name - what it does``; ``auto`` is the library's own choice, not an algorithm).
The program, its output and the shim below are cached per MPICH identity.

Forcing: ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>`` and
``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` (a forced algorithm whose preconditions
fail raises an error instead of silently running another one, so the point is
recorded as a failure, never mislabelled) are written through MPI_T by a small
LD_PRELOAD shim right after MPI_Init, not set in the environment: from the
environment they would also drive MPICH's internal collectives inside MPI_Init
(communicator set-up, the UCX address exchange), which then abort for algorithms
that are unusable there although the measured call would be fine (e.g.
reduce_scatter_allgather allreduce on 2 ranks). Enum CVARs are integers through
MPI_T: the code of a name is its position in the description (checked against
the library by reading back what the environment sets). The shim restores the
previous values around communicator creation and MPI_Finalize.
``MPIR_CVAR_DEVICE_COLLECTIVES=none`` (environment) keeps ch4's own collectives
from taking the call before the MPIR selection. Selector ``default``: nothing.

Parameters (radix, tree shape, pipeline chunk: providers/mpich_params.py): a label
such as ``tree[k=4]`` is forced with its control variables (MPIR_CVAR_BCAST_TREE_KVAL=4)
in the environment, which only the forced algorithm reads; with ``tune_presets`` a
campaign also measures PRESETS' variants.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
from pathlib import Path

from ..errors import BackendError, BuildError
from . import PROVIDERS
from .base import (ALGORITHM, COLLECTIVES, SELECTOR, Algorithm, LaunchMods, Provider,
                   with_presets)
from .mpich_params import PRESETS, forcing_env, invalid, tunable
from .openmpi import LabelledMods

# colltune collective -> MPICH's <COLL> in MPIR_CVAR_<COLL>_INTRA_ALGORITHM.
MPICH_NAME = {
    "bcast": "BCAST", "reduce": "REDUCE", "allreduce": "ALLREDUCE",
    "allgather": "ALLGATHER", "gather": "GATHER", "scatter": "SCATTER",
    "alltoall": "ALLTOALL", "reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    "barrier": "BARRIER",
}
assert set(MPICH_NAME) == set(COLLECTIVES)

MPIT_SOURCE = r"""/* colltune: print every MPI_T control variable's name and description, or
   (with an argument) the current value of the control variable named (an integer
   one, or a string one) */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int provided, n, i, idx, count, value;
    MPI_T_cvar_handle h;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 1;
    if (argc > 1) {
        static char name[4096], text[4096];
        int name_len = sizeof name, desc_len = 0, verb, bind, scope;
        MPI_Datatype dt; MPI_T_enum et;
        if (MPI_T_cvar_get_index(argv[1], &idx) != MPI_SUCCESS ||
            MPI_T_cvar_get_info(idx, name, &name_len, &verb, &dt, &et, NULL, &desc_len,
                                &bind, &scope) != MPI_SUCCESS ||
            MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return 2;
        if (dt == MPI_CHAR && count < (int)sizeof text) {
            if (MPI_T_cvar_read(h, text) != MPI_SUCCESS) return 2;
            printf("%s\n", text);
        } else {
            if (count != 1 || MPI_T_cvar_read(h, &value) != MPI_SUCCESS) return 2;
            printf("%d\n", value);
        }
        MPI_T_finalize();
        return 0;
    }
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

# LD_PRELOADed into the ranks of a forced launch (-genv, so not into mpiexec).
FORCE_SOURCE = r"""/* colltune MPI_T forcing shim: writes the integer control variables listed in
 * $COLLTUNE_MPIT_CVARS ("NAME=INT,NAME=INT") through MPI_T right after MPI_Init,
 * so that MPICH's internal collectives inside MPI_Init do not use them; they are
 * put back to their previous values around communicator creation and MPI_Finalize
 * (which use collectives internally too) and written again afterwards. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 16
static int nv, saved[MAXV], wanted[MAXV];
static MPI_T_cvar_handle handles[MAXV];

static void apply(int forced) {
    for (int i = 0; i < nv; i++)
        MPI_T_cvar_write(handles[i], forced ? &wanted[i] : &saved[i]);
}

static void setup(void) {
    const char *spec = getenv("COLLTUNE_MPIT_CVARS");
    int provided, idx, count;
    if (!spec || !*spec) return;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    char *copy = strdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && nv < MAXV;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        if (MPI_T_cvar_get_index(item, &idx) != MPI_SUCCESS ||
            MPI_T_cvar_handle_alloc(idx, NULL, &handles[nv], &count) != MPI_SUCCESS ||
            count != 1 || MPI_T_cvar_read(handles[nv], &saved[nv]) != MPI_SUCCESS) {
            fprintf(stderr, "colltune-mpit-force: cannot write %s through MPI_T\n", item);
            MPI_Abort(MPI_COMM_WORLD, 70);
        }
        wanted[nv++] = atoi(eq + 1);
    }
    free(copy);
    apply(1);
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) setup();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup();
    return rc;
}

#define AROUND(call) do { apply(0); int rc_ = (call); apply(1); return rc_; } while (0)
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *o) { AROUND(PMPI_Comm_split(c, color, key, o)); }
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *o) { AROUND(PMPI_Comm_dup(c, o)); }
int MPI_Comm_create(MPI_Comm c, MPI_Group g, MPI_Comm *o) { AROUND(PMPI_Comm_create(c, g, o)); }
int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int tag, MPI_Comm *o) {
    AROUND(PMPI_Comm_create_group(c, g, tag, o));
}
int MPI_Comm_split_type(MPI_Comm c, int t, int key, MPI_Info i, MPI_Comm *o) {
    AROUND(PMPI_Comm_split_type(c, t, key, i, o));
}
int MPI_Finalize(void) { apply(0); return PMPI_Finalize(); }
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


def _tools_dir(impl, cache_dir: str) -> Path:
    digest = hashlib.sha256((MPIT_SOURCE + FORCE_SOURCE).encode()).hexdigest()[:12]
    return Path(cache_dir).resolve() / f"mpich-{impl.identity()}-mpit-{digest}"


def _compile(impl, argv: list[str], what: str) -> None:
    proc = subprocess.run([impl.cc, *argv], capture_output=True, text=True, env=impl.run_env())
    if proc.returncode != 0:
        raise BuildError(f"building {what} with {impl.cc} failed:\n"
                         f"{proc.stdout[-1000:]}{proc.stderr[-2000:]}")


def mpit_tools(impl, cache_dir: str) -> tuple[Path, Path]:
    """(MPI_T lister, forcing shim) built with impl's mpicc, once per identity."""
    out = _tools_dir(impl, cache_dir)
    out.mkdir(parents=True, exist_ok=True)
    lister, shim = out / "colltune-mpit", out / "libcolltune-mpit-force.so"
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lister.exists():
            (out / "mpit.c").write_text(MPIT_SOURCE)
            _compile(impl, [str(out / "mpit.c"), "-o", str(lister)], "the MPI_T lister")
        if not shim.exists():
            (out / "force.c").write_text(FORCE_SOURCE)
            _compile(impl, ["-shared", "-fPIC", "-O2", str(out / "force.c"), "-o", str(shim)],
                     "the MPI_T forcing shim")
    return lister, shim


def mpit_listing(impl, cache_dir: str) -> str:
    """The MPI_T lister's output for impl (cached next to it)."""
    lister, _ = mpit_tools(impl, cache_dir)
    listing = lister.parent / "cvars.txt"
    if listing.exists():
        return listing.read_text()
    try:
        run = subprocess.run([str(lister)], capture_output=True, text=True, env=impl.run_env(),
                             timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BackendError(f"{lister} (MPI_T listing) hung for 60 s") from None
    if run.returncode != 0 or "@@end" not in run.stdout:
        raise BackendError(f"{lister} (MPI_T listing) failed (exit {run.returncode}): "
                           f"{(run.stdout + run.stderr)[-1000:]}")
    tmp = listing.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(run.stdout)
    os.replace(tmp, listing)
    return run.stdout


def algorithm_cvar(collective: str) -> str:
    return f"MPIR_CVAR_{MPICH_NAME[collective]}_INTRA_ALGORITHM"


# Enumerated values that are not CPU algorithms to tune: `ccl` hands the call
# to NCCL/RCCL; on a build without them it still completes when forced (so its
# times belong to whatever ran instead), and a CSEL file selecting it makes
# MPICH 5.0.2 segfault in MPI_Init (found by `colltune verify`).
NOT_CANDIDATES = {"ccl": "needs an accelerator collective library (NCCL/RCCL)"}


@PROVIDERS.register("mpich")
class MPICHProvider(Provider):
    name = "mpich"
    description = "MPICH algorithms (MPIR_CVAR_<COLL>_INTRA_ALGORITHM, fallback=error)"
    backends = ("local",)
    default_baselines = ("default",)

    def __init__(self, impl, cache_dir: str = ".colltune-cache", presets: bool = True):
        self.impl = impl
        self.presets = presets
        self.lister, self.shim = mpit_tools(impl, cache_dir)
        self.cvars = parse_cvars(mpit_listing(impl, cache_dir))
        self._algos: dict[str, list[tuple[str, str]]] = {}
        for coll in COLLECTIVES:
            desc = self.cvars.get(algorithm_cvar(coll))
            if desc is not None:
                self._algos[coll] = [(n, d) for n, d in enum_names(desc)
                                     if n != "auto" and n not in NOT_CANDIDATES]
        if not self._algos:
            raise BackendError(f"MPICH at {impl.cc} lists no MPIR_CVAR_*_INTRA_ALGORITHM "
                               f"control variables through MPI_T")
        if "error" not in self.choices("MPIR_CVAR_COLLECTIVE_FALLBACK"):
            raise BackendError(f"MPICH at {impl.cc} has no MPIR_CVAR_COLLECTIVE_FALLBACK=error: "
                               f"forced algorithms could fall back silently")
        self._device_none = "none" in self.choices("MPIR_CVAR_DEVICE_COLLECTIVES")

    # -- discovery -----------------------------------------------------------
    def choices(self, cvar: str) -> list[str]:
        """The names an enumerated CVAR accepts, in the description's order."""
        return [n for n, _ in enum_names(self.cvars.get(cvar, ""))]

    def code(self, cvar: str, name: str) -> int:
        """The integer MPI_T reads and writes for ``name``: its position in the
        description (MPICH generates both from one list; the test reads them back)."""
        try:
            return self.choices(cvar).index(name)
        except ValueError:
            raise BackendError(f"{cvar} has no value {name!r}; it has "
                               f"{', '.join(self.choices(cvar))}") from None

    def read_cvar(self, cvar: str, env: dict[str, str] | None = None) -> int | str:
        """The value MPI_T reports for cvar with this environment (no MPI_Init): an
        integer, or the text of a string control variable."""
        run = subprocess.run([str(self.lister), cvar], capture_output=True, text=True,
                             timeout=60, env={**self.impl.run_env(), **(env or {})})
        if run.returncode != 0:
            raise BackendError(f"{self.lister} {cvar} failed (exit {run.returncode})")
        value = run.stdout.rstrip("\n")
        return int(value) if re.fullmatch(r"-?\d+", value) else value

    def collectives(self) -> list[str]:
        return [c for c in COLLECTIVES if self._algos.get(c)]

    def algorithms(self, collective: str) -> list[Algorithm]:
        """Every algorithm, then (presets) the parametrised ones with PRESETS' values."""
        plain = [Algorithm(self.name, collective, n, ALGORITHM, description=d)
                 for n, d in self._algos.get(collective, [])]
        if not self.presets:
            return plain
        return with_presets(plain, PRESETS.get(collective, {}))

    def parameters(self, collective: str, name: str) -> dict:
        from ..exporters.mpich_json import func_name
        return tunable(func_name(collective, name))

    def lookup(self, collective: str, name: str) -> Algorithm:
        """Provider.lookup, and the parameters checked together (mpich_params.invalid)."""
        from ..errors import ConfigError
        from ..exporters.mpich_json import func_name
        alg = super().lookup(collective, name)
        why = invalid(func_name(collective, alg.name), dict(alg.params)) if alg.params else None
        if why:
            raise ConfigError(f"mpich {collective} {alg.label}: {why}")
        return alg

    def selectors(self, collective: str) -> list[Algorithm]:
        if collective not in self.collectives():
            return []
        return [Algorithm(self.name, collective, "default", SELECTOR,
                          description="MPICH untouched (auto selection, device collectives on)")]

    # -- forcing ---------------------------------------------------------------
    def force(self, algorithm: Algorithm, fallback: str = "error") -> LaunchMods:
        if algorithm.kind == SELECTOR:
            return LabelledMods(labels={"forced": "none (library default)"})
        if algorithm.name not in {n for n, _ in self._algos.get(algorithm.collective, [])}:
            self.lookup(algorithm.collective, algorithm.name)   # raises, listing the names
        cvar = algorithm_cvar(algorithm.collective)
        through_mpit = {cvar: algorithm.name, "MPIR_CVAR_COLLECTIVE_FALLBACK": fallback}
        env = {"COLLTUNE_MPIT_CVARS": ",".join(
            f"{k}={self.code(k, v)}" for k, v in through_mpit.items())}
        forced = " ".join(f"{k}={v}" for k, v in through_mpit.items()) + " (MPI_T after MPI_Init)"
        if algorithm.params:
            # the algorithm's own parameters: read only when it runs (forced), so from
            # the environment; MPI_Init's internal collectives take the built-in tree's
            from ..exporters.mpich_json import func_name
            params = forcing_env(func_name(algorithm.collective, algorithm.name),
                                 dict(algorithm.params))
            env.update(params)
            forced += "".join(f" {k}={v}" for k, v in params.items())
        if self._device_none:
            env["MPIR_CVAR_DEVICE_COLLECTIVES"] = "none"
            forced += " MPIR_CVAR_DEVICE_COLLECTIVES=none"
        return LabelledMods(launcher_args=["-genv", "LD_PRELOAD", str(self.shim)], env=env,
                            labels={"forced": forced, "ran": algorithm.name})
