"""Verify coll/tuned and coll/han rules files on the real Open MPI.

coll/tuned reports nothing about its rules file (the messages are compiled out
of release builds), so acceptance is shown by behaviour: libmpi exports its
algorithm functions (ompi_coll_base_<coll>_intra_*), the tracer wraps them, and
at each sample point the functions that ran with the file must be those that
run when the file's algorithm is forced with coll_tuned_<coll>_algorithm.
coll/han prints what it read (coll_han_verbose >= 5: "read N rules"; and
coll_han_dump_dynamic_rules lists every rule), which is compared with the file.
"""
from __future__ import annotations

import math
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import InputError
from ..exporters.openmpi_tuned import COLL_ID, DEFAULT_ID, DEFAULT_NAME, OpenMPITunedExporter, columns
from ..providers.openmpi import OMPI_NAME, OpenMPIProvider, ran
from . import VERIFIERS, Point, Report, acceptance_from_points, compare, default_note
from . import probe as _probe
from .hosts import Placement
from .rules import TOTAL_SIZE_KEY, RulesSyntaxError, parse_han, parse_tuned
from .static_check import check_tuned
from .table_check import check_against_table

REDUCTIONS = ("reduce", "allreduce", "reduce_scatter_block")
# (collective, algorithm, bytes per rank) appended by the acceptance canary: each
# differs from 5.0's default choice on 2-4 ranks (the canary checks that it does).
CANARIES = (("barrier", "linear", 0), ("scatter", "linear_nb", 64), ("gather", "linear_sync", 64),
            ("bcast", "basic_linear", 64), ("allgather", "ring", 64))
_DUMP = re.compile(r"dump_dynamic_rules \d+ collective \d+ \((\w+)\) topology level (\d+) \(\w+\) "
                   r"configuration size (\d+) mes+age size (\d+) -> collective component \d+ \((\w+)\)")
_READ = re.compile(r"init_dynamic_rules read (\d+) rules from (\S+)")


def _params_differ(point: Point, resolved) -> str | None:
    """The file's fan-in/out and segment size at point against the table rule's."""
    want = columns(point.collective, resolved.algorithm, resolved.params)[:2]
    got = tuple(point.force[2:4])
    if want == got:
        return None
    return (f"the table says {point.expected} fan-in/out {want[0]} segsize {want[1]}, "
            f"the file fan-in/out {got[0]} segsize {got[1]}")


def sample_sizes(coll: str, rows: list[tuple[int, ...]], ranks: int) -> list[int]:
    """Bytes per rank at the start of each rule and just below the next one."""
    if coll == "barrier":
        return [0]
    unit = 4 if coll in REDUCTIONS else 1
    div = ranks if coll in TOTAL_SIZE_KEY else 1
    out: list[int] = []
    for i, row in enumerate(rows):
        lo = max(unit, math.ceil(row[0] / div / unit) * unit)
        cands = [lo]
        if i + 1 < len(rows):
            hi = (rows[i + 1][0] - 1) // div // unit * unit
            if hi > lo:
                cands.append(hi)
        out += [c for c in cands if c not in out]
    return out


_TUNED_ON = re.compile(r"#.*tuned on (\d+)x(\d+)")


def default_ranks(rules, text: str, table=None, lo: int = 2, hi: int = 4) -> int:
    """The comm size a verify runs by default: the largest tuned one in lo..hi
    (from the table, else from the export's "tuned on NxP" block comments), else
    the largest size in lo..hi where a block of the file starts, else lo."""
    if table is not None:
        tuned = {e.nodes * e.ppn for e in table.entries if e.collective in rules.blocks}
    else:
        tuned = {int(n) * int(p) for n, p in _TUNED_ON.findall(text)}
    starts = {c for blocks in rules.blocks.values() for c, _ in blocks}
    for sizes in (tuned, starts):
        inside = [c for c in sizes if lo <= c <= hi]
        if inside:
            return max(inside)
    return lo


