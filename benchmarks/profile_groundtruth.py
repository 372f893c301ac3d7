#!/usr/bin/env python3
"""Ground truth of traffic profiling on the large platforms (issue 17, "Done means").

    .venv/bin/python benchmarks/profile_groundtruth.py [--platform fattree64x12 dragonfly]
        [--ranks 64] [--only bcast,allreduce] [--out benchmarks/results/profile_groundtruth]

For each collective (bcast, allreduce, allgather, alltoall) with SMPI's algorithms and
colltune's, runs tests/profile_groundtruth.c (2 calls inside region "gt") with libcolltune
counting (COLLTUNE_PROFILE) and SMPI's message trace (simtrace.smpirun_args), one rank per
host on hosts spread over the platform (every k-th host, so fat-tree leaves / dragonfly groups
are crossed), then compares:
  counts  colltune's own counts (source colltune) with the simulator's recorded messages of
          the region, pair by pair (colltune's algorithms only);
  links   the per-link bytes and messages of the profile routed by colltune.profile with
          every traced message summed along SimGrid's own routes (s4u Host::route_to).
Prints one line per case and appends it to <out>/<platform>.jsonl; a case already there is
skipped (resumable). tests/test_profile_groundtruth.py is the same check on `small`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from colltune import mpi, platforms
from colltune.profile import load_topology, simtrace
from colltune.profile.counts import load_profile
from colltune.providers.colltune import libcolltune, link_args
from colltune.subcommands.run import compile_app

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "profile_groundtruth.c"
CACHE = str(ROOT / ".colltune-cache")
CASES = [
    ("bcast", 65536, "smpi:binomial_tree"), ("bcast", 65536, "smpi:scatter_rdb_allgather"),
    ("bcast", 65536, "colltune:binomial"), ("bcast", 65536, "colltune:pipeline"),
    ("allreduce", 65536, "smpi:rdb"), ("allreduce", 65536, "smpi:rab_rdb"),
    ("allreduce", 65536, "colltune:ring"), ("allreduce", 65536, "colltune:rabenseifner"),
    ("allgather", 4096, "smpi:ring"), ("allgather", 4096, "smpi:bruck"),
    ("allgather", 4096, "colltune:bruck"), ("allgather", 4096, "colltune:recursive_doubling"),
    ("alltoall", 1024, "smpi:pair"), ("alltoall", 1024, "smpi:bruck"),
]


def run_case(plat, topo, program: str, hosts: list[str], coll: str, nbytes: int, how: str) -> dict:
    who, alg = how.split(":", 1)
    impl = mpi.find("smpi")
    with tempfile.TemporaryDirectory(prefix="colltune-gt-") as tmp:
        out = Path(tmp, "prof")
        out.mkdir()
        hostfile = plat.write_hostfile(len(hosts), 1, Path(tmp, "hostfile"), hosts)
        cmd = [impl.launcher, "-np", str(len(hosts)), "-platform", plat.xml_path, "-hostfile",
               hostfile, *plat.smpirun_cfg_args(), *simtrace.smpirun_args(out),
               "--log=xbt_cfg.thres:warning", "--log=smpi_config.thres:error",
               program, coll, str(nbytes), "2"]
        env = {**os.environ, **impl.run_env(), "COLLTUNE_PROFILE": str(out)}
        if who == "smpi":
            cmd.append(f"--cfg=smpi/{coll}:{alg}")
        else:
            env["COLLTUNE_FORCE"] = f"{coll}:{alg}"
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if r.returncode:
            return {"error": (r.stdout + r.stderr)[-1500:]}
        sim_s = time.time() - t0
        prof = load_profile(out)
        res = {"ranks": prof.size, "sim_s": round(sim_s, 1), "missing": prof.missing,
               "notes": prof.notes, "messages": prof.meta["trace"]["messages"]}
        if who == "colltune":
            mine, trace = prof.pairs("gt", coll, "colltune"), prof.pairs("gt", "p2p", "simulator")
            res["counts_equal"] = mine.as_dict() == trace.as_dict() and mine.total[1] > 0
            res["colltune_bytes"] = mine.total[0]
        ref = simtrace.simgrid_link_loads(simtrace.trace_path(out), prof.hosts, plat.xml_path,
                                          cache_dir=CACHE,   # the messages the profile counts
                                          keep=lambda m: not prof.colltune_own(m.sender, m.time))
        mine_links = simtrace.profile_link_loads(prof, topo)
        diff = {k for k in set(ref) | set(mine_links) if ref.get(k) != mine_links.get(k)}
        res.update({"links_loaded": len(ref), "links_differing": len(diff),
                    "link_bytes": sum(b for b, _ in ref.values()),
                    "max_abs_diff_bytes": max((abs(ref.get(k, (0, 0))[0] - mine_links.get(k, (0, 0))[0])
                                               for k in diff), default=0)})
        return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platform", nargs="+", default=["fattree64x12", "dragonfly"])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--only", help="collectives to run, comma-separated")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/profile_groundtruth"))
    args = ap.parse_args(argv)
    impl = mpi.find("smpi")
    program = str(compile_app(impl, str(APP), CACHE, link_args(libcolltune(impl, CACHE))))
    os.makedirs(args.out, exist_ok=True)
    bad = 0
    for name in args.platform:
        plat = platforms.load(name)
        topo = load_topology(name)
        step = max(1, len(plat.hosts) // args.ranks)
        hosts = plat.hosts[::step][:args.ranks]
        path = Path(args.out, f"{name}.jsonl")
        done = set()
        if path.exists():
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                if "error" not in rec:
                    done.add((rec["coll"], rec["bytes"], rec["how"], rec["ranks"]))
        for coll, nbytes, how in CASES:
            if args.only and coll not in args.only.split(","):
                continue
            if (coll, nbytes, how, len(hosts)) in done:
                continue
            res = run_case(plat, topo, program, hosts, coll, nbytes, how)
            rec = {"platform": name, "coll": coll, "bytes": nbytes, "how": how,
                   "host_step": step, **res}
            rec.setdefault("ranks", len(hosts))
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            ok = "error" not in rec and rec["links_differing"] == 0 and rec.get("counts_equal", True)
            bad += not ok
            print(f"{name:13s} {coll:9s} {how:32s} ranks {rec['ranks']:4d} "
                  + (f"ERROR {rec['error'][-200:]}" if "error" in rec else
                     f"msgs {rec['messages']:7d} links {rec['links_loaded']:5d} "
                     f"differing {rec['links_differing']} counts_equal {rec.get('counts_equal', '-')} "
                     f"sim {rec['sim_s']} s"), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
