"""What verify checks without running: every communicator-size block of a rules
file, the ones the run's comm size does not reach included.

- Every algorithm the file names must exist in the installed library (Open
  MPI: a coll_tuned_<coll>_algorithm enumerator value, or 0; MPICH: an
  ``algorithm=MPIR_...`` key its libmpi knows). This needs no table.
- With the decision table the file was exported from: the export is
  deterministic, so the table is exported again here with the exporter itself
  (same layout choice, comm-size switch points, size keys — total bytes use
  the block's tuned comm size —, name mapping, default decisions; substitutes
  allowed, as a file that needed none is the same either way), and the file must
  select the same algorithm and parameters as that export wherever a call can
  land: every comm-size range, every message-size range, compared through the
  same lookups the run uses (verify/rules.py).

Each library verifier turns the result into Report lines: a FAIL per problem,
and for every block the run does not reach either "checked statically" or,
without a table, NOT CHECKED.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .rules import TOTAL_SIZE_KEY, TunedRules, csel_leaf, parse_tuned


@dataclass
class Block:
    """A part of a file that applies to comm sizes lo..hi (hi None: and up)."""
    collective: str
    lo: int
    hi: int | None
    run: bool = False               # the run's comm size falls in it
    problems: list[str] = field(default_factory=list)

    @property
    def sizes(self) -> str:
        return comm_sizes(self.lo, self.hi)


def comm_sizes(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"comm size >= {lo}"
    return f"comm size {lo}" if hi == lo else f"comm sizes {lo}-{hi}"


@dataclass
class StaticResult:
    blocks: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)     # each fails verify
    checked_against_table: bool = False
    table_error: str = ""           # the table could not be exported to compare with

    def block_of(self, coll: str, comm_size: int) -> Block | None:
        for b in self.blocks:
            if b.collective == coll and b.lo <= comm_size and (b.hi is None or comm_size <= b.hi):
                return b
        return None

    def add(self, coll: str, comm_size: int, msg: str) -> None:
        self.problems.append(msg)
        b = self.block_of(coll, comm_size)
        if b is not None:
            b.problems.append(msg)

    def lines(self, ranks: int) -> tuple[list[str], int]:
        """Report lines, and the number of blocks neither run nor checked."""
        out = []
        what = "its algorithms exist in the installed library"
        if self.checked_against_table:
            what += "; it says what the table says"
        out.append(f"(4) every block of the file checked without running it ({what}): "
                   + (f"{len(self.problems)} problem(s)" if self.problems else "ok"))
        out += [f"  FAIL {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            out.append(f"  ... and {len(self.problems) - 20} more")
        if self.table_error:
            out.append(f"  (not compared with the table: {self.table_error})")
        unchecked = 0
        for b in self.blocks:
            if b.run:
                continue
            if self.checked_against_table:
                verdict = ("checked statically against the table: "
                           + ("DISAGREES (above)" if b.problems else "agrees"))
            else:
                unchecked += 1
                verdict = ("NOT CHECKED against a table (no --table): only that its "
                           "algorithms exist" + (" (FAIL above)" if b.problems else ""))
            out.append(f"  not run: {b.collective} block for {b.sizes} ({ranks} ranks do not "
                       f"reach it): {verdict}")
        return out, unchecked


def quiet_export(exporter, table, target: str):
    """exporter.export(table, target) without its warnings on stderr."""
    with contextlib.redirect_stderr(io.StringIO()):
        return exporter.export(table, target)


# -- Open MPI coll/tuned ----------------------------------------------------------
def tuned_file_blocks(rules: TunedRules, ranks: int) -> list[Block]:
    out = []
    for coll, blocks in rules.blocks.items():
        if coll.startswith("collective id") or not blocks:
            continue
        run = max([i for i, (c, _) in enumerate(blocks) if c <= ranks], default=0)
        for i, (csize, _) in enumerate(blocks):
            lo = 1 if i == 0 else csize
            hi = blocks[i + 1][0] - 1 if i + 1 < len(blocks) else None
            out.append(Block(coll, lo, hi, run=i == run))
    return out


def _row_at(rows, key: int):
    chosen = rows[0]
    for row in rows:
        if row[0] <= key:
            chosen = row
    return chosen


def _describe_row(row, names: dict[int, str]) -> str:
    alg = names.get(row[1], f"algorithm {row[1]}")
    extra = [f"{what} {v}" for what, v in zip(("fan-in/out", "segsize", "max requests"), row[2:])
             if v]
    return f"{alg} (#{row[1]}{', ' + ', '.join(extra) if extra else ''})"


COLLCOUNT = 22      # coll/tuned's collective ids: COLLTYPE_T of coll_base_functions.h (5.0)


def check_tuned(rules: TunedRules, ranks: int, ids: dict[str, dict[str, int]], version: str,
                table=None, exporter=None) -> StaticResult:
    """ids: {collective: {name: id}} of the installed Open MPI; exporter: an
    openmpi-tuned exporter instance (allow_substitute set) for the table."""
    res = StaticResult(tuned_file_blocks(rules, ranks))
    names = {c: {**{i: n for n, i in ids.get(c, {}).items()}, 0: "default"} for c in ids}
    for coll, blocks in rules.blocks.items():
        if coll.startswith("collective id"):
            # not one colltune writes: listed as not checked by the verifier; past coll/tuned's
            # COLLCOUNT (its COLLTYPE_T, 22 collectives in 5.0) Open MPI drops the whole file
            if int(coll.split()[-1]) >= COLLCOUNT:
                res.problems.append(f"{coll}: coll/tuned knows collective ids 0-{COLLCOUNT - 1}; "
                                    f"Open MPI drops the whole file")
            continue
        valid = names.get(coll, {0: "default"})
        for i, (csize, rows) in enumerate(blocks):
            lo = 1 if i == 0 else csize
            hi = blocks[i + 1][0] - 1 if i + 1 < len(blocks) else None
            for row in rows:
                if row[1] not in valid:
                    top = max(valid)
                    res.add(coll, lo, f"{coll}, {comm_sizes(lo, hi)}, from message size "
                                      f"{row[0]}: algorithm {row[1]} is not a "
                                      f"coll_tuned_{coll}_algorithm of the installed Open MPI "
                                      f"{version} (1-{top}; 0 = its fixed decision): Open MPI "
                                      f"rejects the call (MPI_ERR_ARG) where it applies")
    if table is None or exporter is None:
        return res
    try:
        predicted = parse_tuned(quiet_export(exporter, table, version).text, "<export of the table>")
    except InputError as exc:
        res.table_error = f"exporting the table for Open MPI {version} failed: {exc}"
        return res
    res.checked_against_table = True
    for coll in sorted(set(predicted.blocks) | set(rules.blocks)):
        if coll.startswith("collective id"):
            continue
        if not rules.blocks.get(coll):
            res.problems.append(f"{coll}: the table has rules for it, the file none")
            continue
        if not predicted.blocks.get(coll):
            res.problems.append(f"{coll}: the file has rules for it, the table none")
            continue
        unit = "B total" if coll in TOTAL_SIZE_KEY else "B/rank"
        starts = sorted({1} | {c for c, _ in rules.blocks[coll]}
                        | {c for c, _ in predicted.blocks[coll]})
        for k, lo in enumerate(starts):
            hi = starts[k + 1] - 1 if k + 1 < len(starts) else None
            mine, theirs = rules.lookup_block(coll, lo), predicted.lookup_block(coll, lo)
            sizes = comm_sizes(lo, hi)
            for key in sorted({r[0] for r in mine} | {r[0] for r in theirs}):
                a, b = _row_at(mine, key), _row_at(theirs, key)
                n = min(len(a), len(b))
                if a[1:n] != b[1:n] and a[1] in names.get(coll, {0: ""}):   # else said above
                    res.add(coll, lo, f"{coll}, {sizes}, from message size {key} {unit}: the file "
                                      f"says {_describe_row(a, names.get(coll, {}))}, the table "
                                      f"(as exported) {_describe_row(b, names.get(coll, {}))}")
    return res


# -- MPICH CSEL -------------------------------------------------------------------
_COMM_KEY = re.compile(r"comm_size(<=|<)(\d+)")
_SIZE_KEY = re.compile(r"(avg|total)_msg_size(<=|<)(\d+)")
_COUNT_KEY = re.compile(r"count(<=|<)(\d+)")


def _intra(tree: dict, coll: str) -> dict:
    node = tree.get(f"collective={coll}", {})
    return node.get("comm_type=intra", {}) if isinstance(node, dict) else {}


def _keys(node) -> list[str]:
    out = []
    if isinstance(node, dict):
        for key, sub in node.items():
            out.append(key.replace(" ", ""))
            if not key.startswith("algorithm="):
                out += _keys(sub)
    return out


def csel_file_blocks(tree: dict, coll: str, ranks: int) -> list[Block]:
    """The comm-size ladder at the top of coll's intra branch (one block when it has none)."""
    intra = _intra(tree, coll)
    out: list[Block] = []
    lo = 1
    for key in intra:
        k = key.replace(" ", "")
        m = _COMM_KEY.fullmatch(k)
        if m:
            hi = int(m.group(2)) - (1 if m.group(1) == "<" else 0)
            if hi >= lo:
                out.append(Block(coll, lo, hi))
                lo = hi + 1
        elif k in ("any", "comm_size=any"):
            out.append(Block(coll, lo, None))
            break
        else:
            return [Block(coll, 1, None, run=True)]
    if not out:
        return [Block(coll, 1, None, run=True)]
    for b in out:
        b.run = b.lo <= ranks and (b.hi is None or ranks <= b.hi)
    return out