@VERIFIERS.register("openmpi")
class OpenMPIVerifier:
    formats = ("openmpi-tuned", "openmpi-han")

    def __init__(self, impl, cache_dir: str):
        self.impl = impl
        self.provider = OpenMPIProvider(impl, cache_dir)
        self.tools = _probe.build(impl, cache_dir)
        self.placement = Placement(impl)      # where the launches run (verify/hosts.py)

    def guess_format(self, text: str) -> str:
        toks = [t for ln in text.splitlines() for t in ln.split("#", 1)[0].split()]
        return "openmpi-han" if len(toks) > 1 and not toks[1].isdigit() else "openmpi-tuned"

    def _observe(self, ranks: int, points: list[Point], env: dict, reps: int, timeout: float):
        cmd = self.placement.command(ranks, ["-x", "COLLTUNE_TRACE_DIR",
                                             "-x", f"LD_PRELOAD={self.tools.tracer}"])
        return _probe.launch(cmd, self.tools, [f"{p.collective}:{p.nbytes}" for p in points], reps,
                             {**self.impl.run_env(), **env}, timeout)

    def verify(self, path: str, fmt: str, table, ranks: int | None, reps: int,
               timeout: float) -> Report:
        text = open(path).read()
        if fmt == "openmpi-han":
            return self._verify_han(path, text, ranks or 2, timeout)
        notes = []
        malformed = ""         # what Open MPI's reader refuses or misreads in the file
        try:
            try:
                rules = parse_tuned(text, path)
            except RulesSyntaxError:
                raise
            except InputError as exc:      # e.g. a first rule not at 0: run what it means
                rules, malformed = parse_tuned(text, path, strict=False), str(exc)
        except RulesSyntaxError as exc:
            # the numbers do not line up with the format (a column or line missing):
            # what the file means, and so which points to run, cannot be told
            return Report("openmpi", fmt, path, ranks or 2, False,
                          f"not a valid coll/tuned rules file, so what Open MPI makes of it "
                          f"cannot be told: {exc}", notes=notes)
        ranks = ranks or default_ranks(rules, text, table)
        ids = {c: self.provider.algorithm_ids(c) for c in OMPI_NAME}
        exporter = None
        if table is not None:
            exporter = OpenMPITunedExporter()
            exporter.allow_substitute = True
        static = check_tuned(rules, ranks, ids, self.impl.version, table, exporter)
        if malformed:         # a problem of the file, run or not
            static.problems.append(malformed)
        points, unchecked = [], []
        names = {coll: {**{i: n for n, i in self.provider.algorithm_ids(coll).items()},
                        DEFAULT_ID: DEFAULT_NAME} for coll in OMPI_NAME}
        for coll in rules.blocks:
            if coll not in OMPI_NAME:
                unchecked.append(f"{coll}: not a collective the probe runs")
                continue
            if not rules.blocks[coll]:
                unchecked.append(f"{coll}: the file has no communicator-size block for it")
                continue
            applies = max([c for c, _ in rules.blocks[coll] if c <= ranks],
                          default=rules.blocks[coll][0][0])
            notes.append(f"{coll}: {ranks} ranks use the file's block for comm size {applies}")
            block = rules.lookup_block(coll, ranks)
            for nbytes in sample_sizes(coll, block, ranks):
                alg, fan, seg = rules.lookup(coll, ranks, nbytes)[1:4]
                name = names[coll].get(alg, f"#{alg}")
                detail = " ".join(f"{k} {v}" for k, v in (("fan-in/out", fan), ("segsize", seg)) if v)
                points.append(Point(coll, nbytes, name, (coll, alg, fan, seg), detail))
        if not points:
            return Report("openmpi", fmt, path, ranks, False, "no sample point to run",
                          unchecked=unchecked, notes=notes, static=static)
        env_file = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                    "OMPI_MCA_coll_tuned_dynamic_rules_filename": path,
                    **self.provider.takeover_env()}
        default = _probe.require_ok(self._observe(ranks, points, {}, reps, timeout),
                                    "the run with the library default")
        with_file = self._observe(ranks, points, env_file, reps, timeout)
        if not with_file.ok:
            # the library aborted with the file (e.g. an algorithm number it does not
            # have at a sampled point: MPI_ERR_ARG): the file is not usable as it is
            last = [ln.strip() for ln in with_file.output.splitlines()
                    if any(c.isalnum() for c in ln)]
            why = " | ".join(ln for ln in last if "MPI_ERR" in ln or "error" in ln.lower())[:400] \
                or (last[-1][:300] if last else "no output")
            return Report("openmpi", fmt, path, ranks, False,
                          f"the run with the file failed where the library default runs: {why}",
                          unchecked=unchecked, notes=notes, static=static)
        forced = {key: self._observe(ranks, points, self._force_env(*key), reps, timeout)
                  for key in dict.fromkeys(p.force for p in points)}
        results = compare(points, default, with_file, forced)
        for i, r in enumerate(results):
            p = r.point
            if p.expected == DEFAULT_NAME:     # algorithm 0: coll/tuned's fixed decision
                r.default = True
                if r.honoured:
                    fns = dict.fromkeys(f.replace("ompi_coll_base_", "")
                                        for _, calls, _ in with_file.signature(i) for f in calls)
                    r.ran = (f"the fixed decision: {' > '.join(fns) or 'no traced function'} "
                             f"(as forced coll_tuned_{OMPI_NAME[p.collective]}_algorithm=0"
                             + ("" if r.distinguishes else "; the untouched library too") + ")")
                continue
            if r.honoured:                     # the arguments the tracer saw it called with
                own = {f.replace("ompi_coll_base_", "") for _, calls, _ in
                       with_file.signature(i, p.collective) for f in calls if "(" in f}
                if own:
                    r.ran += f": {', '.join(sorted(own))}"
            unit = 4 if p.collective in REDUCTIONS else 1
            really = ran(p.collective, p.expected, p.nbytes // unit, ranks, p.force[3], unit)
            if really != p.expected:
                r.ran += f" [Open MPI's own fallback runs {really} here]"
        accepted, evidence = acceptance_from_points(results)
        if not accepted and not malformed and not any(r.distinguishes for r in results):
            accepted, evidence = self._canary(path, text, rules, ranks, timeout, evidence)
        if table is not None:
            notes += check_against_table(table, "openmpi", results, ranks,
                                         lambda c: set(self.provider.algorithm_ids(c)),
                                         lambda p: DEFAULT_NAME, _params_differ)
        notes += default_note(results, "coll/tuned's dynamic rules, and "
                              + (", ".join(f"{k[len('OMPI_MCA_'):]}=0" for k in
                                           self.provider.takeover_env()) or "nothing else")
                              + ": on several nodes the untouched 5.0 runs coll/han")
        return Report("openmpi", fmt, path, ranks, accepted, evidence, results, unchecked, notes,
                      static)

    def _canary(self, path: str, text: str, rules, ranks: int, timeout: float,
                why: str) -> tuple[bool, str]:
        """When no sample point tells the file from the default: a copy of the
        file with one more collective appended (and the count raised) must make
        Open MPI run that collective's rule. coll/tuned reads the whole file or
        nothing, so the copy being read shows the original's body parses."""
        for coll, alg_name, nbytes in CANARIES:
            if coll in rules.blocks:
                continue
            ids = self.provider.algorithm_ids(coll)
            if alg_name not in ids:
                continue
            alg = ids[alg_name]
            cols = " 0" if rules.version > 1 else ""
            body = re.sub(r"^(\s*\d+)", lambda m: str(int(m.group(1)) + 1),
                          "\n".join(ln if not ln.lstrip().startswith(("#", "rule-file")) else ""
                                    for ln in text.splitlines()).lstrip("\n"), count=1)
            header = "rule-file-version-2\n" if rules.version > 1 else ""
            copy = Path(tempfile.mkdtemp(prefix="colltune-canary-")) / Path(path).name
            copy.write_text(f"{header}{body}\n{COLL_ID[coll]}\n1\n1 1\n0 {alg} 0 0{cols}\n")
            point = [Point(coll, nbytes, alg_name, (coll, alg, 0, 0))]
            env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                   "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(copy),
                   **self.provider.takeover_env()}
            default = self._observe(ranks, point, {}, 1, timeout)
            canary = self._observe(ranks, point, env, 1, timeout)
            forced = self._observe(ranks, point, self._force_env(coll, alg, 0, 0), 1, timeout)
            shutil.rmtree(copy.parent, ignore_errors=True)
            if not (default.ok and canary.ok and forced.ok):
                continue
            res = compare(point, default, canary, {point[0].force: forced})[0]
            if res.distinguishes:
                if res.honoured:
                    return True, (f"no sample point differs from the default, but a copy of the file "
                                  f"with a {coll} rule ({alg_name}) appended was read: that rule ran")
                return False, (f"no sample point differs from the default, and a copy of the file "
                               f"with a {coll} rule appended was not read either: the file does "
                               f"not parse to its end (Open MPI drops it)")
        return False, why

    def _force_env(self, coll: str, alg: int, fan: int, seg: int) -> dict[str, str]:
        """The provider's forcing of algorithm number alg with the rule's fan-out and
        segment size."""
        return self.provider.forcing_env(coll, alg, seg, fan)

    def _verify_han(self, path: str, text: str, ranks: int, timeout: float) -> Report:
        expected = parse_han(text, path)
        env = {"OMPI_MCA_coll_han_use_dynamic_file_rules": "1",
               "OMPI_MCA_coll_han_dynamic_rules_filename": path,
               "OMPI_MCA_coll_han_dump_dynamic_rules": "1", "OMPI_MCA_coll_han_verbose": "5"}
        obs = _probe.require_ok(self._observe(ranks, [Point("barrier", 0, "")], env, 1, timeout),
                                "the run with the HAN rules file")
        first_pid = re.search(r"\[[^\]]*:(\d+)\] coll:han", obs.output)
        lines = [ln for ln in obs.output.splitlines()
                 if first_pid and f":{first_pid.group(1)}]" in ln]
        dumped = [(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5))
                  for m in map(_DUMP.search, lines) if m]
        read = [m for m in map(_READ.search, lines) if m]
        problems = [ln.split("] ", 1)[-1] for ln in lines
                    if "error" in ln or "could not fully read" in ln or "invalid" in ln]
        if read and int(read[0].group(1)) == len(expected) and dumped == expected:
            accepted, evidence = True, (f"coll/han says it read {read[0].group(1)} rules from "
                                        f"{read[0].group(2)}, and its dump equals the file")
        elif problems:
            accepted, evidence = False, "coll/han dropped the file: " + " | ".join(problems[:3])
        else:
            accepted, evidence = False, (f"coll/han's dump ({len(dumped)} rules) differs from "
                                         f"the file ({len(expected)} rules): the file was not used")
        return Report("openmpi", "openmpi-han", path, ranks, accepted, evidence, unchecked=[
            "which component ran: coll/han steps aside on single-node communicators, so its "
            "choices only run across several hosts"])
