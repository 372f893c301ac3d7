#!/usr/bin/env python3
"""The deployed best of both vs SMPI's `ompi` and `mpich` selectors, tuned by
colltune's tuner and evaluated also where it did not train (issue 18).

    .venv/bin/python benchmarks/best_of_both.py --platform dragonfly            # resumable
    .venv/bin/python benchmarks/best_of_both.py --platform dragonfly --no-run   # reprint, seconds
    .venv/bin/python benchmarks/best_of_both.py --platform dragonfly --evaluate 96x1  # a joined layout
    .venv/bin/python benchmarks/best_of_both.py --platform fattree64x12 --train 64x12 \
        --heldout '' --collectives bcast,allreduce --train-sizes 8,512,32K,2M --heldout-sizes 3000,700000

1. Tune: `tune --provider both --strategy exhaustive` (colltune.commands.run_tuning, what the
   CLI calls) on the TRAINING layouts and sizes. The candidates are colltune's algorithms (the
   arms the table may choose besides the library default) and the `ompi`/`mpich` selectors;
   SMPI's own algorithms are left out (`--algorithms`): on SMPI they are never chosen
   (docs/deploy.md). One table for the platform (the layouts' entries together).
2. Deploy: `colltune deploy --library smpi` (colltune.deploy.deploy) writes colltune's rules
   file and the selector the job runs with (`ompi`, the `--default-selector`).
3. Evaluate: on every training layout and every HELD-OUT layout, at the training sizes and
   at HELD-OUT sizes (not powers of two, between training sizes), three launches per
   collective and layout: the bench under the deployment (linked with the interposer,
   COLLTUNE_RULES = the deployed rules file, --cfg=smpi/coll-selector:ompi: what a job
   runs), and the bench under each selector alone. Measured, never interpolated; the
   interposer's report says what ran at each point.

Everything goes to one store per platform (benchmarks/results/best_of_both/PLATFORM.sqlite):
points already there are not measured again, a crash or timeout (--timeout, per launch) is
recorded as such and never given a time. SimGrid is deterministic: warm-up + 1 timed call.

Points SMPI cannot allocate here are skipped and listed: SMPI_SHARED_MALLOC maps its 1 MiB
block once per MiB of each rank's buffers, and the maps of all ranks must stay below
vm.max_map_count (allgather's receive buffer is ranks x size: at 192 ranks it stops
near 1 MiB per rank; bcast/reduce/allreduce at 768 ranks near 32 MiB).
"""
from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from best_of_both_report import COLLECTIVES, print_report, rows  # noqa: E402
from colltune.campaign import Campaign  # noqa: E402
from colltune.cli import build_parser  # noqa: E402
from colltune.commands import run_tuning  # noqa: E402
from colltune.decision import DecisionTable  # noqa: E402
from colltune.exporters.colltune_rules import HEADER as RULES_HEADER  # noqa: E402
from colltune.plan import DEFAULT_OP, REDUCING, REDUCTION_OPS, BenchSpec  # noqa: E402
from colltune.providers.base import ALGORITHM, Algorithm  # noqa: E402
from colltune.providers.colltune import read_report  # noqa: E402
from colltune.providers.openmpi import LabelledMods  # noqa: E402
from colltune.session import Session  # noqa: E402
from colltune.sizes import parse_list  # noqa: E402

OUT = Path("benchmarks/results/best_of_both")
PLANS = {   # training layouts, held-out layout
    "dragonfly": ("16x12,128x2", "48x4"),
    "fattree64x12": ("64x12", "32x12"),
    "small": ("2x2", "3x1"),         # the whole pipeline in a minute (tests/test_best_of_both.py)
}
# held-out layouts joined after the deployment was tuned (--evaluate measured it there; the
# report's held-out set includes them), of a kind no trained layout is: on the dragonfly
# 96x1 (one rank per node, a number of nodes not a power of two), on the fat-tree, trained
# on 12 ranks per node only, 48x2
JOINED = {"dragonfly": "96x1", "fattree64x12": "48x2"}
TRAIN_SIZES = "8,32,128,512,2K,8K,32K,128K,512K,2M,8M,64M"
HELDOUT_SIZES = "100,3000,50000,700000,3000000,24000000"
SELECTORS = ("ompi", "mpich")
DEFAULT_SELECTOR = "ompi"
DEPLOYED = "deployment"       # the store's provider of the deployed runs
BUILD_LABEL = "interposer_build"    # a deployed point's libcolltune (native sources hash)


