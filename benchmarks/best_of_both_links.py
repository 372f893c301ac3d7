#!/usr/bin/env python3
"""Which links bound the deployed bcast and allreduce at >= 8 MiB?

    .venv/bin/python benchmarks/best_of_both_links.py                 # resumable (cache: dragonfly-links.json)
    .venv/bin/python benchmarks/best_of_both_links.py --no-run        # reprint from the cache
    .venv/bin/python benchmarks/best_of_both_links.py --sizes 8M --layouts 16x12
    .venv/bin/python benchmarks/best_of_both_links.py --platform fattree64x12 --sizes 8M,24000000

benchmarks/best_of_both.py measures the deployed best of both at 2.0-2.8x LBnet (bcast m/B,
allreduce 2m(N-1)/N/B, B = a node's injection bandwidth). LBnet assumes the injection link
is what limits; this script finds the link that really does. Per layout of the plan,
collective and size it takes what the deployed rules file runs there (read at run time with
colltune's own matching, so a new deployment is picked up) and SMPI's `ompi` selector, runs
that collective ONCE under traffic profiling (`colltune run --profile`: colltune's own
counts for its algorithms, SMPI's record of every message for the library's), routes the
bytes along SimGrid's routes (colltune.profile.link_loads) and compares the busiest link's
time (bytes / bandwidth) with the deployed time measured by best_of_both.py (its store,
campaign dragonfly-eval). measured ~ link time: that link, not injection, bounds the call.
The last table sets the deployed time against the lower bounds beyond LBnet that a node's
cores set (best_of_both_report.node_bounds: what a core can copy in, what the cores can
reduce) and names the one that binds.

Buffers are SMPI_SHARED_MALLOC (data are garbage; the counts are count x type size, the
bytes really sent). Profile folders are temporary; each run leaves one record in
PLATFORM-links.json (top links, totals; PLATFORM-links.txt: the report), so reruns measure only new (point, algorithm) pairs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from best_of_both import PLANS, deployed_algorithm, layouts  # noqa: E402
from best_of_both_report import _times, lbnet, node_bounds  # noqa: E402
from colltune import platforms  # noqa: E402
from colltune.exporters.colltune_rules import match, read_rules  # noqa: E402
from colltune.profile import link_loads, load_topology  # noqa: E402
from colltune.profile.counts import load_profile  # noqa: E402
from colltune.sizes import human_bytes, parse_list  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/best_of_both"
REGION = "one"
UNCHARGED = "+uncharged"
BOUND = 1.10   # time within 10 % of the busiest link's bytes/bandwidth: that link bounds the call
NO_STORE_ROW = ("uncharged", "also", "leaders", "p2p")    # rows timed by their profiled run only
# One call inside a named region. A 4-byte call of the same collective goes first, outside
# the region, so libcolltune's set-up on the communicator's first use is not counted.
PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void call(const char *c, void *a, void *b, long n) {
    if (!strcmp(c, "bcast")) MPI_Bcast(a, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
    else MPI_Allreduce(a, b, (int)(n / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = atol(argv[2]);
    char *a = SMPI_SHARED_MALLOC(n), *b = SMPI_SHARED_MALLOC(n);
    call(argv[1], a, b, 4);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(100, "one");
    double t = MPI_Wtime();
    call(argv[1], a, b, n);
    t = MPI_Wtime() - t;
    MPI_Pcontrol(-100, "one");
    double tmax; MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (!rank) printf("onecall_seconds %.9f\n", tmax);
    SMPI_SHARED_FREE(a); SMPI_SHARED_FREE(b);
    MPI_Finalize();
    return 0;
}
"""


def deployed(rules, coll, n, p, m) -> str:
    """What the deployed rules file runs: 'library' or colltune's label, e.g. ring[segsize=8192]."""
    line = match(rules, coll, n * p, n, p, m)
    if not line or line.algorithm == "library":
        return "library"
    return line.algorithm + (f"[{','.join(f'{k}={v}' for k, v in line.params.items())}]"
                             if line.params else "")


