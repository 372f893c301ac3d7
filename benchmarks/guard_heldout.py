#!/usr/bin/env python3
"""The guard (COLLTUNE_GUARD, docs/interposer.md) on the layout best_of_both's tuner
never saw: its committed deployment, with and without the guard, and the rules file
`deploy --guard` writes from the same table, against the selector it runs with,
measured side by side in one run (issue 18: "no point more than 2 % slower than the
library default").

    .venv/bin/python benchmarks/guard_heldout.py --platform fattree64x12            # resumable
    .venv/bin/python benchmarks/guard_heldout.py --platform fattree64x12 --no-run   # reprint
    .venv/bin/python benchmarks/guard_heldout.py --platform dragonfly --layout 16x12 --no-committed
    .venv/bin/python benchmarks/guard_heldout.py --platform dragonfly --layout all --no-run

Per collective, at best_of_both's held-out layout and its sizes, four launches: the bench
under the deployment (benchmarks/results/best_of_both/PLATFORM.colltune.rules, kept here
as PLATFORM-deployed.colltune.rules for the reprint; --cfg=smpi/coll-selector:ompi), the
same with COLLTUNE_GUARD=N, the rules file of `deploy --guard`
(PLATFORM-guard.colltune.rules here: where nothing was measured, the arm with the smallest
worst slowdown, no margin over the default, docs/rules.md) with COLLTUNE_GUARD=N, and the
`ompi` selector alone. Where the two rules files agree at a point, the guarded launch of
the committed file is that of `deploy --guard`'s too (same rule, same guard, a
deterministic simulator) and is not run twice; where they differ, `deploy --guard`'s file
also runs without the guard (its rule's own time, for the exploration). --layout measures
another layout of the plan (a trained one), and --no-committed there leaves out the
committed file: `deploy --guard`'s rules with the guard at every point, without it only
where the guard chose the library (the rule's own time, for the exploration), and the
selector; --layout all reprints every layout and deploy --guard's geometric means over
them by set. Every launch has the same warm-up, 2(N+1) + 1 calls: the guard's exploration
and the call that decides (one allreduce of two doubles, then the verdict), so the timed
call runs what the guard decided (SimGrid is deterministic: 1 timed call).
The exploration is not in that time; `amortized` adds it back from the measured times:
(N+1) calls of the library and N+1 of the rule's algorithm, over CALLS calls of the
point (the deciding allreduce, of two doubles, is left out). The interposer's report
gives the guard's verdict per point. One store: benchmarks/results/guard_heldout/.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import best_of_both as bob  # noqa: E402
from best_of_both_report import COLLECTIVES, SLOWER, _gm, _times  # noqa: E402
from colltune.campaign import Campaign  # noqa: E402
from colltune.plan import BenchSpec  # noqa: E402
from colltune.providers.base import ALGORITHM, Algorithm  # noqa: E402
from colltune.providers.colltune import guard_decided, read_report  # noqa: E402
from colltune.providers.openmpi import LabelledMods  # noqa: E402
from colltune.session import Session  # noqa: E402
from colltune.exporters.colltune_rules import match, parse_rules  # noqa: E402
from colltune.sizes import human_bytes, parse_list  # noqa: E402

OUT = Path("benchmarks/results/guard_heldout")
CALLS = 100          # calls of one point a job makes, for the amortized column
SIZES = sorted(set(parse_list(bob.TRAIN_SIZES) + parse_list(bob.HELDOUT_SIZES)))
# the store's "guard" label of a guarded launch (verdict below): the origin's words
KEPT, UNGUARDED = "guard kept it", "not guarded"


def guarded(coll: str, rules_text: str, n: int) -> Algorithm:
    base = bob.deployed_algorithm(coll, rules_text)
    return Algorithm(bob.DEPLOYED, coll, f"{base.label}-guard{n}", ALGORITHM)


def measured_deployment(platform: str, refresh: bool) -> Path:
    """The committed deployment this store measured: a copy of best_of_both's rules file
    (PLATFORM-deployed.colltune.rules here), so that a reprint reads the points of the file
    they were measured with after best_of_both is re-run; a run takes best_of_both's
    current file (another file: other labels, measured afresh)."""
    snap, src = OUT / f"{platform}-deployed.colltune.rules", bob.OUT / f"{platform}.colltune.rules"
    if refresh and (not snap.exists() or bob._rule_lines(snap.read_text()) != bob._rule_lines(src.read_text())):
        OUT.mkdir(parents=True, exist_ok=True)
        snap.write_text(src.read_text())
    return (snap if snap.exists() else src).resolve()


def guard_rules(platform: str) -> str:
    """The colltune rules file `deploy --guard` writes from best_of_both's table."""
    from colltune.decision import DecisionTable
    from colltune.subcommands.export import make_exporter
    exp = make_exporter("colltune", allow_substitute=True, guarded=True)
    return exp.export(DecisionTable.load(str(bob.OUT / f"{platform}.table.json"))).text


