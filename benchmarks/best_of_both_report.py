"""The tables of benchmarks/best_of_both.py, from its store and decision table
(measures nothing). Split out so that `--no-run` and a measuring run print the same."""
from __future__ import annotations

import json
import math

from colltune import platforms
from colltune.exporters.colltune_rules import match, read_rules
from colltune.plan import DEFAULT_OP, REDUCING
from colltune.results import Results
from colltune.sizes import human_bytes
from colltune.store import Store
import bounds

COLLECTIVES = ("bcast", "allreduce", "reduce", "allgather")   # the benchmark's, in report order
SLOWER = 1.02          # "more than 2 % slower than the library default"
LB_FROM = 8 << 20      # bcast/allreduce sizes compared with the network bound
TARGETS = {"ompi": 2.0, "mpich": 1.5, "lbnet": 1.25}   # issue 18's: geomean speed-ups, T/LBnet


def _gm(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _op_of(run) -> str:
    """The reduction operator a launch measured with (its settings; MPI_SUM before the setting)."""
    return json.loads(run["settings_json"] or "{}").get("reduction_op", DEFAULT_OP)


def _times(store_path: str, op: str = DEFAULT_OP) -> dict:
    """(coll, nodes, ppn, size, provider, algorithm) -> (status, seconds, labels); the
    reductions' points measured with operator `op` only (setting reduction_op)."""
    with Store(store_path, readonly=True) as store:
        res = Results.from_store(store).filter(scenario="plain")
    op_of = {r["run_id"]: _op_of(r) for _, r in res.runs.iterrows()}
    out = {}
    for r in res.points.itertuples():
        if r.collective in REDUCING and op_of.get(r.run_id) != op:
            continue
        key = (r.collective, int(r.nodes), int(r.ppn), int(r.msg_size), r.provider, r.algorithm)
        labels = json.loads(r.labels_json) if isinstance(getattr(r, "labels_json", None), str) else {}
        sec = float(r.ttc_median_s) if r.status == "ok" and r.ttc_median_s == r.ttc_median_s else None
        if key not in out or sec is not None:
            out[key] = (r.status, sec, labels)
    return out


def lbnet(plat, coll: str, size: int, nodes: int) -> float | None:
    """LBnet (benchmarks/bounds.py) of a bcast/allreduce of >= LB_FROM bytes, else None."""
    if coll not in ("bcast", "allreduce") or size < LB_FROM:
        return None
    return bounds.network_bound(bounds.injection_bw(plat.xml_path)[0], coll, size, nodes)


def node_bounds(plat, coll: str, size: int, nodes: int, ppn: int, charged: bool = True) -> dict:
    """benchmarks/bounds.py's node_bounds of a bcast/allreduce of >= LB_FROM bytes, else {}."""
    return bounds.node_bounds(plat, coll, size, nodes, ppn, charged) if lbnet(plat, coll, size, nodes) else {}


def rows(plat_name, store, table, rules, label, colls, train, held, tsizes, hsizes, feasible, default,
         op=DEFAULT_OP):
    """One row per evaluated point: what the deployed rules file runs there (rules),
    the times, and at trained points the tuner's own time of the table's arm."""
    plat, t, lines = platforms.load(plat_name), _times(store, op), read_rules(str(rules))
    out, skipped = [], []
    for n, p in train + held:
        for c in colls:
            for m in sorted(set(tsizes + hsizes)):
                if m not in feasible(c, [m], n, p):
                    skipped.append((c, n, p, m))
                    continue
                kind = "layout" if (n, p) in held else ("train" if m in tsizes else "size")
                rule = table.lookup(c, n, p, m)
                line = match(lines, c, n * p, n, p, m)
                runs = " ".join([line.algorithm, *(f"{k}={v}" for k, v in line.params.items())]) \
                    if line and line.algorithm != "library" else f"library ({default})"
                got = {k: t.get((c, n, p, m, prov, alg), (None, None, {})) for k, prov, alg in
                       (("dep", "deployment", label[c]), ("ompi", "smpi", "ompi"), ("mpich", "smpi", "mpich"),
                        ("arm", rule.provider, rule.algorithm))}
                out.append(dict(coll=c, nodes=n, ppn=p, size=m, kind=kind,
                                chosen=runs,
                                ran=got["dep"][2].get("ran", ""), status={k: v[0] for k, v in got.items()},
                                dep=got["dep"][1], ompi=got["ompi"][1], mpich=got["mpich"][1],
                                arm=got["arm"][1] if kind == "train" else None, lb=lbnet(plat, c, m, n)))
    return out, skipped


def _us(x, status=None):
    return f"{x * 1e6:11.1f}" if x else f"{(status or '-')[:11]:>11}"


def _ratio(a, b):
    return f"{a / b:7.2f}x" if a and b else f"{'-':>8}"


def print_report(plat_name, store, table, rules, label, colls, train, held, tsizes, hsizes, feasible, default,
                 op=DEFAULT_OP, others=()):
    """others: rows of collectives measured by another run (the MPI_SUM run's bcast and
    allgather, which no operator touches), added to the summary and named there."""
    rs, skipped = rows(plat_name, store, table, rules, label, colls, train, held, tsizes, hsizes,
                       feasible, default, op)
    lays = lambda ls: ",".join(f"{n}x{p}" for n, p in ls) or "none"  # noqa: E731
    print(f"\n{plat_name}: deployed best of both (tune --provider both, exhaustive, trained on "
          f"{lays(train)} at {','.join(human_bytes(s) for s in tsizes)}) vs SMPI's selectors; "
          f"held-out layouts {lays(held)}, held-out sizes {','.join(str(s) for s in hsizes)}")
    print(f"reductions with {op}: " + ("MPI_SUM, whose arithmetic SMPI charges to nobody and colltune "
          "charges to its own algorithms" if op == DEFAULT_OP else "a user-defined sum that charges its "
          "arithmetic whoever calls it, the selectors' algorithms as colltune's"))
    print("SimGrid SMPI (deterministic), time to completion in us; set: train = trained point, "
          "size = held-out size, layout = held-out layout; 'ran' = what the interposer reported")
    groups: dict = {}
    for r in rs:
        groups.setdefault((r["nodes"], r["ppn"], r["coll"]), []).append(r)
    summary = []
    for (n, p, c), g in groups.items():
        print(f"\n{c} on {n}x{p} = {n * p} ranks" + (" (held-out layout)" if (n, p) in held else ""))
        print(f"{'size':>10} {'set':<6} {'deployment runs':<24} {'ran':<22} {'deployed':>11} {'ompi':>11} "
              f"{'mpich':>11} {'ompi/dep':>8} {'mpich/dep':>9} {'dep/LBnet':>9}")
        for r in g:
            st = r["status"]
            print(f"{human_bytes(r['size']):>10} {r['kind']:<6} {r['chosen'][:24]:<24} {str(r['ran'])[:22]:<22} "
                  f"{_us(r['dep'], st['dep'])} {_us(r['ompi'], st['ompi'])} {_us(r['mpich'], st['mpich'])} "
                  f"{_ratio(r['ompi'], r['dep'])} {_ratio(r['mpich'], r['dep']):>9} "
                  f"{_ratio(r['dep'], r['lb']) if r['lb'] else '':>9}")
        summary.append(((n, p), c, g))
    more: dict = {}
    for r in others:
        more.setdefault((r["nodes"], r["ppn"], r["coll"]), []).append(r)
    if more:
        print(f"\nthe summary adds {', '.join(sorted({c for _, _, c in more}))} from the {DEFAULT_OP} run "
              f"({plat_name}.txt): no operator touches them, and a tuning of all four collectives "
              f"reuses their points and makes the same rules for them")
        summary += [((n, p), c, g) for (n, p, c), g in more.items()]
        summary.sort(key=lambda x: ((train + held).index(x[0]),
                                    COLLECTIVES.index(x[1]) if x[1] in COLLECTIVES else len(COLLECTIVES)))
    print_summary(summary, held, default)
    print_targets([r for _, _, g in summary for r in g], rs, default)
    print_checks(rs, skipped)
    with Store(store, readonly=True) as st:       # the launches of this operator's points (and the operator-free)
        runs = [r for r in st.query_runs() if r["collective"] not in REDUCING or _op_of(r) == op]
    print()
    for camp in sorted({r["campaign"] for r in runs}):
        mine = [r for r in runs if r["campaign"] == camp]
        print(f"campaign {camp}: {len(mine)} launches, {sum(r['wall_s'] or 0 for r in mine) / 60:.1f} min "
              f"of simulation (one at a time), {sum(r['status'] == 'timeout' for r in mine)} timed out")


def _speedups(g, default):
    """T(ompi)/T(deployed) and T(mpich)/T(deployed) where both were measured, and the
    points more than SLOWER slower than the default."""
    so = [r["ompi"] / r["dep"] for r in g if r["dep"] and r["ompi"]]
    sm = [r["mpich"] / r["dep"] for r in g if r["dep"] and r["mpich"]]
    slow = [r for r in g if r["dep"] and r[default] and r["dep"] > SLOWER * r[default]]
    return so, sm, slow


def _line(name, g, default):
    so, sm, slow = _speedups(g, default)
    failed = sum(1 for r in g if not r["dep"])
    return (f"{name:<34} {len(g):>6} {len(so):>5} {_gm(so):>8.3f}x {min(so, default=float('nan')):>7.3f}x "
            f"{len(sm):>5} {_gm(sm):>8.3f}x {len(slow):>6} {failed:>6}"), slow


def print_summary(summary, held, default):
    print(f"\nsummary: geometric means of T(selector)/T(deployed) over the points where both were "
          f"measured; 'slow' = deployed more than {SLOWER - 1:.0%} slower than {default} (the "
          f"selector the deployment runs with); 'no time' = deployed point failed or missing")
    head = (f"{'layout / collective':<34} {'points':>6} {'n':>5} {'vs ompi':>9} {'worst':>8} "
            f"{'n':>5} {'vs mpich':>9} {'slow':>6} {'no time':>6}")
    print(head)
    slow_all = []
    for lay, c, g in summary:
        line, slow = _line(f"{lay[0]}x{lay[1]} {c}" + (" (held out)" if lay in held else ""), g, default)
        print(line)
        slow_all += slow
    allr = [r for _, _, g in summary for r in g]
    print()
    for name, sel in (("(a) trained points", "train"), ("(b) held-out sizes, trained layouts", "size"),
                      ("(c) held-out layouts", "layout")):
        print(_line(name, [r for r in allr if r["kind"] == sel], default)[0])
    for c in sorted({r["coll"] for r in allr}):
        print(_line(f"all {c}", [r for r in allr if r["coll"] == c], default)[0])
    print(_line("all points", allr, default)[0])
    if slow_all:
        print(f"\npoints more than {SLOWER - 1:.0%} slower than {default}:")
        for r in slow_all:
            print(f"  {r['coll']} {r['nodes']}x{r['ppn']} {human_bytes(r['size'])} ({r['kind']}): "
                  f"{r['chosen']} ran {r['ran']}: {r['dep'] / r[default]:.3f}x {default}'s time")


def _against_lbnet(rs):
    """The measured deployed points that have a network bound (bcast/allreduce >= LB_FROM)."""
    return [r for r in rs if r["lb"] and r["dep"]]


def _said(ok) -> str:
    return "met" if ok else "NOT met"


def print_targets(allr, rs, default):
    """Issue 18's targets, met or not, from the rows the summary used (README quotes this)."""
    so, sm, slow = _speedups(allr, default)
    lb = _against_lbnet(rs)
    over = [r for r in lb if r["dep"] / r["lb"] > TARGETS["lbnet"]]
    gm_o, gm_m = _gm(so), _gm(sm)
    print(f"\ntargets (issue 18): all points vs ompi {gm_o:.3f}x (>= {TARGETS['ompi']}x: "
          f"{_said(gm_o >= TARGETS['ompi'])}); vs mpich {gm_m:.3f}x (>= {TARGETS['mpich']}x: "
          f"{_said(gm_m >= TARGETS['mpich'])}); more than {SLOWER - 1:.0%} slower than {default}: "
          f"{len(slow)} ({_said(not slow)}); bcast/allreduce >= {human_bytes(LB_FROM)} within "
          f"{TARGETS['lbnet']}x LBnet: {len(lb) - len(over)} of {len(lb)} points "
          f"({_said(not over) if lb else 'none measured'})"
          + ("; over it: " if over else "")
          + ", ".join(f"{r['coll']} {r['nodes']}x{r['ppn']} {human_bytes(r['size'])} {r['dep'] / r['lb']:.2f}x"
                      for r in over))


def print_checks(rs, skipped):
    lb = _against_lbnet(rs)
    if lb:
        print("\nnetwork bound (LBnet, benchmarks/han_vs_selectors.py): deployed/LBnet at >= 8 MiB: "
              + ", ".join(f"{r['coll']} {r['nodes']}x{r['ppn']} {human_bytes(r['size'])} "
                          f"{r['dep'] / r['lb']:.2f}" for r in lb))
    tr = [r for r in rs if r["kind"] == "train" and r["dep"] and r["arm"]]
    same = [r for r in tr if abs(r["dep"] / r["arm"] - 1) <= 1e-3]
    print(f"\ndeployed vs the tuner's own measurement of the chosen arm at trained points: "
          f"{len(same)}/{len(tr)} within 0.1 %")
    for r in tr:
        if r not in same:
            print(f"  {r['coll']} {r['nodes']}x{r['ppn']} {human_bytes(r['size'])}: {r['chosen']}, "
                  f"deployed {r['dep'] * 1e6:.1f} us vs tuned {r['arm'] * 1e6:.1f} us (ran {r['ran']})")
    fails = [(r, k, v) for r in rs for k, v in r["status"].items() if k != "arm" and v not in (None, "ok")]
    if fails:
        print("\nfailed points (recorded with their reason, never given a time): "
              + "; ".join(f"{k} {r['coll']} {r['nodes']}x{r['ppn']} {human_bytes(r['size'])} {v}"
                          for r, k, v in fails))
    missing = sum(1 for r in rs for k, v in r["status"].items() if k != "arm" and v is None)
    if missing:
        print(f"\nnot measured yet: {missing} measurements of {3 * len(rs)} (a run without --no-run "
              f"measures them)")
    if skipped:
        print("\nnot measurable here (SMPI_SHARED_MALLOC maps past vm.max_map_count), skipped: "
              + "; ".join(f"{c} {n}x{p} {human_bytes(m)}" for c, n, p, m in skipped))