def _comm_candidates(keys: list[str]) -> list[int]:
    cands = {1, 2, 3, 4}
    top = 4
    for k in keys:
        m = _COMM_KEY.fullmatch(k)
        if m:
            n = int(m.group(2))
            cands |= {max(1, n - 1), n, n + 1}
            top = max(top, n + 1)
    p = 2
    while p <= 2 * top:
        cands |= {p - 1, p, p + 1}
        p *= 2
    return sorted(cands)


def _size_candidates(keys: list[str], coll: str, comm_size: int) -> list[int]:
    unit = 4 if coll in ("reduce", "allreduce", "reduce_scatter_block") else 1
    cands = {0, unit}
    for k in keys:
        m = _SIZE_KEY.fullmatch(k)
        if m:
            n = int(m.group(3))
            per = n if m.group(1) == "avg" else n // comm_size
            cands |= {max(0, per - 1), per, per + 1}
            continue
        m = _COUNT_KEY.fullmatch(k)
        if m:
            n = int(m.group(2))
            cands |= {max(0, n - 1) * unit, n * unit, (n + 1) * unit}
    pof2 = 1 << (max(comm_size, 1).bit_length() - 1)
    cands |= {max(0, pof2 - 1) * unit, pof2 * unit}
    return sorted(cands)


