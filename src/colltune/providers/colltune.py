"""colltune's own collective algorithms (native/algorithms) as a provider.

The algorithms are read from the native catalogue itself (``colltune-rules
list``, built against the backend's MPI), never listed here. A benchmark launch
runs the ordinary bench under the interposer (libcolltune) with
``COLLTUNE_FORCE=<coll>:<alg>[:k=v,...]``: on SMPI the bench linked with
libcolltune.a (``colltune-bench-interposed``), on a real MPI the same bench with
libcolltune.so preloaded into the ranks. ``COLLTUNE_REPORT`` makes the
interposer write what really ran at each (communicator size, bytes) — the
algorithm, or ``library`` when it declined — and every record is labelled with
it. The library's own selectors stay available as baselines (forced by the
backend's library provider, without the interposer).

Build helpers here are shared with ``colltune run``.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from .. import native
from ..errors import BackendError
from . import PROVIDERS
from .base import ALGORITHM, Algorithm, LaunchMods, Provider
from .openmpi import LabelledMods

_TINY_PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><cluster id="l" prefix="l-" radical="0-0" suffix="" speed="1Gf"
 bw="1GBps" lat="1us"/></platform>
"""


def libcolltune(impl, cache_dir: str) -> Path:
    """libcolltune built against impl: the archive for SMPI (linked into the
    program), the shared object for a real MPI (LD_PRELOAD)."""
    return native.build(impl, "intercept", cache_dir,
                        product="libcolltune.a" if impl.library.simulated else "libcolltune.so")


def link_args(lib: Path) -> list[str]:
    """smpicc arguments that link every interposed symbol in."""
    return ["-Wl,--whole-archive", str(lib), "-Wl,--no-whole-archive", "-lm"]


def preload_args(impl, lib: Path) -> list[str]:
    """mpiexec arguments that preload lib into the ranks only (not into mpiexec)."""
    if not impl.library.rank_env:
        raise BackendError(f"no LD_PRELOAD recipe for {impl.name}")
    return impl.library.to_ranks("LD_PRELOAD", lib)


def rules_tool_command(impl, cache_dir: str, workdir: str) -> list[str]:
    """How to run `colltune-rules` built against impl (smpirun -np 1 on SMPI)."""
    tool = native.build(impl, "rules-tool", cache_dir, product="colltune-rules")
    if not impl.library.simulated:
        return [str(tool)]
    plat, hosts = os.path.join(workdir, "p.xml"), os.path.join(workdir, "h")
    Path(plat).write_text(_TINY_PLATFORM)
    Path(hosts).write_text("l-0\n")
    return [impl.launcher, "-np", "1", "-platform", plat, "-hostfile", hosts,
            "--log=root.thres:critical", str(tool)]


