#!/usr/bin/env python3
"""Where the demo program's time goes: one call size sent back to the library, the rest deployed.

    make demo                                            # writes results/demo-deploy
    .venv/bin/python benchmarks/demo_neighbourhood.py    # about 30 s; prints and writes
                                                         # benchmarks/results/demo_neighbourhood/collmix-8x4.txt

`make demo` runs src/colltune/apps/collmix.c on 8x4 under the library default and under the
deployment; the program times every call on every rank as it comes (no barrier), so a call's
time includes the wait for ranks the previous call left behind. This runs the same program,
for 20 and 100 iterations, three ways: the library default, the deployment, and the
deployment with the rules of one collective and size (--to-library, default the 64 B bcast)
sent to the library, and prints that call's row and the program's total for each. If the
call's row is as slow with the library in the deployment's neighbourhood, the row's loss
is the neighbourhood's skew, not the deployed algorithm. SimGrid time: deterministic.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from colltune.commands import _parse_collmix

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "src" / "colltune" / "apps" / "collmix.c"
OUT = REPO / "benchmarks" / "results" / "demo_neighbourhood" / "collmix-8x4.txt"
RULE = re.compile(r"^(?P<coll>\w+) nodes=(?P<nodes>\S+) ppn=(?P<ppn>\S+) bytes=(?P<bytes>\S+) -> ")


def in_range(text: str, n: int) -> bool:
    """n in a rules field: '*', 'a', 'a..b', 'a..'."""
    if text == "*":
        return True
    lo, dots, hi = text.partition("..")
    if not dots:
        return n == int(lo)
    return int(lo) <= n and (hi == "" or n <= int(hi))


def to_library(rules: str, coll: str, nbytes: int, nodes: int, ppn: int) -> tuple[str, int]:
    """The rules text with the lines that send (coll, nodes, ppn, nbytes) anywhere sent to the library."""
    out, changed = [], 0
    for line in rules.splitlines():
        m = RULE.match(line)
        if (m and m["coll"] == coll and in_range(m["nodes"], nodes) and in_range(m["ppn"], ppn)
                and in_range(m["bytes"], nbytes)):
            line, changed = line[:m.end()] + "library", changed + 1
        out.append(line)
    return "\n".join(out) + "\n", changed


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
    text, changed = to_library(rules_path.read_text(), coll, int(nbytes), 8, 4)
    if not changed:
        raise SystemExit(f"{rules_path}: no rule for {coll} {nbytes} B on 8x4")
    lines = [f"collmix on 8x4 (SimGrid, small platform): time in the {coll} {nbytes} B calls and in all "
             f"collectives, max over ranks of each rank's sum, us",
             f"deployment: {os.path.relpath(a.deployment, REPO)}; variant: its {changed} rule(s) for "
             f"{coll} {nbytes} B on 8x4 sent to the library ({a.selector})", "",
             f"{'iterations':>10}  {'run':<38} {coll + ' ' + nbytes + ' B':>14} {'total':>11}"]
    with tempfile.TemporaryDirectory(prefix="demo-nb-") as tmp:
        variant = Path(tmp) / "variant.rules"
        variant.write_text(text)
        for iters in (20, 100):
            for name, extra in ((f"library default ({a.selector})", ["--default-selector", a.selector]),
                                ("deployment", ["--deployment", a.deployment]),
                                (f"deployment, {coll} {nbytes} B to the library",
                                 ["--default-selector", a.selector, "--rules", str(variant)])):
                r = run(extra, iters)
                row = r["calls"][(coll, int(nbytes))][1]
                lines.append(f"{iters:>10}  {name:<38} {row * 1e6:>14.1f} {r['total'] * 1e6:>11.1f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