def profile_once(plat, topo, program, n, p, coll, m, how, timeout) -> dict:
    """One profiled call; what ran, the loaded links ranked by link time (bytes/bandwidth).
    how: 'library', colltune's label, or label+'+uncharged' (reductions not charged)."""
    how, uncharged = how.removesuffix(UNCHARGED), how.endswith(UNCHARGED)
    env = {**os.environ, "COLLTUNE_REDUCE_RATE": "0"} if uncharged else None
    work = Path(tempfile.mkdtemp(prefix="bob-links-"))
    try:
        cmd = [str(ROOT / ".venv/bin/colltune"), "run", "--platform", plat, "--layout", f"{n}x{p}",
               "--default-selector", "ompi", "--profile", str(work / "prof"),
               "--report", str(work / "report.jsonl"), "--timeout", str(timeout), "-q"]
        if how != "library":   # forced = what the rules line says, decoupled from later rule edits
            alg, _, par = how.partition("[")
            cmd += ["--force", f"{coll}:{alg}" + (f":{par.rstrip(']')}" if par else "")]
        t0 = time.time()
        try:
            r = subprocess.run(cmd + ["--", str(program), coll, str(m)], cwd=ROOT, capture_output=True,
                               text=True, timeout=timeout + 120, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout + 120:.0f} s"}
        wall = time.time() - t0
        sim = re.search(r"onecall_seconds (\S+)", r.stdout)
        if r.returncode or not sim:
            return {"error": (r.stdout + r.stderr)[-1500:]}
        ran = [json.loads(x) for x in (work / "report.jsonl").read_text().splitlines()
               if x.strip()] if (work / "report.jsonl").exists() else []
        ran = sorted({x.get("ran", "") for x in ran if x.get("bytes") == m}) or ["library"]
        prof = load_profile(work / "prof")
        B, M, hosts = prof.host_matrix(REGION)
        ld = link_loads(topo, B, M, hosts=hosts)
        links = []
        for lid, (nb, nm) in ld.nonzero().items():
            lk = topo.links[lid]
            if lk.sharing == "FATPIPE":   # loopback: every flow gets the full bandwidth, never a bound
                continue
            links.append({"id": lid, "kind": lk.kind, "bytes": int(nb), "messages": int(nm),
                          "bw": lk.bandwidth, "time": nb / lk.bandwidth})
        links.sort(key=lambda x: -x["time"])
        per_kind = {}
        for x in links:
            per_kind.setdefault(x["kind"], x)
        return {"ran": ",".join(ran), "sim_s": float(sim[1]), "wall_s": round(wall, 1),
                "visibility": prof.visibility(REGION), "missing": prof.missing,
                "offered_bytes": float(ld.offered_bytes), "hop_bytes": float(ld.hop_bytes),
                "messages": int(M.sum()), "top": links[:5], "busiest_per_kind": per_kind}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _us(x):
    return f"{x * 1e6:10.1f}" if x else f"{'-':>10}"


def _per(meas, msgs):
    """Measured time per message through the busiest link: what each message costs beyond bytes/bw."""
    return f"{meas / msgs * 1e6:6.2f}" if meas and msgs else f"{'-':>6}"


def _x(a, b):
    return f"{a / b:6.2f}x" if a and b else f"{'-':>7}"


