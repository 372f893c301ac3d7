"""`colltune verify --deployment DIR`: prove on the real library that a
deployment (colltune.deploy) runs what its decision table says.

1. The library's part (when the deployment has one) goes through the library's
   verifier, as `verify --rules` does: the file is accepted, and at its sample
   points the library runs the file's algorithm (the library's own evidence),
   which is the table's.
2. The whole deployment runs the probe on the real library, the interposer
   preloaded, with the deployment's environment and COLLTUNE_REPORT: at every
   sample point (the first and last size of each of the table's rules and of
   each rule deploy derived for the layout) the interposer's report must name the table's colltune
   algorithm, or ``library`` where the table names the library's algorithm or
   its default decision (what the library then ran is (1)'s evidence). The
   colltune rules file must also say what the table says there.
3. The same points run without the deployment (the library default), back to
   back in the same verify: default time / deployed time per point.

All launches run on this host, or with ``hosts`` > 1 across that many hosts of
an emulated cluster (verify/hosts.py: the netns backend's placement), so the
table's entry for ``hosts`` nodes x ``ranks / hosts`` ranks is the one sampled.
"""
from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import dataclass, field

from .. import deploy as _deploy
from ..decision import DecisionTable
from ..errors import ColltuneError
from . import report_tail

REDUCTIONS = ("reduce", "allreduce")


@dataclass
class DeployPoint:
    collective: str
    nbytes: int
    kind: str              # deploy.COLLTUNE / DEFAULT / LIBRARY
    table_says: str        # the table's rule, as provider:algorithm
    expected: str          # what the interposer must report: colltune's algorithm or "library"
    ran: str = ""
    ok: bool = False
    ratio: float | None = None


@dataclass
class DeploymentReport:
    path: str
    library: str
    ranks: int
    where: str = ""
    library_report: object | None = None      # verify.Report of the library's part
    library_error: str = ""
    points: list[DeployPoint] = field(default_factory=list)
    run_error: str = ""
    seen_layouts: list[str] = field(default_factory=list)   # nodes x ppn the interposer saw
    notes: list[str] = field(default_factory=list)

    @property
    def library_ok(self) -> bool:
        return not self.library_error and (self.library_report is None or self.library_report.ok)

    @property
    def ok(self) -> bool:
        return (self.library_ok and not self.run_error and bool(self.points)
                and all(p.ok for p in self.points))

    def render(self) -> str:
        out = [f"verify deployment {self.path} on {self.library}, "
               f"{self.where or f'{self.ranks} ranks'}"]
        if self.library_report is None and not self.library_error:
            out.append("(1) the library's part: none (the table names none of the library's own "
                       "algorithms; the library runs its default decision)")
        else:
            out.append("(1) the library's part:")
            if self.library_report is not None:
                out += ["    " + ln for ln in self.library_report.render().splitlines()]
            if not self.library_ok:
                why = self.library_error or (
                    self.library_report.evidence if not self.library_report.accepted
                    else "it ran another algorithm than its file at some point")
                verdict = ("REJECTED its part" if self.library_error or not
                           self.library_report.accepted else "did not honour its part")
                out.append(f"    the library {verdict}: {why}")
        seen = (f"; it saw {' and '.join(self.seen_layouts)} (nodes x ranks per node)"
                if self.seen_layouts else "")
        out.append(f"(2) what ran under the deployment at {len(self.points)} sample points "
                   f"(the interposer's COLLTUNE_REPORT{seen}; `library` points: (1) is the "
                   f"evidence)")
        if self.run_error:
            out.append(f"    the deployed run failed: {self.run_error}")
        for p in self.points:
            ratio = f"  default/deployed {p.ratio:.3g}" if p.ratio else ""
            out.append(f"  {'ok  ' if p.ok else 'FAIL'} {p.collective:<10} {p.nbytes:>9} B/rank  "
                       f"table: {p.table_says:<34} ran: {p.ran}{ratio}")
        out += report_tail("default/deployed", [p.ratio for p in self.points], self.notes, self.ok)
        return "\n".join(out)


