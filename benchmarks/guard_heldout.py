#!/usr/bin/env python3
"""The guard (COLLTUNE_GUARD, docs/interposer.md) on the layout best_of_both's tuner
never saw: its committed deployment, with and without the guard, against the selector
it runs with, measured side by side in one run (issue 18: "no point more than 2 %
slower than the library default").

    .venv/bin/python benchmarks/guard_heldout.py --platform fattree64x12            # resumable
    .venv/bin/python benchmarks/guard_heldout.py --platform fattree64x12 --no-run   # reprint

Per collective, at best_of_both's held-out layout and its sizes, three launches: the
bench under the deployment (benchmarks/results/best_of_both/PLATFORM.colltune.rules,
--cfg=smpi/coll-selector:ompi), the same with COLLTUNE_GUARD=N, and the `ompi`
selector alone. Every launch has the same warm-up, 2(N+1) + 1 calls: the guard's
exploration and the call that decides (one allreduce of two doubles, then the verdict),
so the timed call runs what the guard decided (SimGrid is deterministic: 1 timed call).
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
from colltune.sizes import human_bytes, parse_list  # noqa: E402

OUT = Path("benchmarks/results/guard_heldout")
CALLS = 100          # calls of one point a job makes, for the amortized column


def guarded(coll: str, rules_text: str, n: int) -> Algorithm:
    base = bob.deployed_algorithm(coll, rules_text)
    return Algorithm(bob.DEPLOYED, coll, f"{base.label}-guard{n}", ALGORITHM)


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
            "guard": str(last["origin"]).split(", ", 1)[1] if last.get("guard") else "not guarded"}


class GuardedBackend(bob.DeployedBackend):
    """best_of_both's deployed backend; the guarded deployment adds COLLTUNE_GUARD."""

    def __init__(self, backend, rules, smpirun_args, program, guard: int):
        super().__init__(backend, rules, smpirun_args, program)
        self.guard = guard

    def force(self, alg: Algorithm):
        mods = super().force(alg)
        if alg.provider == bob.DEPLOYED and alg.label.endswith(f"-guard{self.guard}"):
            report = mods.env["COLLTUNE_REPORT"]
            return LabelledMods(launcher_args=mods.launcher_args, program=mods.program,
                                env={**mods.env, "COLLTUNE_GUARD": str(self.guard)},
                                labels=dict(mods.labels),
                                per_point=lambda rec: verdict(report, rec))
        return mods


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="fattree64x12", choices=sorted(bob.PLANS))
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--guard", type=int, default=1, help="COLLTUNE_GUARD: timed calls per side")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    ap.add_argument("--retry-failed", action="store_true",
                    help="measure recorded failures again (e.g. with a longer --timeout)")
    ap.add_argument("--no-run", action="store_true", help="reprint from the store")
    a = ap.parse_args()
    rules = (bob.OUT / f"{a.platform}.colltune.rules").resolve()
    text = rules.read_text()
    (n, p), = bob.layouts(bob.PLANS[a.platform][1])
    sizes = sorted(set(parse_list(bob.TRAIN_SIZES) + parse_list(bob.HELDOUT_SIZES)))
    colls = a.collectives.split(",")
    OUT.mkdir(parents=True, exist_ok=True)
    store = str(OUT / f"{a.platform}.sqlite")
    cli = {"platform": a.platform, "provider": "both", "default_selector": bob.DEFAULT_SELECTOR,
           "jobs": a.jobs, "timeout": a.timeout, "store": store, "min_reps": 1, "max_reps": 1,
           "warmup": 2 * (a.guard + 1) + 1, "output_dir": tempfile.mkdtemp(prefix="guard-")}
    algs = {c: (bob.deployed_algorithm(c, text), guarded(c, text, a.guard)) for c in colls}
    if not a.no_run:
        from colltune import native
        session = Session(cli)
        backend = session.backend()
        program = str(native.build(backend.impl, "bench-interposed", session.settings.cache_dir))
        dbk = GuardedBackend(backend, str(rules), [f"--cfg=smpi/coll-selector:{bob.DEFAULT_SELECTOR}"],
                             program, a.guard)
        specs = []
        for c in colls:
            sel = [s for s in backend.provider().library.selectors(c) if s.name == bob.DEFAULT_SELECTOR]
            for alg in [*algs[c], *sel]:
                specs.append(BenchSpec(c, alg, n, p, tuple(bob.feasible(c, sizes, n, p))))
        with session.store as st:
            s = Campaign(f"{a.platform}-guard", dbk, st, session.settings,
                         retry_failed=a.retry_failed).run(specs)
        print(f"{s.launches} launches in {s.wall_s:.0f} s, {s.skipped_points} points reused")
    report(a, store, colls, algs, n, p, sizes)
    return 0