def report(points, cache, times, plat) -> list[str]:
    out = ["Busiest link of one call (SimGrid routes, colltune.profile.link_loads), link time = "
           "bytes / bandwidth; loopback (FATPIPE) left out.",
           "measured: best_of_both.py's store (the rows its report uses: the deployed rules file's, "
           "ompi's); this run: the profiled call's own simulated time (cold, one call).",
           f"LBnet = bcast m/B, allreduce 2m(N-1)/N/B, B = {plat.name}'s injection bandwidth; "
           "msgs: messages through the busiest link; us/msg: measured / msgs (bytes/bw per message "
           "is link us / msgs); uncharged: colltune's reductions not charged (COLLTUNE_REDUCE_RATE=0); also: --also, for comparison "
           "(uncharged and also rows have no store row: their ratios use this run's time); leaders: the deployed "
           "algorithm on the N leaders alone (Nx1), p2p: one message of m between two nodes (2x1, bcast "
           "binomial), both timed by their run (--stages); bound: 'this link' "
           f"when the time is within {BOUND:.2f}x the busiest link's time.", ""]
    head = (f"{'layout':<6} {'coll':<9} {'size':>7} {'what':<9} {'runs':<26} {'busiest link':<26} "
            f"{'kind':<10} {'MB':>7} {'GB/s':>5} {'link us':>10} {'measured':>10} {'this run':>10} "
            f"{'LBnet us':>10} {'meas/link':>9} {'link/LB':>7} {'msgs':>6} {'us/msg':>6} bound")
    out.append(head)
    tops, drift = [], []
    for (n, p, c, m, who, how, label) in points:
        rec = cache.get(key(n, p, c, m, how))
        meas = times.get((c, n, p, m) + (("deployment", label) if who == "deployed" else ("smpi", "ompi")),
                         (None, None))[1] if label else None
        lb = lbnet(plat, c, m, n)
        runs = "library (ompi)" if how == "library" else how
        if not rec or "error" in rec:
            out.append(f"{f'{n}x{p}':<6} {c:<9} {human_bytes(m):>7} {who:<9} {runs[:26]:<26} "
                       + ("not profiled yet" if not rec else f"FAILED: {rec['error'].strip().splitlines()[0][:100]}"))
            continue
        t = rec["top"][0]
        ref = meas or (rec["sim_s"] if who in NO_STORE_ROW else None)
        out.append(f"{f'{n}x{p}':<6} {c:<9} {human_bytes(m):>7} {who:<9} {runs[:26]:<26} {t['id'][:26]:<26} "
                   f"{t['kind']:<10} {t['bytes'] / 1e6:7.1f} {t['bw'] / 1e9:5.2f} {_us(t['time'])} "
                   f"{_us(meas)} {_us(rec['sim_s'])} {_us(lb)} {_x(ref, t['time']):>9} "
                   f"{_x(t['time'], lb):>7} {t['messages']:6d} {_per(ref, t['messages'])} "
                   + ("this link" if ref and ref <= BOUND * t["time"] else "no link"))
        if meas and abs(rec["sim_s"] / meas - 1) > 0.02:
            drift.append(f"{n}x{p} {c} {human_bytes(m)} {runs}: this run {rec['sim_s'] * 1e6:.1f} us, "
                         f"store {meas * 1e6:.1f} us ({rec['sim_s'] / meas:.3f}x)")
        tops.append(f"{n}x{p} {c} {human_bytes(m)} {who} ({runs}; ran {rec['ran']}; {rec['messages']} "
                    f"messages, {rec['offered_bytes'] / 1e6:.1f} MB offered, {rec['visibility']}): "
                    + "; ".join(f"{x['id']} [{x['kind']}] {x['bytes'] / 1e6:.1f} MB {x['time'] * 1e6:.0f} us"
                                for x in rec["top"][:3])
                    + " | busiest per kind: " + ", ".join(
                        f"{k} {v['bytes'] / m:.2f}m" for k, v in sorted(rec["busiest_per_kind"].items())))
    out += stages(points, cache, times, plat)
    out += bounds(points, cache, times, plat)
    if drift:
        out += ["", "this run differs from the store by more than 2 % (the store times a call after a "
                "warm-up, this run one cold call; larger gaps: the store was measured by another libcolltune "
                "build); the link bytes are this run's:", *dict.fromkeys(drift)]
    return out + ["", "top 3 links per call (bytes, link time), and each link kind's busiest link "
                  "in multiples of the message size m:"] + tops


