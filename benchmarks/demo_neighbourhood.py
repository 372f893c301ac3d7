#!/usr/bin/env python3
"""Where the demo program's time goes: one call size sent back to the library, the rest deployed.

    make demo                                            # writes results/demo-deploy
    .venv/bin/python benchmarks/demo_neighbourhood.py    # about 30 s; prints and writes
                                                         # benchmarks/results/demo_neighbourhood/collmix-8x4.txt
    .venv/bin/python benchmarks/demo_neighbourhood.py --to-library allreduce:8   # -> collmix-8x4-allreduce-8.txt

`make demo` runs src/colltune/apps/collmix.c on 8x4 under the library default and under the
deployment; the program times every call on every rank as it comes (no barrier), so a call's
time includes the wait for ranks the previous call left behind. This runs the same program,
for 1, 20 and 100 iterations, three ways: the library default, the deployment, and the
deployment with the rules of one collective and size (--to-library, default the 64 B bcast)
sent to the library, and prints that call's row and the program's total for each. If the
call's row is as slow with the library in the deployment's neighbourhood, the row's loss
is the neighbourhood's skew, not the deployed algorithm. With 1 iteration the 64 B bcast
is the program's first call, where HAN builds its node and leader communicators.
SimGrid time: deterministic.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune.commands import _parse_collmix
from colltune.exporters.colltune_rules import LIBRARY, match, read_rules

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "src" / "colltune" / "apps" / "collmix.c"
OUT = REPO / "benchmarks" / "results" / "demo_neighbourhood"


def to_library(rules_path: Path, coll: str, nbytes: int, nodes: int, ppn: int) -> tuple[str, int]:
    """The rules text with the rule the interposer applies to (coll, nodes x ppn, nbytes)
    sent to the library, and that rule's line number (0: no rule, the library already)."""
    rule = match(read_rules(str(rules_path)), coll, nodes * ppn, nodes, ppn, nbytes)
    if rule and rule.algorithm == LIBRARY:
        rule = None
    lines = rules_path.read_text().splitlines()
    if rule:
        head = lines[rule.line - 1].split("->", 1)[0]
        lines[rule.line - 1] = f"{head}-> library"
    return "\n".join(lines) + "\n", rule.line if rule else 0


def run(extra: list[str], iters: int) -> dict:
    cmd = [sys.executable, "-m", "colltune.cli", "run", "--quiet", "--backend", "sim",
           "--platform", "small", *extra, "--layout", "8x4", "--", str(APP), str(iters)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return _parse_collmix(proc.stdout, " ".join(cmd))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deployment", default=str(REPO / "results" / "demo-deploy"))
    ap.add_argument("--to-library", default="bcast:64", help="COLL:BYTES sent to the library (default bcast:64)")
    ap.add_argument("--selector", default="ompi", help="the library default the deployment runs with")
    a = ap.parse_args()
    rules_path = Path(a.deployment) / "colltune.rules"
    if not rules_path.exists():
        raise SystemExit(f"{rules_path}: no deployment there; run `make demo` first (or give --deployment DIR)")
    coll, nbytes = a.to_library.split(":")
    text, line = to_library(rules_path, coll, int(nbytes), 8, 4)
    if not line:
        raise SystemExit(f"{rules_path}: no rule sends {coll} {nbytes} B on 8x4 anywhere but the library")
    lines = [f"collmix on 8x4 (SimGrid, small platform): time in the {coll} {nbytes} B calls and in all "
             f"collectives, max over ranks of each rank's sum, us",
             f"deployment: {os.path.relpath(a.deployment, REPO)}; variant: its rule for "
             f"{coll} {nbytes} B on 8x4 (line {line}) sent to the library ({a.selector})", "",
             f"{'iterations':>10}  {'run':<38} {coll + ' ' + nbytes + ' B':>14} {'total':>11}"]
    with tempfile.TemporaryDirectory(prefix="demo-nb-") as tmp:
        variant = Path(tmp) / "variant.rules"
        variant.write_text(text)
        for iters in (1, 20, 100):       # 1: the call row is the program's first call
            for name, extra in ((f"library default ({a.selector})", ["--default-selector", a.selector]),
                                ("deployment", ["--deployment", a.deployment]),
                                (f"deployment, {coll} {nbytes} B to the library",
                                 ["--default-selector", a.selector, "--rules", str(variant)])):
                r = run(extra, iters)
                row = r["calls"][(coll, int(nbytes))][1]
                lines.append(f"{iters:>10}  {name:<38} {row * 1e6:>14.1f} {r['total'] * 1e6:>11.1f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    OUT.mkdir(parents=True, exist_ok=True)
    name = "collmix-8x4" + ("" if a.to_library == "bcast:64" else
                            "-" + a.to_library.replace(":", "-"))
    (OUT / f"{name}.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
