"""Batch scripts that run one whole ``colltune tune`` / ``colltune bench`` campaign
inside a Slurm allocation with the slurm backend.

The allocation is sized from the campaign itself: enough whole nodes for the
largest layout times the concurrent launches (``--jobs``), so that that many
steps run side by side on disjoint nodes, and ``--ntasks-per-node`` = the
largest ppn so Slurm only picks nodes with that many CPUs. ``--exclusive``:
nobody else's job shares the nodes being timed.
"""
from __future__ import annotations

import datetime as _dt
import os
import shlex
import sys
from dataclasses import dataclass

from .. import __version__
from ..errors import ColltuneError, ConfigError

CAMPAIGN_COMMANDS = ("tune", "bench")


@dataclass
class BatchScript:
    text: str
    job_name: str
    nodes: int
    ppn: int
    command: list[str]


def _words(settings, key: str) -> list[str]:
    try:
        return shlex.split(settings.values[key])
    except ValueError as exc:
        raise ConfigError(f"setting {key} from {settings.source_of(key)}: {exc}") from None


def campaign_shape(inner: list[str]) -> tuple[object, list[tuple[int, int]]]:
    """Parse the campaign command with colltune's own parser: (args, layouts)."""
    from ..backends.slurm import SlurmBackend
    from ..cli import build_parser
    from ..commands import _layouts
    if not inner or inner[0] not in CAMPAIGN_COMMANDS:
        raise ColltuneError(f"a batch script runs one of: {', '.join(CAMPAIGN_COMMANDS)} "
                            f"(got {' '.join(inner) or 'nothing'}); e.g. "
                            f"`colltune slurm script -- tune --layouts 2x4 --sizes 8..1M`")
    args = build_parser().parse_args(inner)
    if args.backend not in (None, SlurmBackend.name):
        raise ColltuneError(f"the batch script runs the {SlurmBackend.name} backend, "
                            f"not --backend {args.backend}")
    return args, _layouts(args)


def batch_script(inner: list[str], settings, nodes: int | None = None,
                 cwd: str | None = None, python: str | None = None) -> BatchScript:
    """The sbatch script of campaign command ``inner`` (e.g. ['tune', '--layouts', '2x4'])."""
    from ..backends.slurm import SlurmBackend
    args, layouts = campaign_shape(inner)
    max_nodes = max(n for n, _ in layouts)
    ppn = max(p for _, p in layouts)
    jobs = args.jobs or settings.jobs
    nodes = nodes or max_nodes * jobs
    if nodes < max_nodes:
        raise ColltuneError(f"--nodes {nodes}: the largest layout needs {max_nodes} nodes")
    cwd = os.path.abspath(cwd or os.getcwd())
    command = [python or sys.executable, "-m", "colltune.cli", *inner]
    if args.backend is None:
        command += ["--backend", SlurmBackend.name]
    job_name = f"colltune-{args.campaign or inner[0]}"
    out_dir = os.path.abspath(os.path.join(cwd, settings.output_dir))
    sbatch = [f"--job-name={job_name}", f"--nodes={nodes}", f"--ntasks-per-node={ppn}",
              "--exclusive", f"--output={out_dir}/slurm-%x-%j.out"]
    for key, option in (("slurm_partition", "partition"), ("slurm_account", "account"),
                        ("slurm_time", "time")):
        if settings.values[key]:
            sbatch.append(f"--{option}={settings.values[key]}")
    sbatch += _words(settings, "slurm_sbatch_args")
    # Settings given to `colltune slurm script` itself (its options or COLLTUNE_*
    # variables) hold in the job too; the campaign command's own options win.
    frozen = {f"COLLTUNE_{k.upper()}": str(v) for k, v in settings.values.items()
              if k != "backend" and (settings.source_of(k) == "command line"
                                     or settings.source_of(k).startswith("environment"))}
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["#!/bin/bash",
             f"# colltune {__version__} batch job, written by `colltune slurm script` on {when}.",
             f"# {len(layouts)} layout(s), up to {max_nodes} nodes and {ppn} ranks per node; {jobs} concurrent srun "
             f"step(s) on disjoint nodes. Guide: docs/slurm.md",
             *(f"#SBATCH {shlex.quote(o)}" for o in sbatch),
             "set -euo pipefail",
             f"cd {shlex.quote(cwd)}",
             *(f"export {k}={shlex.quote(v)}" for k, v in sorted(frozen.items())),
             f"echo \"colltune: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST\"",
             "exec " + shlex.join(command), ""]
    os.makedirs(out_dir, exist_ok=True)    # sbatch does not create the --output folder
    return BatchScript("\n".join(lines), job_name, nodes, ppn, command)