def stages(points, cache, times, plat) -> list[str]:
    """Where the deployed time goes, per deployed point with leaders/p2p rows: the whole call,
    the same algorithm on the leaders alone, one message, each over LBnet."""
    got = {(n, p, c, m, who): cache.get(key(n, p, c, m, how)) for n, p, c, m, who, how, _ in points}
    rows = []
    for n, p, c, m, who, how, label in points:
        if who != "deployed" or (n, 1, c, m, "leaders") not in got:
            continue
        lb = lbnet(plat, c, m, n)
        meas = times.get((c, n, p, m, "deployment", label), (None, None))[1]
        lead, one = got[(n, 1, c, m, "leaders")], got.get((2, 1, c, m, "p2p"))
        t = lambda r: r["sim_s"] if r and "error" not in r else None  # noqa: E731
        rows.append(f"{f'{n}x{p}':<6} {c:<9} {human_bytes(m):>7} {how[:30]:<30} {_us(meas)} {_x(meas, lb)} "
                    f"{_us(t(lead))} {_x(t(lead), lb)} {_us(t(one))} {_x(t(one), lb)}")
    if not rows:
        return []
    return ["", "where the time goes (--stages): the deployed call, the same algorithm on its N leaders "
            "alone (Nx1: the inter-node part, no intra-node stage), one message of m between two nodes "
            "(2x1, bcast only), in us and over LBnet",
            f"{'layout':<6} {'coll':<9} {'size':>7} {'runs':<30} {'deployed':>10} {'/LBnet':>7} "
            f"{'leaders':>10} {'/LBnet':>7} {'1 message':>10} {'/LBnet':>7}", *rows]


def bounds(points, cache, times, plat) -> list[str]:
    """The deployed time against the lower bounds of best_of_both_report.node_bounds: LBnet,
    what a core can copy in, what the cores can reduce; the largest is the one that binds."""
    rows = []
    for n, p, c, m, who, how, label in points:
        if who != "deployed" or how == "library":
            continue
        b = node_bounds(plat, c, m, n, p)
        meas = times.get((c, n, p, m, "deployment", label), (None, None))[1]
        by = max(b, key=b.get)
        unch = cache.get(key(n, p, c, m, how + UNCHARGED)) if c == "allreduce" else None
        unch = unch["sim_s"] if unch and "error" not in unch else None
        free = {k: v for k, v in b.items() if k != "reduction"}
        col = lambda k: _us(b.get(k))  # noqa: E731
        rows.append(f"{f'{n}x{p}':<6} {c:<9} {human_bytes(m):>7} {col('network')} {col('copy')} "
                    f"{col('reduction')} {by:<9} {_x(meas, b['network'])} {_x(meas, b[by])} "
                    f"{_us(unch)} {_x(unch, max(free.values()))}")
    if not rows:
        return []
    return ["", "lower bounds (best_of_both_report.node_bounds): network = LBnet; copy = m / (Rc + B/p): "
            "each of a node's p ranks takes in the m bytes of the result through the NIC (B, shared) or "
            "from a core of its node at most at a core's copy rate Rc (loopback bandwidth = memcpy charge "
            "rate); reduction = m (P-1)/P / R: the (P-1) m bytes an allreduce of P ranks reduces, spread "
            "over all P cores at the platform's reduction charge rate R (colltune's reductions are charged, "
            "SMPI's are not: the uncharged run's bound leaves it out); bound: the largest",
            f"{'layout':<6} {'coll':<9} {'size':>7} {'network us':>10} {'copy us':>10} {'reduce us':>10} "
            f"{'bound':<9} {'/LBnet':>7} {'/bound':>7} {'uncharged':>10} {'/bound':>7}", *rows]


