"""Run colltune-taskbench (native/hier/taskbench.c, docs/hier.md) on the sim backend.

The launch is the sim backend's: same smpirun, platform XML, block hostfile, the
platform's --cfg settings and quiet logs, same process-group timeout
(``backends.base.run_process``). Only the program and its output differ:
taskbench prints one JSON line per task (or whole call) on stdout.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile

from .. import native
from ..backends.base import run_process
from ..backends.sim import QUIET_LOGS
from ..errors import BackendError


def params_arg(params: dict) -> str:
    return ",".join(f"{k}={int(v)}" for k, v in sorted(params.items()))


class TaskRunner:
    """Launches taskbench; ``backend`` is a prepared SimBackend."""

    def __init__(self, backend, settings, workdir: str | None = None):
        if not getattr(backend, "simulated", False):
            raise BackendError(f"the taskmodel tuner measures tasks on the sim backend, "
                               f"not {getattr(backend, 'name', backend)!r}")
        self.backend, self.settings = backend, settings
        self.exe = native.build(backend.impl, "taskbench", settings.cache_dir)
        if workdir is None:         # its own scratch: gone when the process ends
            workdir = tempfile.mkdtemp(prefix="colltune-taskbench-")
            atexit.register(shutil.rmtree, workdir, True)
        self.workdir = workdir

    def launch(self, coll: str, nodes: int, ppn: int, nbytes: int, params: dict,
               tasks: list[str] | None = None, whole: str | None = None,
               reps: int = 1, warmup: int = 1, extra: tuple[str, ...] = ()) -> list[dict]:
        """Records of one launch (kind task or whole); raises BackendError on failure.
        extra: more taskbench options (e.g. --tamper, its checker's self-test)."""
        b = self.backend
        os.makedirs(self.workdir, exist_ok=True)
        hostfile = b.platform.write_hostfile(nodes, ppn, os.path.join(self.workdir, "hostfile"))
        what = ["--tasks", ";".join(tasks)] if tasks else ["--whole", whole]
        cmd = [b.impl.launcher, "-np", str(nodes * ppn), "-platform", b.platform.xml_path,
               "-hostfile", hostfile, *b.platform.smpirun_cfg_args(), *QUIET_LOGS,
               str(self.exe), "--coll", coll, "--bytes", str(nbytes),
               "--params", params_arg(params), "--reps", str(reps), "--warmup", str(warmup),
               *what, *(["--check"] if whole else []), *extra]
        res = run_process(cmd, {**b.platform.charge_env(), **b.impl.run_env()}, float(self.settings.timeout), self.workdir,
                          os.path.join(self.workdir, "none.jsonl"))
        with open(os.path.join(self.workdir, "launch.log"), errors="replace") as fh:
            recs = [json.loads(line) for line in fh if line.startswith('{"kind"')]
        if res.timed_out or res.exit_code != 0 or not recs:
            state = "timeout" if res.timed_out else f"exit code {res.exit_code}"
            raise BackendError(f"taskbench {coll} {nbytes} B {params_arg(params)} on "
                               f"{nodes}x{ppn}: {state}\n$ {' '.join(cmd)}\n{res.output_tail[-1500:]}")
        bad = [r for r in recs if r.get("check") == "wrong_result"]
        if bad:
            raise BackendError(f"taskbench whole {whole} {coll} {nbytes} B "
                               f"{params_arg(params)}: wrong result")
        return recs