def sample_points(table: DecisionTable, rules, derived, ranks: int, nodes: int = 1) -> list[DeployPoint]:
    """The first and last size of each rule of the table's entry a communicator of
    `ranks` ranks on `nodes` nodes uses, and of each rule deploy derives for it, of every
    collective the interposer intercepts. `rules`: the deployed colltune rules file;
    `derived`: the rules `deploy` derives from the table (parsed), whose safe rules may
    send sizes between measured ones to the library default (decision.robust_rules)."""
    from ..exporters.colltune_rules import COLLS, match, split_label
    points = []
    ppn = ranks // nodes
    for coll in table.collectives():
        if coll not in COLLS:
            continue
        entry = table.entry(coll, nodes, ppn)
        unit = 4 if coll in REDUCTIONS else 1
        # the table's rules and the rules deploy derived for this layout (a size deploy
        # sends to colltune's algorithm may lie inside one table rule): each range's
        # first size and its last, in whole elements of the reductions' int
        ranges = [(r.min_size, entry.rules[i + 1].min_size - 1 if i + 1 < len(entry.rules) else None)
                  for i, r in enumerate(entry.rules)]
        for line in derived:
            lo_b, hi_b = line.ranges.get("bytes", (0, None))
            if line.collective == coll and line.matches(
                    {"size": ranks, "nodes": nodes, "ppn": ppn, "bytes": lo_b}):
                ranges.append((lo_b, hi_b))
        sizes: set[int] = set()
        for lo_b, hi_b in ranges:
            lo = max(unit, -(-lo_b // unit) * unit)
            sizes.add(lo)
            if hi_b is not None and hi_b // unit * unit > lo:
                sizes.add(hi_b // unit * unit)
        for nbytes in sorted(sizes):
            rule = entry.rule_for(nbytes)
            kind = _deploy.kind_of(table, rule)
            expected = split_label(rule.algorithm)[0] if kind == _deploy.COLLTUNE else "library"
            says_table = f"{rule.provider}:{rule.algorithm}"
            line = match(derived, coll, ranks, nodes, ppn, nbytes)
            safe = line.algorithm if line else "library"
            if safe != expected:            # deploy's safe rule between measured sizes
                says_table += f" -> {safe} (deploy: nothing measured here)"
                kind = _deploy.COLLTUNE if safe != "library" else _deploy.DEFAULT
                expected = safe
            p = DeployPoint(coll, nbytes, kind, says_table, expected)
            line = match(rules, coll, ranks, nodes, ppn, nbytes)
            says = line.algorithm if line else "library"
            if says != expected:
                p.ran = f"not run: the colltune rules file says {says}, the table {expected}"
            points.append(p)
    return points


def verify_deployment(deployment_dir: str, cache_dir: str, ranks: int = 2, reps: int = 20,
                      timeout: float = 300.0, hosts: int = 1,
                      cluster: str | None = None) -> DeploymentReport:
    """hosts > 1: run across that many hosts of the emulated cluster `cluster`
    (None: the only one up)."""
    from .. import mpi
    from ..errors import BackendError, ConfigError
    from ..exporters.colltune_rules import read_rules
    from ..providers.colltune import GUARD_KEPT, GUARD_LIBRARY, guard_decided, read_report
    from . import VERIFIERS
    from . import probe as _probe
    from .hosts import Placement
    manifest, d = _deploy.load(deployment_dir)
    library = manifest["library"]
    try:
        cls = VERIFIERS.get(library)
    except ConfigError:
        raise ConfigError(f"{d}: a deployment for {library} cannot be verified on a real library "
                          f"(verify knows {', '.join(VERIFIERS.names())}); deploy the table for "
                          f"one of them") from None
    try:
        impl = mpi.find(library)
    except mpi.MPINotFound as exc:
        raise BackendError(str(exc)) from None
    placement = (Placement.emulated(impl, hosts, ranks, cluster) if hosts > 1
                 else Placement(impl))
    nodes = placement.nodes
    files = manifest["files"]
    table = DecisionTable.load(str(d / files["table"]))
    report = DeploymentReport(str(d), f"{library} {impl.version}", ranks,
                              placement.describe(ranks), notes=list(manifest.get("notes", [])) + [
                                  f"{name} was edited since it was deployed: verified as it is now"
                                  for name in manifest["edited"]])
    if impl.version != manifest.get("library_version"):
        report.notes.append(f"deployed for {library} {manifest.get('library_version')}, "
                            f"verified on {impl.version}")
    verifier = cls(impl, cache_dir)
    verifier.placement = placement
    # 1. the library's part, with the library's own evidence
    if files.get("library_rules"):
        try:
            report.library_report = verifier.verify(
                str(d / files["library_rules"]), files["library_format"],
                _deploy.library_part(table), ranks, reps, timeout)
        except ColltuneError as exc:
            report.library_error = str(exc)
    # 2. + 3. the whole deployment and the library default, back to back
    from ..exporters.colltune_rules import parse_rules
    rules_exp = _deploy.colltune_rules_exporter(impl, cache_dir, manifest.get("guard", 0))
    derived = rules_exp.export(table, manifest.get("target"))
    # the deployed file read as the interposer will: an unknown algorithm is an error here
    report.points = sample_points(table, read_rules(str(d / files["colltune_rules"]),
                                                    rules_exp.catalogue),
                                  parse_rules(derived.text, "<derived from the table>"), ranks, nodes)
    run = [p for p in report.points if not p.ran]
    if not run:
        return report
    args = [f"{p.collective}:{p.nbytes}" for p in run]
    cmd = placement.command(ranks, shlex.split(manifest["launch"].get("COLLTUNE_MPIRUN_ARGS", "")))
    with tempfile.TemporaryDirectory(prefix="colltune-deploy-verify-") as tmp:
        rep_path = os.path.join(tmp, "report.jsonl")
        env = {**impl.run_env(), **manifest["env"], "COLLTUNE_REPORT": rep_path}
        default = _probe.launch(placement.command(ranks), verifier.tools, args, reps,
                                impl.run_env(), timeout)
        deployed = _probe.launch(cmd, verifier.tools, args, reps, env, timeout)
        seen = read_report(rep_path)
    if not deployed.ok:
        last = [ln.strip() for ln in deployed.output.splitlines() if ln.strip()][-3:]
        report.run_error = f"$ {shlex.join(deployed.command)}: " + " | ".join(last)
    report.seen_layouts = sorted({f"{r.get('nodes')}x{r.get('ppn')}" for r in seen
                                  if r.get("comm_size") == ranks})
    for i, p in enumerate(run):
        here = [r for r in seen if r.get("collective") == p.collective
                and r.get("comm_size") == ranks and r.get("bytes") == p.nbytes]
        # the guard (COLLTUNE_GUARD) tries both first; what counts is what it decided
        decided = guard_decided(here)
        phases = {r.get("guard") for r in decided}
        guard_lib, guard_kept = GUARD_LIBRARY in phases, GUARD_KEPT in phases
        ran = sorted({str(r.get("ran")) for r in decided or here})
        seen_nodes = sorted({r.get("nodes") for r in here if r.get("nodes") is not None})
        p.ran = ", ".join(ran) or "nothing reported by the interposer at this point"
        p.ok = ran == [p.expected] or (guard_lib and ran == ["library"])
        if guard_lib and p.ok:
            p.ran += f" (the guard measured the library faster than {p.expected} here)"
        elif guard_kept and p.ok:
            p.ran += " (the guard measured it faster than the library)"
        if seen_nodes and seen_nodes != [nodes]:
            p.ok = False
            p.ran += (f" [the interposer saw {', '.join(map(str, seen_nodes))} node(s), "
                      f"not {nodes}]")
        if p.ok and p.kind != _deploy.COLLTUNE:
            p.ran += f" ({'its default decision' if p.kind == _deploy.DEFAULT else 'its rules file'})"
        if default.times.get(i) and deployed.times.get(i):
            p.ratio = default.times[i] / deployed.times[i]
    return report


__all__ = ["verify_deployment", "DeploymentReport", "sample_points"]
