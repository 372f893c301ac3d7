"""`colltune slurm info|script|submit`: Slurm batch jobs that run a campaign,
and the slurm settings as options of `bench` and `tune` (docs/slurm.md)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

# setting -> (option, help); every one also has COLLTUNE_<KEY> and a config-file key.
SBATCH_OPTIONS = {
    "slurm_partition": ("--partition", "partition of the batch job"),
    "slurm_account": ("--account", "account charged"),
    "slurm_time": ("--time", "time limit (Slurm syntax, e.g. 2:00:00)"),
    "slurm_sbatch_args": ("--sbatch-args", "extra sbatch options, shell words"),
}
STEP_OPTIONS = {
    "slurm_mpi": ("--slurm-mpi", "srun --mpi plugin (auto: pmix for Open MPI, pmi2 for MPICH)"),
    "slurm_srun_args": ("--slurm-srun-args", "extra srun options of every step, shell words"),
}


def _add(p: argparse.ArgumentParser, options: dict, title: str) -> None:
    g = p.add_argument_group(title)
    for key, (flag, helptext) in options.items():
        g.add_argument(flag, dest=key, help=helptext)


def add_parser(sub) -> None:
    from ..cli import add_globals
    for name in ("bench", "tune"):           # the backend's own settings, on the commands
        if name in sub.choices:              # that run it
            _add(sub.choices[name], STEP_OPTIONS, "slurm backend (--backend slurm)")
    p = sub.add_parser("slurm", help="Slurm: batch scripts running a campaign as srun steps")
    ss = p.add_subparsers(dest="slurm_command", required=True)
    q = ss.add_parser("info", help="the allocation colltune is in, srun's MPI plugins")
    add_globals(q)
    q.set_defaults(handler=cmd_info)
    for name, helptext in (("script", "write an sbatch script running a campaign"),
                           ("submit", "write the script and sbatch it")):
        q = ss.add_parser(name, help=helptext, description=(
            "Arguments after `--` are the campaign command, e.g. `colltune slurm %s "
            "--time 2:00:00 -- tune --collectives bcast --layouts 2x4 --sizes 8..1M`. "
            "Settings given here (options or COLLTUNE_* variables) are exported in the "
            "script; the campaign command's own options win over them." % name))
        add_globals(q)
        _add(q, SBATCH_OPTIONS, "batch job")
        _add(q, STEP_OPTIONS, "steps")
        q.add_argument("--nodes", type=int, dest="alloc_nodes",
                       help="nodes to allocate (default: largest layout x --jobs)")
        q.add_argument("-o", "--output", help="script path (default: stdout for `script`, "
                                              "OUTPUT_DIR/<job name>.sbatch for `submit`)")
        if name == "submit":
            q.add_argument("--wait", action="store_true",
                           help="wait for the job to end (sbatch --wait); exit with its status")
        q.add_argument("campaign", nargs=argparse.REMAINDER,
                       help="-- tune|bench ... (the campaign command)")
        q.set_defaults(handler=cmd_script if name == "script" else cmd_submit)


def _inner(args) -> list[str]:
    inner = list(args.campaign)
    if inner and inner[0] == "--":
        inner = inner[1:]
    return inner


def _script(args, cli):
    from ..session import Session
    from ..slurm.script import batch_script
    settings = Session(cli, args.config).settings
    return settings, batch_script(_inner(args), settings, args.alloc_nodes)


def cmd_script(args, cli) -> int:
    _, script = _script(args, cli)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(script.text)
        os.chmod(args.output, 0o755)
        print(f"wrote {args.output}: {script.nodes} nodes x {script.ppn} tasks; "
              f"submit with: sbatch {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(script.text)
    return 0


def cmd_submit(args, cli) -> int:
    from .. import slurm
    from ..errors import BackendError
    settings, script = _script(args, cli)
    path = args.output or os.path.join(settings.output_dir, f"{script.job_name}.sbatch")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(script.text)
    argv = [slurm.tool("sbatch"), "--parsable", *(["--wait"] if args.wait else []), path]
    # sbatch --wait prints the job id at once and then waits: read it as it comes, so the
    # user learns which job to watch or cancel (it had waited silently, even for a job
    # that could never start)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    job = (proc.stdout.readline() if proc.stdout else "").strip().split(";")[0]
    if not job:
        err = proc.communicate()[1]
        raise BackendError(f"`{' '.join(argv)}` exited {proc.returncode}: {err.strip()[-600:]}")
    print(f"submitted {path} as job {job} ({script.nodes} node(s), {script.ppn} task(s) per "
          f"node)", flush=True)
    if not args.wait:
        proc.wait()
        return 0
    said = ""
    while True:
        try:
            proc.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            why = slurm.pending_reason(job)
            if why and why != said and why not in ("Priority", "Resources", "None"):
                print(f"job {job} is pending: {why} (it asks for {script.nodes} node(s): "
                      f"--nodes, or fewer concurrent steps with --jobs, make it smaller; "
                      f"scancel {job} to give up)", file=sys.stderr, flush=True)
                said = why
    print(f"job {job} ended with exit code {proc.returncode}")
    return proc.returncode


def cmd_info(args, cli) -> int:
    from .. import slurm
    from ..errors import BackendError
    print(f"srun: {slurm.tool('srun')} (Slurm {slurm.version()})")
    print(f"srun --mpi plugins: {', '.join(slurm.mpi_plugins())}")
    try:
        a = slurm.allocation()
    except BackendError as exc:
        print(f"allocation: none ({exc})")
        return 0
    print(f"allocation: job {a.job_id} on cluster {a.cluster or '?'} partition "
          f"{a.partition or '?'}: {len(a.nodes)} nodes")
    for node, cpus in zip(a.nodes, a.cpus):
        print(f"  {node:<20} {cpus} CPUs")
    return 0