def report(a, store, colls, algs, n, p, sizes) -> None:
    t = _times(store)
    sel = bob.DEFAULT_SELECTOR
    print(f"{a.platform}: best_of_both's deployment at its held-out layout {n}x{p} "
          f"({n * p} ranks), without and with COLLTUNE_GUARD={a.guard}, vs SMPI's {sel} selector")
    print(f"SimGrid SMPI, time to completion in us after {2 * (a.guard + 1) + 1} warm-up calls; "
          f"amortized: the guard's exploration added back over {CALLS} calls")
    ratios = {"dep": [], "guard": [], "amort": []}
    for c in colls:
        dep, grd = (x.label for x in algs[c])
        print(f"\n{c} on {n}x{p}")
        print(f"{'size':>10} {sel:>10} {'deployed':>10} {'guarded':>10} {'amortized':>10}  "
              f"{sel + '/dep':>9} {sel + '/guard':>10} {sel + '/amort':>10}  guard's verdict (ran)")
        for m in bob.feasible(c, sizes, n, p):
            get = {k: t.get((c, n, p, m, prov, alg), (None, None, {})) for k, prov, alg in
                   (("sel", "smpi", sel), ("dep", bob.DEPLOYED, dep), ("guard", bob.DEPLOYED, grd))}
            ts, td, tg = (get[k][1] for k in ("sel", "dep", "guard"))
            status = {k: v[0] for k, v in get.items()}
            if None in (ts, td, tg):
                print(f"{human_bytes(m):>10}  no time: " + ", ".join(
                    f"{k} {status[k] or 'not measured'}" for k in ("sel", "dep", "guard") if get[k][1] is None))
                continue
            explore = 2 * (a.guard + 1)
            amort = ((a.guard + 1) * (ts + td) + (CALLS - explore) * tg) / CALLS
            lab = get["guard"][2]
            row = (ts / td, ts / tg, ts / amort)
            for k, r in zip(("dep", "guard", "amort"), row):
                ratios[k].append(r)
            print(f"{human_bytes(m):>10} {ts * 1e6:10.1f} {td * 1e6:10.1f} {tg * 1e6:10.1f} "
                  f"{amort * 1e6:10.1f}  {row[0]:8.3f}x {row[1]:9.3f}x {row[2]:9.3f}x  "
                  f"{lab.get('guard', '?')} ({lab.get('ran', '?')})")
    print(f"\nsummary over {len(ratios['dep'])} points: T({sel})/T(x), geometric mean, worst, "
          f"points more than {round((SLOWER - 1) * 100)} % slower than {sel}")
    for k, name in (("dep", "deployed"), ("guard", "guarded"), ("amort", f"guarded, amortized over {CALLS}")):
        xs = ratios[k]
        if xs:
            print(f"  {name:<32} {_gm(xs):6.3f}x  worst {min(xs):6.3f}x  slow "
                  f"{sum(1 for x in xs if x < 1 / SLOWER)}")


if __name__ == "__main__":
    sys.exit(main())