def key(n, p, c, m, how) -> str:
    return f"{n}x{p} {c} {m} {how}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="dragonfly", choices=sorted(PLANS))
    ap.add_argument("--layouts", help="default: the plan's training and held-out layouts")
    ap.add_argument("--collectives", default="bcast,allreduce")
    ap.add_argument("--sizes", default="8M,64M", help="bytes per rank")
    ap.add_argument("--also", default="bcast:pipeline[segsize=65536]",
                    help="COLL:LABEL;... colltune algorithms profiled at every point too, for comparison "
                         "(default: the pipeline with 64 KiB segments: 8x fewer messages per link)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per profiled run")
    ap.add_argument("--stages", action=argparse.BooleanOptionalAction, default=True,
                    help="also profile the deployed algorithm on the leaders alone (Nx1) and, for "
                         "bcast, one message of m between two nodes (2x1): where the time goes")
    ap.add_argument("--no-run", action="store_true", help="reprint from PLATFORM-links.json")
    a = ap.parse_args()
    out = Path(a.out)
    lays = layouts(a.layouts or ",".join(PLANS[a.platform]))
    rules_path = out / f"{a.platform}.colltune.rules"
    rules = read_rules(str(rules_path))
    label = {c: deployed_algorithm(c, rules_path.read_text()).label for c in a.collectives.split(",")}
    points = []   # (n, p, coll, size, deployed|ompi, what runs, store label)
    for n, p in lays:
        for c in a.collectives.split(","):
            for m in parse_list(a.sizes):
                dep = deployed(rules, c, n, p, m)
                points.append((n, p, c, m, "deployed", dep, label[c]))
                if c == "allreduce" and dep != "library":
                    # colltune charges its reductions (4 GB/s per rank, platform charge rate);
                    # SMPI's own collectives reduce for free: the same call uncharged shows the share
                    points.append((n, p, c, m, "uncharged", dep + UNCHARGED, None))
                points.append((n, p, c, m, "ompi", "library", "ompi"))
                if a.stages and dep != "library":
                    # where the time goes: the same algorithm on the N leaders alone (no
                    # intra-node stage), and (bcast) one message of m between two nodes
                    points.append((n, 1, c, m, "leaders", dep, None))
                    if c == "bcast":
                        points.append((2, 1, c, m, "p2p", "binomial", None))
                points += [(n, p, c, m, "also", lab, None) for cc, _, lab in
                           (x.partition(":") for x in a.also.split(";") if x) if cc == c and lab != dep]
    points = list(dict.fromkeys(points))          # one p2p row per size
    cache_path = out / f"{a.platform}-links.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    plat = platforms.load(a.platform)
    if not a.no_run:
        topo = load_topology(a.platform)
        cdir = ROOT / ".colltune-cache/best_of_both_links"
        cdir.mkdir(parents=True, exist_ok=True)
        (cdir / "onecall.c").write_text(PROGRAM)
        for n, p, c, m, who, how, _ in points:
            k = key(n, p, c, m, how)
            if k in cache and "error" not in cache[k]:
                continue          # a deployed 'library' point is the ompi run: profiled once
            print(f"profiling {k} ...", flush=True)
            cache[k] = profile_once(a.platform, topo, cdir / "onecall.c", n, p, c, m, how, a.timeout)
            print("  " + (f"error {cache[k]['error'][-300:]}" if "error" in cache[k] else
                          f"{cache[k]['top'][0]['id']} {cache[k]['top'][0]['bytes'] / 1e6:.1f} MB, "
                          f"call {cache[k]['sim_s'] * 1e6:.1f} us, {cache[k]['wall_s']} s"), flush=True)
            cache_path.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    times = _times(str(out / f"{a.platform}.sqlite"))
    sha = hashlib.sha256(rules_path.read_bytes()).hexdigest()[:10]      # the file's, whole
    text = "\n".join([f"{a.platform}: rules {rules_path.name} (sha {sha}), "
                      f"layouts {','.join(f'{n}x{p}' for n, p in lays)}", *report(points, cache, times, plat)])
    print(text)
    (out / f"{a.platform}-links.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