def arms(colls, text: str, gtext: str, guard: int) -> dict:
    """Per collective, the store algorithms: the committed file without and with the
    guard, deploy --guard's file with and without it."""
    return {c: (bob.deployed_algorithm(c, text), guarded(c, text, guard),
                guarded(c, gtext, guard), bob.deployed_algorithm(c, gtext)) for c in colls}


def rule_at(lines, coll: str, n: int, p: int, size: int):
    r = match(lines, coll, n * p, n, p, size)
    return (r.algorithm, tuple(sorted(r.params.items()))) if r else None


def verdict(report: str, rec: dict) -> dict:
    """What the guard decided at the record's point: what ran after its exploration."""
    key = (rec.get("collective"), rec.get("participants"), rec.get("bytes"))
    lines = [r for r in read_report(report)
             if (r.get("collective"), r.get("comm_size"), r.get("bytes")) == key]
    final = guard_decided(lines)
    if not final:
        return {"ran": "unknown (no decided call in the interposer's report)"}
    last = final[-1]
    return {"ran": str(last.get("ran")),     # the verdict in the origin's words
            "guard": str(last["origin"]).split(", ", 1)[1] if last.get("guard") else UNGUARDED}


class GuardedBackend(bob.DeployedBackend):
    """best_of_both's deployed backend; the guarded deployment adds COLLTUNE_GUARD."""

    def __init__(self, backend, rules, smpirun_args, program, guard: int, other: dict):
        super().__init__(backend, rules, smpirun_args, program)
        self.guard, self.other = guard, other     # other: {label: rules path}

    def force(self, alg: Algorithm):
        mods = super().force(alg)
        if alg.provider != bob.DEPLOYED:
            return mods
        rules = self.other.get(alg.label, self.rules)
        env, labels = {**mods.env, "COLLTUNE_RULES": rules}, {**mods.labels, "deployment": rules}
        if alg.label.endswith(f"-guard{self.guard}"):
            report = env["COLLTUNE_REPORT"]
            return LabelledMods(launcher_args=mods.launcher_args, program=mods.program,
                                env={**env, "COLLTUNE_GUARD": str(self.guard)}, labels=labels,
                                per_point=lambda rec: verdict(report, rec))
        return LabelledMods(launcher_args=mods.launcher_args, program=mods.program, env=env,
                            labels=labels, per_point=mods.per_point)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="fattree64x12", choices=sorted(bob.PLANS))
    ap.add_argument("--layout", help="NxP (default: best_of_both's held-out layout of the platform); "
                                     "'all' with --no-run: every layout of the plan and the summary "
                                     "over them")
    ap.add_argument("--committed", action=argparse.BooleanOptionalAction, default=True,
                    help="also launch the committed rules file, with and without the guard "
                         "(--no-committed: only deploy --guard's rules and the selector)")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--guard", type=int, default=1, help="COLLTUNE_GUARD: timed calls per side")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    ap.add_argument("--retry-failed", action="store_true",
                    help="measure recorded failures again (e.g. with a longer --timeout)")
    ap.add_argument("--only-deploy-guard", action="store_true",
                    help="launch only deploy --guard's rules (the other arms as stored)")
    ap.add_argument("--no-run", action="store_true", help="reprint from the store")
    a = ap.parse_args()
    rules = measured_deployment(a.platform, refresh=not a.no_run)
    text = rules.read_text()
    train, held = (bob.layouts(x) for x in bob.PLANS[a.platform])
    if a.layout == "all":
        if not a.no_run:
            ap.error("--layout all only reprints (--no-run); measure one layout at a time")
        return summary_all(a, text, train, held)
    (n, p), = bob.layouts(a.layout) if a.layout else held
    where = "held-out" if (n, p) in held else "trained" if (n, p) in train else "other"
    sizes = SIZES
    colls = a.collectives.split(",")
    OUT.mkdir(parents=True, exist_ok=True)
    store = str(OUT / f"{a.platform}.sqlite")
    cli = {"platform": a.platform, "provider": "both", "default_selector": bob.DEFAULT_SELECTOR,
           "jobs": a.jobs, "timeout": a.timeout, "store": store, "min_reps": 1, "max_reps": 1,
           "warmup": 2 * (a.guard + 1) + 1, "output_dir": tempfile.mkdtemp(prefix="guard-")}
    gpath = OUT / f"{a.platform}-guard.colltune.rules"
    if not a.no_run:
        fresh = guard_rules(a.platform)
        if not gpath.exists() or bob._rule_lines(gpath.read_text()) != bob._rule_lines(fresh):
            gpath.write_text(fresh)     # same rules: the file (its label, its points) stays
    gtext = gpath.read_text()
    algs = arms(colls, text, gtext, a.guard)
    same = same_rule(text, gtext, colls, n, p, sizes)
    if not a.no_run:
        from colltune import native
        session = Session(cli)
        backend = session.backend()
        program = str(native.build(backend.impl, "bench-interposed", session.settings.cache_dir))
        dbk = GuardedBackend(backend, str(rules), [f"--cfg=smpi/coll-selector:{bob.DEFAULT_SELECTOR}"],
                             program, a.guard, {algs[c][k].label: str(gpath.resolve())
                                                for c in colls for k in (2, 3)})

        def run(specs):
            with session.store as st:
                s = Campaign(f"{a.platform}-guard", dbk, st, session.settings,
                             retry_failed=a.retry_failed).run(specs)
            print(f"{s.launches} launches in {s.wall_s:.0f} s, {s.skipped_points} points reused")
        specs = []
        for c in colls:
            sel = [s for s in backend.provider().library.selectors(c) if s.name == bob.DEFAULT_SELECTOR]
            ms = tuple(bob.feasible(c, sizes, n, p))
            if not a.only_deploy_guard:
                specs += [BenchSpec(c, alg, n, p, ms)
                          for alg in [*(algs[c][:2] if a.committed else ()), *sel]]
            # deploy --guard's rules, guarded: where they differ from the committed file's
            # (elsewhere the committed file's guarded launch is theirs), or everywhere
            dg = tuple(m for m in ms if not (a.committed and same[(c, m)]))
            if dg:
                specs.append(BenchSpec(c, algs[c][2], n, p, dg))
        run(specs)
        # the rule's own time (for the exploration), where no other launch has it: where the
        # rules differ, or the guard chose the library (its timed call is then the library's)
        t = _times(store)
        specs = []
        for c in colls:
            need = tuple(m for m in bob.feasible(c, sizes, n, p)
                         if rule_launch_needed(t, c, n, p, m, algs[c], same[(c, m)], a.committed))
            if need:
                specs.append(BenchSpec(c, algs[c][3], n, p, need))
        if specs:
            run(specs)
    report(a, store, colls, algs, n, p, sizes, same, where)
    return 0