def _describe_leaf(leaf) -> str:
    if isinstance(leaf, str):
        return f"nothing it can tell ({leaf})"
    func, params = leaf
    return func + (f" ({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})"
                   if params else "")


def library_has(lib: str | None):
    """A test: is 'algorithm=NAME' a leaf key the installed libmpi knows (its
    csel container parses keys by name)? None when libmpi cannot be read."""
    if not lib:
        return None
    try:
        data = Path(lib).read_bytes()
    except OSError:
        return None
    return lambda key: key.encode() in data


def leaf_problems(func: str, keys, where: str) -> list[str]:
    """What is wrong with a CSEL leaf's parameter keys ("k=4", ...) for MPICH: a parameter
    the algorithm reads that is missing (uninitialised memory in MPICH), one it does not
    take (MPICH fails: "Out of memory"), a value out of range or not a number (k=0 is a
    SIGFPE), or a radix MPICH aborts on (mpich_params)."""
    from ..providers.mpich_params import TREE_TYPES, invalid, leaf_defaults, tunable
    wanted = leaf_defaults(func)
    if not wanted:
        return []
    given: dict = {}
    for key in keys:
        if key.startswith("colltune:"):
            continue
        name, eq, value = key.partition("=")
        given[name] = value if eq else None
    out = [f"{where}: {func} takes no parameter {k!r} (it takes {', '.join(wanted)}; "
           f"MPICH fails on it)" for k in given if k not in wanted]
    missing = [k for k in wanted if k not in given]
    if missing:
        out.append(f"{where}: {func} needs {', '.join(missing)} (MPICH reads a parameter the "
                   f"leaf does not give from uninitialised memory)")
    specs, numbers = tunable(func), {}
    for k, v in given.items():
        if k not in wanted or k not in specs:
            continue
        if k == "tree_type" and v in TREE_TYPES:
            continue
        if v is None or not re.fullmatch(r"-?\d+", v):
            out.append(f"{where}: {func} {k}={v}: not a number"
                       + (f" or one of {', '.join(TREE_TYPES)}" if k == "tree_type" else ""))
        elif not specs[k]["min"] <= int(v) <= specs[k]["max"]:
            out.append(f"{where}: {func} {k}={v} outside [{specs[k]['min']}, {specs[k]['max']}]")
        else:
            numbers[k] = int(v)
    if not out and (why := invalid(func, {**numbers, **{k: v for k, v in given.items()
                                                        if k == "tree_type"}})):
        out.append(f"{where}: {func} {why}")
    return out