def layouts(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in s.split("x")) for s in text.split(",") if s]


def map_limit() -> int:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 65530


def mappable(coll: str, size: int, nprocs: int) -> bool:
    """Can SMPI map the bench's shared buffers (1 MiB blocks) of all ranks? (80 % of the limit)"""
    per_rank = (nprocs + 1) * size if coll == "allgather" else 2 * size
    return nprocs * math.ceil(per_rank / 2**20) <= 0.8 * map_limit()


def feasible(coll: str, sizes: list[int], nodes: int, ppn: int) -> list[int]:
    return [m for m in sizes if mappable(coll, m, nodes * ppn)]


class DeployedBackend:
    """The backend, whose provider runs the deployment for the DEPLOYED algorithm
    (the interposed bench, the rules file, the selector) and forces anything else
    as the backend's own provider does."""

    def __init__(self, backend, rules: str, smpirun_args: list[str], program: str):
        from colltune import native
        self._backend, self.rules, self.args, self.program = backend, rules, smpirun_args, program
        self._reports = tempfile.mkdtemp(prefix="bob-reports-")
        self.build = native.sources_hash()      # the interposer's build (program's native/)

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def provider(self):
        return self

    # the Provider interface a Campaign reads (colltune.providers.base.Provider)
    def key_fields(self, alg: Algorithm) -> dict[str, str]:
        return {} if alg.provider == DEPLOYED else self._backend.provider().key_fields(alg)

    def reuse_labels(self, alg: Algorithm) -> dict:
        """A deployment's point measured with another build of libcolltune, or before the
        build was recorded, is measured again (its rules file's sha is its key)."""
        if alg.provider != DEPLOYED:
            return self._backend.provider().reuse_labels(alg)
        return {BUILD_LABEL: self.build}

    def force(self, alg: Algorithm):
        if alg.provider != DEPLOYED:
            return self._backend.provider().force(alg)
        fd, report = tempfile.mkstemp(suffix=".jsonl", dir=self._reports)
        os.close(fd)

        def ran(rec):
            for r in read_report(report):
                if (r.get("collective"), r.get("comm_size"), r.get("bytes")) == \
                        (rec.get("collective"), rec.get("participants"), rec.get("bytes")):
                    return {"ran": r.get("ran")}
            return {"ran": "unknown (no interposer report at this point)"}
        return LabelledMods(launcher_args=list(self.args), program=self.program,
                            env={"COLLTUNE_RULES": self.rules, "COLLTUNE_REPORT": report},
                            labels={"deployment": self.rules, BUILD_LABEL: self.build}, per_point=ran)


def _rule_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def deployed_algorithm(coll: str, rules_text: str) -> Algorithm:
    """The deployment of one collective as a store 'algorithm': the sha of the rules
    file's lines for that collective (and its version line), so new rules for a
    collective get new points and the other collectives keep theirs."""
    lines = [ln for ln in _rule_lines(rules_text) if ln.split()[0] in (coll, RULES_HEADER)]
    sha = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:10]
    return Algorithm(DEPLOYED, coll, f"rules-{sha}", ALGORITHM)