def same_rule(text: str, gtext: str, colls, n: int, p: int, sizes) -> dict:
    """(coll, size) -> whether the two rules files run the same rule there."""
    one, two = parse_rules(text), parse_rules(gtext)
    return {(c, m): rule_at(one, c, n, p, m) == rule_at(two, c, n, p, m)
            for c in colls for m in bob.feasible(c, sizes, n, p)}


def rule_time(t, c, n, p, m, algs, same: bool, committed: bool):
    """The time of deploy --guard's rule at a point without the guard: its own launch, the
    committed file's (same rule), or the guarded launch where the rule ran (the guard kept
    it, or a `library` rule, which is not guarded); None where none of them has it."""
    dep, _, dg, dgu = (x.label for x in algs)
    own = t.get((c, n, p, m, bob.DEPLOYED, dgu), (None, None, {}))
    if own[0] is not None:
        return own[1]
    committed_time = t.get((c, n, p, m, bob.DEPLOYED, dep), (None, None))[1]
    if same and committed and committed_time is not None:
        return committed_time
    _, sec, lab = t.get((c, n, p, m, bob.DEPLOYED, dg), (None, None, {}))
    return sec if sec is not None and lab.get("guard") in (KEPT, UNGUARDED) else None


def rule_launch_needed(t, c, n, p, m, algs, same: bool, committed: bool) -> bool:
    """Whether deploy --guard's rule needs a launch without the guard at a point: its
    guarded launch ran the library, and neither an own launch (whatever its status) nor
    the committed file's launch of the same rule says what the rule takes."""
    _, _, dg, dgu = (x.label for x in algs)
    if t.get((c, n, p, m, bob.DEPLOYED, dgu), (None,))[0] is not None or (same and committed):
        return False
    _, sec, lab = t.get((c, n, p, m, bob.DEPLOYED, dg), (None, None, {}))
    return sec is not None and lab.get("guard") not in (KEPT, UNGUARDED)