@lru_cache(maxsize=8)
def _listing(impl, cache_dir: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = rules_tool_command(impl, cache_dir, tmp) + ["list"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp,
                              env=impl.run_env())
    if proc.returncode != 0:
        raise BackendError(f"listing colltune's algorithms failed ({' '.join(cmd)}): "
                           f"{(proc.stdout + proc.stderr)[-800:]}")
    return proc.stdout


def catalogue(impl, cache_dir: str) -> dict:
    """The native catalogue ({"algorithms": [{collective, name, params...}]})."""
    text = _listing(impl, str(Path(cache_dir).resolve()))
    try:
        start = text.index("{")
        return json.loads(text[start:text.rindex("}") + 1])
    except ValueError as exc:
        raise BackendError(f"colltune-rules list printed no catalogue: {exc}: {text[-400:]}") from None


def force_spec(algorithm: Algorithm) -> str:
    """COLLTUNE_FORCE value for one algorithm with its parameters."""
    spec = f"{algorithm.collective}:{algorithm.name}"
    if algorithm.params:
        spec += ":" + ",".join(f"{k}={v}" for k, v in algorithm.params)
    return spec


def read_report(path: str) -> list[dict]:
    """The interposer's COLLTUNE_REPORT lines (a torn last line is ignored)."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except OSError:
        pass
    return out


# A report line's "guard" field (COLLTUNE_GUARD, native/intercept/intercept.c): the
# guard's phase at that call; lines of unguarded calls have none.
GUARD_TRYING, GUARD_KEPT, GUARD_LIBRARY = "trying", "kept", "library"


def guard_decided(lines: list[dict]) -> list[dict]:
    """The report lines of calls that ran a decision: all but the guard's exploration."""
    return [r for r in lines if r.get("guard") != GUARD_TRYING]


def ran_labels(report: str, algorithm: Algorithm, rec: dict) -> dict:
    """What really ran at a bench record's point, from the interposer's report."""
    for r in read_report(report):
        if (r.get("collective") == rec.get("collective") and r.get("comm_size") == rec.get("participants")
                and r.get("bytes") == rec.get("bytes")):
            if r.get("ran") == algorithm.name:
                return {"ran": algorithm.name}
            return {"ran": r.get("ran"), "switched_from": algorithm.label}
    return {"ran": "unknown (the interposer reported no call at this point)"}


@PROVIDERS.register("colltune")
class ColltuneProvider(Provider):
    name = "colltune"
    description = "colltune's own algorithms, run through the interposer (COLLTUNE_FORCE)"
    backends = ("sim", "local")
    on_library = True

    def __init__(self, backend, library: Provider):
        impl = backend.impl
        self.library, self.impl = library, impl
        self.default_baselines = library.default_baselines
        cache = backend.settings.cache_dir
        self._algs: dict[str, list[Algorithm]] = {}
        self._params: dict[tuple[str, str], dict] = {}
        presets = backend.settings.values.get("tune_presets", True)
        for a in catalogue(impl, cache)["algorithms"]:
            self._params[(a["collective"], a["name"])] = {p["name"]: p for p in a["params"]}
            self._algs.setdefault(a["collective"], []).append(
                Algorithm(self.name, a["collective"], a["name"], ALGORITHM,
                          description=a.get("description", "")))
            for preset in (a.get("tune") or []) if presets else []:
                self._algs[a["collective"]].append(self.lookup(a["collective"], f"{a['name']}[{preset}]"))
        # the build the launches run, which each point records (reuse_labels): hashed once
        # here, not again for every spec and launch
        self._build = native.sources_hash()
        if impl.library.simulated:
            self._inject = LaunchMods(program=str(native.build(impl, "bench-interposed", cache)))
        else:
            self._inject = LaunchMods(launcher_args=preload_args(impl, libcolltune(impl, cache)))
        self._reports = tempfile.mkdtemp(prefix="colltune-reports-")
        atexit.register(shutil.rmtree, self._reports, True)

    def collectives(self) -> list[str]:
        return [c for c in self.library.collectives() if c in self._algs] + \
            [c for c in self._algs if c not in self.library.collectives()]

    def algorithms(self, collective: str) -> list[Algorithm]:
        return list(self._algs.get(collective, []))

    def selectors(self, collective: str) -> list[Algorithm]:
        return self.library.selectors(collective)

    def parameters(self, collective: str, name: str) -> dict:
        """{param: {default, min, max, unit}} from the catalogue."""
        return dict(self._params.get((collective, name), {}))

    def reuse_labels(self, algorithm: Algorithm) -> dict[str, str | None]:
        """The build of libcolltune: an algorithm's code edited since a point was measured
        makes that point another algorithm's (a developer's bench had kept showing the old
        code's time)."""
        if algorithm.provider != self.name:
            return self.library.reuse_labels(algorithm)
        return {"build": self._build}

    def force(self, algorithm: Algorithm) -> LaunchMods:
        if algorithm.provider != self.name:
            return self.library.force(algorithm)      # a library selector: no interposer
        spec = force_spec(algorithm)
        fd, report = tempfile.mkstemp(prefix="report-", suffix=".jsonl", dir=self._reports)
        os.close(fd)
        return LabelledMods(launcher_args=list(self._inject.launcher_args),
                            env={"COLLTUNE_FORCE": spec, "COLLTUNE_REPORT": report},
                            program=self._inject.program,
                            labels={"forced": f"COLLTUNE_FORCE={spec}", **self.reuse_labels(algorithm)},
                            per_point=lambda rec: ran_labels(report, algorithm, rec))


def catalogue_text(backend) -> str:
    """`colltune info -A` (as ucc_info -A): every algorithm of colltune's catalogue
    with its id, description, parameters (default, range, unit, meaning) and presets."""
    lines = []
    by_coll: dict[str, list[dict]] = {}
    for a in catalogue(backend.impl, backend.settings.cache_dir)["algorithms"]:
        by_coll.setdefault(a["collective"], []).append(a)
    for coll, algs in by_coll.items():
        lines.append(f"{coll}:")
        for a in sorted(algs, key=lambda a: a["id"]):
            lines.append(f"  {a['id']:>2} {a['name']}: {a['description']}")
            for p in a["params"]:
                unit = f" {p['unit']}" if p["unit"] else ""
                lines.append(f"       {p['name']} = {p['default']}{unit} "
                             f"[{p['min']}..{p['max']}]: {p.get('help', '')}")
            if a.get("tune"):
                lines.append(f"       tuning presets: {'; '.join(a['tune'])}")
    return "\n".join(lines)


def info_listing(backend) -> dict:
    """For `colltune info`: {coll: {algorithms, selectors}} from the catalogue
    built against the backend's MPI (selectors: the library's, as baselines)."""
    out: dict = {}
    library = backend.provider()
    for a in catalogue(backend.impl, backend.settings.cache_dir)["algorithms"]:
        coll = out.setdefault(a["collective"], {
            "algorithms": [], "presets": [],
            "selectors": [s.name for s in library.selectors(a["collective"])]})
        coll["algorithms"].append(a["name"])
        coll["presets"] += [f"{a['name']}[{t}]" for t in a.get("tune") or []]
        coll.setdefault("catalogue", []).append(a)        # id, description, params (info --json)
    return out