def deployment(table_path: Path, session) -> tuple[str, list[str]]:
    """`colltune deploy --library smpi` of the table: its rules text and the smpirun
    arguments of the library default it runs with."""
    from colltune.deploy import deploy
    with tempfile.TemporaryDirectory() as d:
        manifest = deploy(str(table_path), "smpi", d, session.settings.cache_dir)
        return Path(d, "colltune.rules").read_text(), manifest["launch"]["COLLTUNE_SMPIRUN_ARGS"].split()


def tune(session, plat: str, colls, train, sizes, retry_crashed: bool = False) -> DecisionTable:
    """The tuner a user runs, per training layout (allgather's feasible sizes differ
    by layout); the entries of all layouts make the platform's table."""
    provider = session.backend().provider()
    args = build_parser().parse_args(["tune"])
    args.retry_failed = frozenset({"crashed"}) if retry_crashed else False
    entries, prov = [], None
    for n, p in train:
        by_sizes: dict[tuple, list[str]] = {}
        for c in colls:
            by_sizes.setdefault(tuple(feasible(c, sizes, n, p)), []).append(c)
        for szs, cs in by_sizes.items():
            arms = sorted({f"colltune:{a.label}" for c in cs for a in provider.colltune.algorithms(c)})
            table, *_ = run_tuning(session, args, cs, [(n, p)], list(szs), f"{plat}-{n}x{p}-train",
                                   "exhaustive", list(SELECTORS), arms)
            entries += table.entries
            prov = prov or {**table.provenance, "campaign": f"{plat}-<layout>-train",
                            "training_sizes": sizes, "training_layouts": [f"{a}x{b}" for a, b in train]}
    return DecisionTable("exhaustive", prov, tuple(entries))


def with_others(table: DecisionTable, table_path: Path) -> DecisionTable:
    """A run over some collectives (--collectives) keeps the platform table's entries of
    the others, so its deployment still covers them with the same rules (and their
    evaluated points, keyed by their rules' sha, stay its)."""
    if not table_path.exists():
        return table
    tuned = set(table.collectives())
    kept = tuple(e for e in DecisionTable.load(str(table_path)).entries if e.collective not in tuned)
    return DecisionTable(table.tuner, table.provenance, kept + tuple(table.entries))


def evaluate(session, plat, colls, lays, sizes, rules, dep_args, retry_deployed: bool = False) -> None:
    from colltune import native
    backend = session.backend()
    program = str(native.build(backend.impl, "bench-interposed", session.settings.cache_dir))
    dbk = DeployedBackend(backend, str(rules), dep_args, program)
    lib = backend.provider().library
    specs = []      # collective by collective: an interrupted run has whole collectives
    for c in colls:
        for n, p in lays:
            szs = tuple(feasible(c, sizes, n, p))
            sels = [s for s in lib.selectors(c) if s.name in SELECTORS]
            for alg in [deployed_algorithm(c, rules.read_text()), *sels]:
                specs.append(BenchSpec(c, alg, n, p, szs))
    launches, wall = 0, 0.0
    with session.store as store:
        if retry_deployed:      # the deployment's recorded failures, measured again first
            mine = [s for s in specs if s.algorithm.provider == DEPLOYED]
            retried = Campaign(f"{plat}-eval", dbk, store, session.settings, retry_failed=True).run(mine)
            launches, wall = retried.launches, retried.wall_s
        summary = Campaign(f"{plat}-eval", dbk, store, session.settings).run(specs)
    print(f"evaluation: {launches + summary.launches} launches in {wall + summary.wall_s:.0f} s, "
          f"{summary.skipped_points} points reused")