def summary_all(a, text: str, train, held) -> int:
    """Every layout's report, then deploy --guard's geometric means over all of them, by
    set (trained points, held-out sizes on trained layouts, held-out layout)."""
    gtext = (OUT / f"{a.platform}-guard.colltune.rules").read_text()
    trained_sizes = set(parse_list(bob.TRAIN_SIZES))
    colls = a.collectives.split(",")
    algs = arms(colls, text, gtext, a.guard)
    store = str(OUT / f"{a.platform}.sqlite")
    rows = []
    for n, p in [*train, *held]:
        where = "held-out" if (n, p) in held else "trained"
        pts = report(a, store, colls, algs, n, p, SIZES, same_rule(text, gtext, colls, n, p, SIZES), where)
        rows += [("(c) held-out layout" if where == "held-out" else
                  "(a) trained points" if m in trained_sizes else "(b) held-out sizes", c, row)
                 for c, m, row in pts]
        print()
    print(f"all layouts: `deploy --guard {a.guard}` vs {bob.DEFAULT_SELECTOR}, T({bob.DEFAULT_SELECTOR})/T(x) "
          f"over the points where both were measured")
    groups = sorted({g for g, _, _ in rows}) + sorted({f"all {c}" for _, c, _ in rows}) + ["all points"]
    for g in groups:
        sel = [r for grp, c, r in rows if g in (grp, f"all {c}", "all points")]
        line = f"  {g:<22}"
        for k, name in (("dg", "deploy --guard"), ("dgam", f"amortized over {CALLS}")):
            xs = [r[k] for r in sel if r.get(k)]
            if xs:
                line += (f"  {name} {len(xs):3d} points {_gm(xs):6.3f}x worst {min(xs):6.3f}x "
                         f"slow {sum(1 for x in xs if x < 1 / SLOWER)}")
        print(line)
    return 0


