"""Simulated cluster: SimGrid SMPI (the embedded default backend)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .. import native
from ..errors import BackendError
from . import BACKENDS
from .base import Backend, Launch, LaunchResult, apply_labels, choose_provider, run_process

# SimGrid's informational chatter is noise in our logs; errors stay visible.
QUIET_LOGS = ["--log=xbt_cfg.thres:warning", "--log=smpi_config.thres:error"]
# SMPI_SHARED_MALLOC maps its block once per block of every shared buffer, and all
# maps must stay below vm.max_map_count (65530): 1 MiB blocks ran out at 256 ranks x
# 64 MiB of buffers and scratch; 16 MiB blocks map 16x less. Memory only: no timing.
SHARED_BLOCK = "--cfg=smpi/shared-malloc-blocksize:16777216"


_noted: set[str] = set()


def _note_once(text: str) -> None:
    """One stderr line per process (a campaign prepares its backend more than once)."""
    if text not in _noted:
        _noted.add(text)
        print(text, file=sys.stderr)


@BACKENDS.register("sim")
class SimBackend(Backend):
    name = "sim"
    description = "simulated cluster on SimGrid SMPI (deterministic timings)"
    run_settings = ("smpi_config", "charge_rates")
    simulated = True

    def __init__(self, settings, platform: str | None = None):
        self.settings = settings
        self.platform_name = platform or settings.platform
        self.impl = None
        self.bench = None
        self.platform = None
        self._provider = None

    def prepare(self) -> None:
        from .. import mpi, platforms
        try:
            self.impl = mpi.find("smpi")
        except mpi.MPINotFound as exc:
            raise BackendError(str(exc)) from None
        try:
            self.platform = platforms.load(self.platform_name)
        except platforms.PlatformError as exc:
            raise BackendError(str(exc)) from None
        if not self.platform.smpi_config:
            _note_once(f"colltune: platform {self.platform.name!r} has no SMPI settings (no sidecar "
                       f"{Path(self.platform.xml_path).with_suffix('.json').name} with smpi_config): "
                       f"SMPI's defaults simulate it (no per-message overheads, Ethernet-calibrated "
                       f"bandwidth and latency factors; docs/platforms.md)")
        self.bench = native.build(self.impl, "bench", self.settings.cache_dir)

    def provider(self):
        if self._provider is None:
            from ..providers.smpi import SMPIProvider
            self._provider = choose_provider(self, SMPIProvider(self.impl.launcher, str(self.bench)))
        return self._provider

    def max_ppn(self) -> int:
        return self.platform.cores_per_node

    def max_nodes(self) -> int:
        return self.platform.nodes

    def host_groups(self) -> dict[str, list[str]]:
        """Placement units of the platform (leaf switches / dragonfly groups) -> hosts;
        launches placed on disjoint groups share no leaf switch or group (colltune.placement)."""
        return self.platform.groups()

    def provenance(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "platform": self.platform.name,
            "platform_sha256": self.platform.provenance.get("sha256"),
            "mpi_library": "SimGrid SMPI",
            "mpi_version": self.impl.version,
            "smpi_config": self.platform.smpi_config,
            "charge_rates": self.platform.charge_env(),
        }

    def run(self, launch: Launch, workdir: str) -> LaunchResult:
        os.makedirs(workdir, exist_ok=True)
        hostfile = self.platform.write_hostfile(launch.nodes, launch.ppn,
                                                os.path.join(workdir, "hostfile"), launch.hosts)
        json_path = os.path.join(workdir, "records.jsonl")
        if os.path.exists(json_path):
            os.remove(json_path)
        cmd = [self.impl.launcher, "-np", str(launch.nodes * launch.ppn),
               "-platform", self.platform.xml_path, "-hostfile", hostfile,
               *self.platform.smpirun_cfg_args(), *QUIET_LOGS, SHARED_BLOCK, *launch.mods.launcher_args,
               launch.mods.program or str(self.bench), *launch.bench_args, "--shared-buffers",
               "--json", json_path]
        env = {**self.platform.charge_env(), **self.impl.run_env()}
        env.update(launch.mods.env)
        result = run_process(cmd, env, launch.timeout, workdir, json_path)
        apply_labels(launch, result)
        return result