def recheck(cli, plat, colls, lays, sizes, rules, dep_args, store_path, op, tolerance=0.02) -> int:
    """The committed deployment measured again with this checkout's libcolltune, in a
    scratch store, at `sizes` on `lays`, against the committed store's times of the same
    points: does the evidence still hold for the current build? Returns the number of
    points off by more than `tolerance` (or not measured now)."""
    from colltune import native
    from best_of_both_report import _times
    with tempfile.TemporaryDirectory(prefix="bob-recheck-") as d:
        session = Session({**cli, "store": os.path.join(d, "recheck.sqlite")})
        backend = session.backend()
        program = str(native.build(backend.impl, "bench-interposed", session.settings.cache_dir))
        dbk = DeployedBackend(backend, str(rules), dep_args, program)
        text = rules.read_text()
        specs = [BenchSpec(c, deployed_algorithm(c, text), n, p, tuple(feasible(c, sizes, n, p)))
                 for c in colls for n, p in lays]
        with session.store as store:
            Campaign(f"{plat}-recheck", dbk, store, session.settings).run([s for s in specs if s.sizes])
        now, before = _times(session.settings.store, op), _times(store_path, op)
    print(f"\n{plat}: the committed deployment ({rules.name}) measured again with this checkout's "
          f"libcolltune vs the committed store (tolerance {tolerance:.0%})")
    print(f"{'layout':>7} {'collective':10} {'size':>10} {'store us':>10} {'now us':>10} {'now/store':>9}  ran now")
    off = 0
    cell = lambda st, t: f"{t * 1e6:10.1f}" if t else f"{st:>10}"      # noqa: E731
    for s in specs:
        for size in s.sizes:
            key = (s.collective, s.nodes, s.ppn, size, DEPLOYED, s.algorithm.label)
            (st0, t0, _), (st1, t1, lab) = before.get(key, ("missing", None, {})), now.get(key, ("missing", None, {}))
            ratio = t1 / t0 if t0 and t1 else None
            bad = ratio is None or abs(ratio - 1) > tolerance
            off += (bad and t0 is not None)
            print(f"{s.nodes:>4}x{s.ppn:<2} {s.collective:10} {size:>10} {cell(st0, t0)} {cell(st1, t1)} "
                  f"{(f'{ratio:8.3f}x' if ratio else '        -')}{' *' if bad and t0 else '  '} {lab.get('ran', '')}")
    print(f"points off by more than {tolerance:.0%} (*): {off}")
    return off


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default="dragonfly", choices=sorted(PLANS))
    ap.add_argument("--train", help="training layouts (default: the platform's plan)")
    ap.add_argument("--heldout", help="held-out layouts, never tuned on ('' for none; default: the "
                                      "platform's plan and the layouts joined since, JOINED)")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--train-sizes", default=TRAIN_SIZES)
    ap.add_argument("--heldout-sizes", default=HELDOUT_SIZES)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per training launch")
    ap.add_argument("--eval-timeout", type=float, default=600.0,
                    help="seconds per evaluation launch (one launch runs all sizes of the deployment)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="launches at once (SMPI is deterministic: the times do not depend on it)")
    ap.add_argument("--store", help="default: benchmarks/results/best_of_both/PLATFORM.sqlite")
    ap.add_argument("--out", default=str(OUT), help="table, rules file, report go here")
    ap.add_argument("--reduction-op", default=DEFAULT_OP, choices=REDUCTION_OPS,
                    help="operator of reduce/allreduce (setting reduction_op): charged-sum also charges "
                         "the selectors' reductions, as colltune's are; its table, rules file and report "
                         "are PLATFORM-charged.*, its points share the store")
    ap.add_argument("--retry-deployed-failures", action="store_true",
                    help="measure the deployment's recorded failures again (e.g. a launch that "
                         "timed out, with a longer --eval-timeout); the selectors' stay recorded")
    ap.add_argument("--retry-training-crashes", action="store_true",
                    help="measure the training points recorded as crashed again (e.g. killed for "
                         "memory while another launch ran beside them: rerun with --jobs 1)")
    ap.add_argument("--no-run", action="store_true", help="reprint from the store and table")
    ap.add_argument("--evaluate", metavar="LAYOUTS",
                    help="measure the committed deployment (table and rules file as they are, not "
                         "tuned again) and the selectors at these layouts of the plan, e.g. a layout "
                         "joined to the held-out ones since the tuning; then reprint")
    ap.add_argument("--recheck", metavar="SIZES",
                    help="measure the committed deployment again at these sizes (all layouts of the "
                         "plan) in a scratch store and compare with the committed store; exit 1 if a "
                         "point differs by more than 2 %%")
    a = ap.parse_args()
    plan = PLANS[a.platform]
    train = layouts(a.train if a.train is not None else plan[0])
    held = layouts(a.heldout if a.heldout is not None else ",".join(filter(None, (plan[1], JOINED.get(a.platform)))))
    colls = a.collectives.split(",")
    tsizes, hsizes = parse_list(a.train_sizes), parse_list(a.heldout_sizes)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    store = a.store or str(out / f"{a.platform}.sqlite")
    stem = a.platform + ("" if a.reduction_op == DEFAULT_OP else "-charged")
    table_path, rules = out / f"{stem}.table.json", out / f"{stem}.colltune.rules"
    cli = {"platform": a.platform, "provider": "both", "default_selector": DEFAULT_SELECTOR, "jobs": a.jobs,
           "reduction_op": a.reduction_op,
           "timeout": a.timeout, "store": store, "min_reps": 1, "max_reps": 1,
           "output_dir": tempfile.mkdtemp(prefix="bob-")}
    session = Session(cli)
    if a.recheck:
        _, dep_args = deployment(table_path, session)
        return 1 if recheck({**cli, "timeout": a.eval_timeout}, a.platform, colls, train + held,
                            parse_list(a.recheck), rules.resolve(), dep_args, store, a.reduction_op) else 0
    if a.evaluate:
        extra = layouts(a.evaluate)
        if not set(extra) <= set(train + held) or not table_path.exists():
            ap.error(f"--evaluate {a.evaluate}: layouts of the plan ({', '.join(f'{n}x{p}' for n, p in train + held)}) "
                     f"with a committed deployment ({table_path}) only: the report shows the plan's")
        _, dep_args = deployment(table_path, session)
        evaluate(Session({**cli, "timeout": a.eval_timeout}), a.platform, colls, extra,
                 sorted(set(tsizes + hsizes)), rules.resolve(), dep_args, a.retry_deployed_failures)
    elif not a.no_run:
        table = with_others(tune(session, a.platform, colls, train, tsizes, a.retry_training_crashes),
                            table_path)
        table.save(str(table_path))
        new, dep_args = deployment(table_path, session)
        # the deployment's store label is the rules file's sha: keep the file (and its
        # "# created" line) when the rules are the same, so a re-run reuses its points
        if not rules.exists() or _rule_lines(rules.read_text()) != _rule_lines(new):
            rules.write_text(new)
        evaluate(Session({**cli, "timeout": a.eval_timeout}), a.platform, colls, train + held,
                 sorted(set(tsizes + hsizes)), rules.resolve(), dep_args, a.retry_deployed_failures)
    table = DecisionTable.load(str(table_path))
    label = {c: deployed_algorithm(c, rules.read_text()).label for c in colls}
    others = []
    if a.reduction_op != DEFAULT_OP:    # the operator-free collectives of the MPI_SUM run
        rest = [c for c in COLLECTIVES if c not in REDUCING + tuple(colls)]
        sum_table, sum_rules = out / f"{a.platform}.table.json", out / f"{a.platform}.colltune.rules"
        if rest and sum_table.exists() and sum_rules.exists():
            others, _ = rows(a.platform, store, DecisionTable.load(str(sum_table)), sum_rules,
                             {c: deployed_algorithm(c, sum_rules.read_text()).label for c in rest},
                             rest, train, held, tsizes, hsizes, feasible, DEFAULT_SELECTOR)
    print_report(a.platform, store, table, rules, label, colls, train, held, tsizes, hsizes,
                 feasible, DEFAULT_SELECTOR, a.reduction_op, others)
    return 0


if __name__ == "__main__":
    sys.exit(main())