def report(a, store, colls, algs, n, p, sizes, same, where) -> list:
    """Print one layout's table; returns (collective, size, {column: ratio}) per point."""
    t = _times(store)
    sel = bob.DEFAULT_SELECTOR
    print(f"{a.platform}: best_of_both's deployment at its {where} layout {n}x{p} "
          f"({n * p} ranks), without and with COLLTUNE_GUARD={a.guard}, and `deploy --guard`'s "
          f"rules ({a.platform}-guard.colltune.rules) with it, vs SMPI's {sel} selector")
    print(f"SimGrid SMPI, time to completion in us after {2 * (a.guard + 1) + 1} warm-up calls; "
          f"amortized: the guard's exploration (N+1 calls of the library, N+1 of the rule without "
          f"the guard) added back over {CALLS} calls; '=' marks a point where both rules files run "
          f"the same rule (one launch); '-': not launched (--no-committed) or no time")
    cols = ("dep", "guard", "amort", "dg", "dgam")
    names = {"dep": "deployed (committed rules)", "guard": "guarded",
             "amort": f"guarded, amortized over {CALLS}", "dg": "deploy --guard",
             "dgam": f"deploy --guard, amortized over {CALLS}"}
    ratios = {k: [] for k in cols}
    points = []
    explore = 2 * (a.guard + 1)
    fmt = lambda x: f"{x * 1e6:9.1f}" if x else f"{'-':>9}"        # noqa: E731
    rat = lambda x: f"{x:5.2f}x" if x else f"{'-':>6}"              # noqa: E731
    for c in colls:
        dep, grd, dg, _ = (x.label for x in algs[c])
        print(f"\n{c} on {n}x{p}")
        print(f"{'size':>10} {sel:>9} {'deployed':>9} {'guarded':>9} {'amortized':>9} "
              f"{'dep--guard':>10} {'amortized':>9}  {sel + '/':>5}{'dep':<5} {'guard':>6} {'amort':>6} "
              f"{'dep--g':>6} {'amort':>6}  guard's verdict (ran): committed | deploy --guard")
        for m in bob.feasible(c, sizes, n, p):
            get = {k: t.get((c, n, p, m, prov, alg), (None, None, {})) for k, prov, alg in
                   (("sel", "smpi", sel), ("dep", bob.DEPLOYED, dep), ("guard", bob.DEPLOYED, grd),
                    ("dg", bob.DEPLOYED, dg))}
            if same[(c, m)] and get["dg"][1] is None and get["guard"][0] is not None:
                get["dg"] = get["guard"]
            ts, td, tg, tdg = (get[k][1] for k in ("sel", "dep", "guard", "dg"))
            if ts is None or (tdg is None and td is None):
                print(f"{human_bytes(m):>10}  no time: " + ", ".join(
                    f"{k} {get[k][0] or 'not measured'}" for k in ("sel", "dep", "guard", "dg")
                    if get[k][1] is None))
                continue
            amort = ((a.guard + 1) * (ts + td) + (CALLS - explore) * tg) / CALLS if td and tg else None
            rt = rule_time(t, c, n, p, m, algs[c], same[(c, m)], a.committed)
            amort_g = ((a.guard + 1) * (ts + rt) + (CALLS - explore) * tdg) / CALLS if rt and tdg else None
            row = {k: (ts / x if x else None) for k, x in zip(cols, (td, tg, amort, tdg, amort_g))}
            points.append((c, m, row))
            for k in cols:
                if row[k]:
                    ratios[k].append(row[k])
            verdicts = " | ".join(f"{get[k][2].get('guard', '?')} ({get[k][2].get('ran', '?')})"
                                  if get[k][1] else "-" for k in ("guard", "dg"))
            print(f"{human_bytes(m):>10} {fmt(ts)} {fmt(td)} {fmt(tg)} {fmt(amort)} {fmt(tdg):>10} "
                  f"{fmt(amort_g)}  " + " ".join(rat(row[k]) for k in cols)
                  + f" {'=' if same[(c, m)] else ' '} {verdicts}")
    print(f"\nsummary: T({sel})/T(x) over the points where both were measured: geometric mean, "
          f"worst, points more than {round((SLOWER - 1) * 100)} % slower than {sel}")
    for k in cols:
        xs = ratios[k]
        if xs:
            print(f"  {names[k]:<36} {len(xs):3d} points {_gm(xs):6.3f}x  worst {min(xs):6.3f}x  "
                  f"slow {sum(1 for x in xs if x < 1 / SLOWER)}")
    return points


if __name__ == "__main__":
    sys.exit(main())
