#!/usr/bin/env python3
"""colltune's Rabenseifner allreduce before and after the step-order fix, side by
side with its ring and with SimGrid's flat algorithms of the same family, flat and
as the leaders' allreduce of HAN (imod=2, iaalg=3), on the bundled dragonfly.

    .venv/bin/python benchmarks/rabenseifner_dragonfly.py [--layouts dragonfly:128x1,dragonfly:128x2]
        [--sizes 1M,8M] [--old-rev 5bea6a1] [--out-dir benchmarks/results/rabenseifner_dragonfly]
        [--no-run] [--timeout 900]

"old" is colltune-taskbench built from the working tree with
native/algorithms/allreduce/rabenseifner.c replaced by its version at --old-rev
(distance pof2/2 first in the reduce-scatter), so the two builds differ in that
file only; "new" is the working tree (nearest partner first, as MPICH's and
SimGrid's rab_rdb). Every point is one smpirun of colltune-taskbench --whole (one
warm-up + one timed call, time to completion; SMPI is deterministic; shared
garbage buffers; charging of colltune's reductions/copies off, so on equal terms
with SimGrid's built-ins, which charge nothing). Records go to
<out-dir>/<platform>_<layout>.jsonl, one JSON line per point; points already
there are skipped (resumable); --no-run only reprints. A crash or timeout is
recorded as such, never as a time.

Layouts with one rank per node run the flat algorithms only; with more, also
HAN allreduce with the leaders' Rabenseifner (old and new) and ring, settings as
in benchmarks/han_vs_selectors.py.

The per-step model printed first (--model) charges each exchange of the
reduce-scatter to SimGrid's routes (colltune.profile) and divides the bytes of
the busiest link by its bandwidth: the time one step needs at least.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from colltune import platforms  # noqa: E402
from colltune.sizes import human_bytes, parse_list  # noqa: E402
from han_vs_selectors import HAN_SETTINGS, taskbench_point  # noqa: E402  (benchmarks/)

RAB_FILE = "native/algorithms/allreduce/rabenseifner.c"
# SimGrid 3.32 flat allreduce algorithms of the same family: reduce-scatter +
# allgather (rab_rdb; mvapich2_rs is rab_rdb above its small-message switch) and
# rings (lr, ompi_ring_segmented). Left out: rab1 (aborted inside SimGrid,
# "double free or corruption", at 128x1 and ran past 15 min at 128x2), `rab`
# (segfaults with shared buffers) and rab2 (alltoall-based, many minutes at 128 ranks).
SMPI_FAMILY = ["rab_rdb", "mvapich2_rs", "lr", "ompi_ring_segmented"]
SMPI_RS = ["rab_rdb", "mvapich2_rs"]
SMPI_RING = ["lr", "ompi_ring_segmented"]
FLAT = {"old:rabenseifner": ("old", "flat:rabenseifner", None),
        "new:rabenseifner": ("new", "flat:rabenseifner", None),
        "ring": ("new", "flat:ring", None)}
HAN = {n: HAN_SETTINGS["allreduce"][n]  # han_vs_selectors.py's settings of the leaders' allreduce
       for n in ("han-rsag", "han-rsag512k-d2", "han-rsag256k-d2", "han-ring", "han-ring-d2",
                 "han-ring256k-d2")}


def impls(ppn: int) -> dict[str, tuple[str, str, str | None]]:
    """name -> (build, --whole value, --params)"""
    out = dict(FLAT)
    if ppn > 1:
        for name, params in HAN.items():
            if "rsag" in name:
                out["old:" + name] = ("old", "han", params)
                out["new:" + name] = ("new", "han", params)
            else:
                out[name] = ("new", "han", params)
    out.update({f"smpi:{n}": ("new", "library", None) for n in SMPI_FAMILY})
    return out


def build(tmp: Path, old_rev: str) -> dict[str, str]:
    exes = {}
    for which in ("old", "new"):
        src = tmp / f"src-{which}"
        shutil.copytree(REPO / "native", src / "native", ignore=shutil.ignore_patterns("*.o", "*.a"))
        if which == "old":
            text = subprocess.run(["git", "-C", str(REPO), "show", f"{old_rev}:{RAB_FILE}"],
                                  check=True, capture_output=True, text=True).stdout
            (src / RAB_FILE).write_text(text)
        out = tmp / f"bin-{which}"
        b = subprocess.run(["make", "-s", "-C", str(src / "native"), "taskbench", "MPICC=smpicc", f"OUT={out}"],
                           capture_output=True, text=True)
        if b.returncode:
            raise SystemExit(f"build {which} failed:\n{b.stderr}")
        exes[which] = str(out / "colltune-taskbench")
    return exes


def model(plat_name: str, nodes: int, size: int) -> None:
    """Busiest-link bound of every reduce-scatter step, both orders, one rank per node."""
    from colltune.profile.loads import link_loads
    from colltune.profile.topology import load_topology
    topo = load_topology(platforms.load(plat_name))
    links = list(topo.links.values())
    hosts = [f"node-{i}" for i in range(nodes)]
    pof2 = 1 << (nodes.bit_length() - 1)
    if pof2 != nodes:
        print(f"(model: {nodes} nodes is not a power of two, skipped)")
        return
    steps = pof2.bit_length() - 1
    print(f"model: {plat_name} {nodes}x1, {human_bytes(size)}, reduce-scatter step bound = bytes of the "
          f"busiest link / its bandwidth (SimGrid's routes); the allgather repeats it backwards")
    for name, dists in (("old (distance pof2/2 first)", [pof2 >> k for k in range(1, steps + 1)]),
                        ("new (distance 1 first)", [1 << k for k in range(steps)])):
        tot = 0.0
        print(f"  {name}")
        for k, d in enumerate(dists):
            nb = size >> (k + 1)
            L = link_loads(topo, {(hosts[i], hosts[i ^ d]): (nb, 1) for i in range(nodes)})
            busiest, t = None, 0.0
            for j, lk in enumerate(links):
                if L.bytes[j] and L.bytes[j] / lk.bandwidth > t:
                    busiest, t = (lk, L.bytes[j] / nb), L.bytes[j] / lk.bandwidth
            tot += t
            print(f"    distance {d:4d} {human_bytes(nb):>8}  busiest {busiest[0].id} ({busiest[0].kind}, "
                  f"{busiest[1]:.0f} flows)  {t * 1e6:8.1f} us")
        print(f"    reduce-scatter {tot * 1e6:.1f} us, with the allgather {2 * tot * 1e6:.1f} us")


def table(recs: dict, plat_name: str, layout: str, sizes: list[int]) -> list[str]:
    nodes, ppn = (int(x) for x in layout.split("x"))
    names = list(impls(ppn))
    lines = [f"\n{plat_name} {layout} = {nodes * ppn} ranks, allreduce, time to completion (us), charging off"]
    w = 36
    lines.append(f"{'':{w}} " + " ".join(f"{human_bytes(s):>10}" for s in sizes))
    ok = {}
    for n in names:
        cells = []
        for s in sizes:
            r = recs.get((s, n), {})
            if r.get("status") == "ok":
                ok[(s, n)] = r["seconds"]
                cells.append(f"{r['seconds'] * 1e6:10.1f}")
            else:
                cells.append(f"{r.get('status', '-'):>10}")
        lines.append(f"{n:{w}} " + " ".join(cells))

    def best(s, pred):
        c = [(t, n) for (sz, n), t in ok.items() if sz == s and pred(n)]
        return min(c) if c else (None, None)

    def ratio(x, y):
        return f"{x / y:10.3f}" if x and y else f"{'-':>10}"
    rows = [("new/old rabenseifner (flat)", lambda s: (ok.get((s, "new:rabenseifner")), ok.get((s, "old:rabenseifner")))),
            ("new rabenseifner / rab_rdb", lambda s: (ok.get((s, "new:rabenseifner")), ok.get((s, "smpi:rab_rdb")))),
            ("new rabenseifner / best SMPI rs+ag", lambda s: (ok.get((s, "new:rabenseifner")),
                                                              best(s, lambda n: n[5:] in SMPI_RS)[0])),
            ("ring / best SMPI ring", lambda s: (ok.get((s, "ring")), best(s, lambda n: n[5:] in SMPI_RING)[0])),
            ("best colltune flat / best SMPI family",
             lambda s: (best(s, lambda n: n in ("new:rabenseifner", "ring"))[0],
                        best(s, lambda n: n.startswith("smpi:"))[0]))]
    if ppn > 1:
        rows += [("new/old han-rsag (fs 1M)", lambda s: (ok.get((s, "new:han-rsag")), ok.get((s, "old:han-rsag")))),
                 ("old han-rsag / han-ring", lambda s: (ok.get((s, "old:han-rsag")), ok.get((s, "han-ring")))),
                 ("new han-rsag / han-ring", lambda s: (ok.get((s, "new:han-rsag")), ok.get((s, "han-ring")))),
                 ("best old han-rsag* / best SMPI", lambda s: (best(s, lambda n: n.startswith("old:han"))[0],
                                                               best(s, lambda n: n.startswith("smpi:"))[0])),
                 ("best new han-rsag* / best SMPI", lambda s: (best(s, lambda n: n.startswith("new:han"))[0],
                                                               best(s, lambda n: n.startswith("smpi:"))[0])),
                 ("best colltune (new) / best SMPI", lambda s: (best(s, lambda n: not n.startswith(("smpi:", "old:")))[0],
                                                                best(s, lambda n: n.startswith("smpi:"))[0]))]
    lines.append("ratios (< 1: the first is faster)")
    for label, f in rows:
        lines.append(f"{label:{w}} " + " ".join(ratio(*f(s)) for s in sizes))
    for s in sizes:
        t, n = best(s, lambda n: n.startswith("smpi:"))
        if t:
            lines.append(f"  best SMPI family at {human_bytes(s)}: {n} {t * 1e6:.1f} us")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layouts", default="dragonfly:128x1,dragonfly:128x2",
                    help="PLATFORM:NODESxPPN list, e.g. dragonfly:128x1,fattree64x12:64x12")
    ap.add_argument("--sizes", default="1M,8M")
    ap.add_argument("--old-rev", default="5bea6a1", help=f"revision whose {RAB_FILE} is 'old'")
    ap.add_argument("--out-dir", default=str(REPO / "benchmarks/results/rabenseifner_dragonfly"))
    ap.add_argument("--only", default=None, help="comma-separated implementation names to measure")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-run", action="store_true", help="print what the records hold, measure nothing")
    ap.add_argument("--model", action="store_true", help="print the per-step busiest-link model first")
    a = ap.parse_args()
    sizes = parse_list(a.sizes)
    out_dir = Path(a.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COLLTUNE_REDUCE_RATE": "0", "COLLTUNE_COPY_RATE": "0"}
    print("command: " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]))
    if a.model:   # one rank per node: once per node count
        for pname, nodes in dict.fromkeys((s.split(":")[0], int(s.split(":")[1].split("x")[0]))
                                          for s in a.layouts.split(",")):
            model(pname, nodes, sizes[0])
    tmp = Path(tempfile.mkdtemp(prefix="rab-bench-"))
    exes = None
    for spec in a.layouts.split(","):
        pname, layout = spec.split(":")
        nodes, ppn = (int(x) for x in layout.split("x"))
        plat = platforms.load(pname)
        path = out_dir / f"{pname}_{layout}.jsonl"
        recs = {}
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                recs[(r["size"], r["impl"])] = r
        if not a.no_run:
            hostfile = plat.write_hostfile(nodes, ppn, tmp / f"hosts-{pname}-{layout}")
            with path.open("a") as f:
                for size in sizes:
                    for name, (which, whole, params) in impls(ppn).items():
                        if (size, name) in recs or (a.only and name not in a.only.split(",")):
                            continue
                        if exes is None:
                            exes = build(tmp, a.old_rev)
                        cfg = [f"--cfg=smpi/allreduce:{name[5:]}"] if name.startswith("smpi:") else []
                        r = taskbench_point(exes[which], plat, hostfile, nodes * ppn, "allreduce", size,
                                            whole, params, cfg, a.timeout, env)
                        r.update(impl=name, size=size, build=which, whole=whole, params=params,
                                 old_rev=a.old_rev if which == "old" else None, platform=pname,
                                 layout=layout, charge="off", platform_sha256=plat.provenance.get("sha256"))
                        recs[(size, name)] = r
                        f.write(json.dumps(r) + "\n")
                        f.flush()
                        t = f"{r['seconds'] * 1e6:.1f} us" if r["status"] == "ok" else r["status"]
                        print(f"  {pname} {layout} {human_bytes(size)} {name}: {t}", file=sys.stderr, flush=True)
        print("\n".join(table(recs, pname, layout, sizes)))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
