#!/usr/bin/env python3
"""What libcolltune costs per new communicator, in simulated time (SMPI: deterministic).

native/tests/onlinecomms.c splits MPI_COMM_WORLD in halves ROUNDS times, calls one
allreduce and one bcast of 37 ints on its half and frees it; it prints rank 0's
MPI_Wtime per round. Side by side in one run, on each platform and layout:

  library        the program without the interposer
  rules          linked with libcolltune and a rules file whose rules never match
                 (bytes >= 100 MB): every call takes the full decision, finds no rule and
                 runs the library -- what differs from `library` is the per-communicator
                 set-up (topology, from the world node map learnt at MPI_Init) and the
                 per-call decision
  asking         `rules` with COLLTUNE_NODE_MAP=0: each new communicator asks its members
                 for its topology (the way of jobs past the map's size; before the map,
                 every communicator's)
  online         COLLTUNE_ONLINE with a state whose blocks give the library p = 1 for
                 every size class (the calls run the library, drawn and timed): the
                 set-up plus online's per-communicator key agreement and its
                 MPI_Comm_free reduction of the samples

--native-dir points the interposer at another checkout's native/ (e.g. an older
commit's, from `git archive`) to compare builds.

    .venv/bin/python benchmarks/interposer_comm_setup.py            # results/interposer_comm_setup/
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

from colltune import mpi, platforms  # noqa: E402
from colltune.providers.colltune import libcolltune, link_args  # noqa: E402
from colltune.subcommands.run import compile_app  # noqa: E402

CACHE = os.path.join(os.path.dirname(HERE), ".colltune-cache")
APP = os.path.join(os.path.dirname(HERE), "native", "tests", "onlinecomms.c")
CASES = (("fattree64x12", 8, 8), ("dragonfly", 16, 4), ("small", 3, 2))
CLASSES = ("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576", "1048577..")


def library_state(state_dir: str, fingerprint: str, shapes) -> None:
    """A state whose every block runs the library (p = 1, timed), for every shape."""
    lines = ["colltune-online-state 1", f"fingerprint {fingerprint}", "run-count 1"]
    for coll in ("allreduce", "bcast"):
        for nodes, ppn in shapes:
            for rng in CLASSES:
                lines += [f"block {coll} nodes={nodes} ppn={ppn} bytes={rng} calls=1 runs=1 source=measured",
                          "arm library p=1 n=3 mean=1e-06 m2=0"]
    os.makedirs(state_dir, exist_ok=True)
    with open(os.path.join(state_dir, "state.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--native-dir", help="the interposer's native/ sources (default: this checkout's)")
    a = ap.parse_args()
    if a.native_dir:
        os.environ["COLLTUNE_NATIVE_DIR"] = os.path.abspath(a.native_dir)
    impl = mpi.find("smpi")
    plain = compile_app(impl, APP, CACHE, [])
    linked = compile_app(impl, APP, CACHE, link_args(libcolltune(impl, CACHE)))
    print(f"us per round (split, allreduce + bcast of 37 ints, free), {a.rounds} rounds, SMPI simulated time")
    print(f"{'platform':13} {'layout':>6} {'library':>9} {'rules':>9} {'asking':>9} {'online':>9} "
          f"{'rules-lib':>9} {'asking-lib':>10} {'online-lib':>10}")
    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "never.rules")
        with open(rules, "w") as f:
            f.write("colltune-rules 1\nallreduce bytes=100000000.. -> ring\nbcast bytes=100000000.. -> binomial\n")
        for name, nodes, ppn in CASES:
            plat = platforms.load(name)
            hosts = plat.write_hostfile(nodes, ppn, os.path.join(d, f"hosts-{name}"))

            def run(app, env):
                argv = [impl.launcher, "-np", str(nodes * ppn), "-platform", plat.xml_path, "-hostfile",
                        hosts, *plat.smpirun_cfg_args(), "--log=root.thres:critical", str(app),
                        str(a.rounds), "1", "0"]
                p = subprocess.run(argv, capture_output=True, text=True, cwd=d, timeout=600,
                                   env={**impl.run_env(), "COLLTUNE_PLATFORM": name, **env})
                m = re.search(r"0 failures, ([\d.]+) us per round", p.stdout)
                if p.returncode or not m:
                    raise SystemExit(f"{name}: the program failed:\n{p.stdout}{p.stderr[-2000:]}")
                return float(m[1]), p
            lib, _ = run(plain, {})
            ruled, _ = run(linked, {"COLLTUNE_RULES": rules})
            asking, _ = run(linked, {"COLLTUNE_RULES": rules, "COLLTUNE_NODE_MAP": "0"})
            # the state's fingerprint: the one a fresh run writes
            probe = os.path.join(d, f"probe-{name}")
            run(linked, {"COLLTUNE_ONLINE": probe, "COLLTUNE_ONLINE_BUDGET": "0"})
            fp = re.search(r"^fingerprint (\S+)", open(os.path.join(probe, "state.txt")).read(), re.M)[1]
            state = os.path.join(d, f"state-{name}")
            halves = {(nodes, ppn), (nodes, -(-ppn // 2)), (-(-nodes // 2), ppn)}
            library_state(state, fp, sorted(halves | {(nodes, max(1, ppn // 2))}))
            online, proc = run(linked, {"COLLTUNE_ONLINE": state})
            if "warning" in proc.stderr:
                raise SystemExit(f"{name}: {proc.stderr[-2000:]}")
            print(f"{name:13} {nodes:>3}x{ppn:<2} {lib:9.2f} {ruled:9.2f} {asking:9.2f} {online:9.2f} "
                  f"{ruled - lib:9.2f} {asking - lib:10.2f} {online - lib:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