def check_csel(tree: dict, ranks: int, collectives: list[str], has, version: str,
               table=None, exporter=None) -> StaticResult:
    """collectives: those whose blocks are listed (the tuned ones); has: library_has(...)."""
    res = StaticResult([b for c in collectives for b in csel_file_blocks(tree, c, ranks)])
    leaves: list[tuple[str, dict, str]] = []          # (function, parameter object, path)

    def walk(node, path):
        if not isinstance(node, dict):
            return
        for key, sub in node.items():
            if key.startswith("algorithm="):
                leaves.append((key[len("algorithm="):], sub or {}, path))
            else:
                walk(sub, f"{path}/{key}" if path else key)
    walk(tree, "")

    def problem(path: str, msg: str) -> None:
        """A problem of the collective whose branch path is in: the file's and its blocks'."""
        res.problems.append(msg)
        coll = path.split("/", 1)[0].split("=", 1)[-1]
        for b in res.blocks:
            if b.collective == coll:
                b.problems.append(msg)
    for func, params, path in leaves:
        for msg in leaf_problems(func, params, path):
            problem(path, msg)
    if has is not None:
        unknown: dict[str, list[str]] = {}
        for func, _, path in leaves:
            if not has(f"algorithm={func}"):
                unknown.setdefault(func, []).append(path)
        for name, paths in unknown.items():
            problem(paths[0], f"{name} (at {paths[0]}{f' and {len(paths) - 1} more' if len(paths) > 1 else ''}) "
                              f"is not an algorithm of the installed MPICH {version} (MPICH aborts on it)")
    if table is None or exporter is None:
        return res
    try:
        predicted = json.loads(quiet_export(exporter, table, version).text)
    except (InputError, json.JSONDecodeError) as exc:
        res.table_error = f"exporting the table for MPICH {version} failed: {exc}"
        return res
    res.checked_against_table = True
    tuned = [c for c in table.collectives() if f"collective={c}" in predicted]
    for coll in tuned:
        if f"collective={coll}" not in tree:
            res.problems.append(f"{coll}: the table has rules for it, the file no branch")
            continue
        keys = _keys(_intra(tree, coll)) + _keys(_intra(predicted, coll))
        seen: set = set()
        for c in _comm_candidates(keys):
            block = res.block_of(coll, c)
            for n in _size_candidates(keys, coll, c):
                mine, theirs = csel_leaf(tree, coll, c, n), csel_leaf(predicted, coll, c, n)
                if mine == theirs or (isinstance(mine, str) and isinstance(theirs, str)):
                    continue
                what = (id(block), _describe_leaf(mine), _describe_leaf(theirs))
                if what in seen:
                    continue
                seen.add(what)
                res.add(coll, c, f"{coll}, comm size {c}, {n} B/rank"
                                 f"{f' ({block.sizes} block)' if block else ''}: the file runs "
                                 f"{_describe_leaf(mine)}, the table (as exported) "
                                 f"{_describe_leaf(theirs)}")
    return res


__all__ = ["Block", "StaticResult", "check_tuned", "check_csel", "library_has", "quiet_export"]
