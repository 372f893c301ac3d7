"""colltune's own rules file (docs/rules.md): the writer (exporter ``colltune``)
and a reader/validator with the same grammar and messages as the interposer's
C parser (native/intercept/rules.c).

    colltune-rules 1
    # comment
    bcast nodes=2..3 ppn=* bytes=0..8191 -> binomial
    bcast bytes=8k.. -> pipeline segsize=16k fanout=2

A rule is ``COLL [KEY=RANGE]... -> ALGORITHM [PARAM=VALUE]...``; keys ``size``
(communicator size), ``nodes``, ``ppn``, ``bytes`` (per rank); the first rule
of the collective that matches wins; no match, or ``library``, runs the MPI
library's own collective.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..decision import UNMEASURED_MARGIN, DecisionTable, Entry, Rule, robust_rules
from ..errors import InputError
from ..inputs import read_text
from . import EXPORTERS
from .base import Exported, Exporter, header_lines

VERSION = 1
HEADER = "colltune-rules"
COLLS = ("bcast", "reduce", "allreduce", "allgather")
KEYS = ("size", "nodes", "ppn", "bytes")
LIBRARY = "library"
MAXLINE = 4096
_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_NUM = re.compile(r"^([0-9]+)([kKmMgG]?)$")
_LABEL = re.compile(r"^([^\[\]]+)(?:\[(.*)\])?$")


class RulesError(InputError):
    """A problem in a rules file: ``FILE:LINE: what``."""


@dataclass(frozen=True)
class RulesLine:
    line: int
    collective: str
    ranges: dict            # key -> (lo, hi or None)
    algorithm: str          # catalogue name or "library"
    params: dict = field(default_factory=dict)

    def matches(self, point: dict) -> bool:
        return all(lo <= point[k] and (hi is None or point[k] <= hi)
                   for k, (lo, hi) in self.ranges.items())


# the C parser's limits (native/intercept/rules.c parse_u64): the digits at most
# 18446744073709551609, the value with its suffix at most 2**64 - 1
_DIGITS_MAX = (2**64 - 1 - 9) // 10 * 10 + 9
_VALUE_MAX = 2**64 - 1


def parse_number(text: str) -> int | None:
    m = _NUM.match(text)
    if not m:
        return None
    digits = int(m.group(1))
    value = digits * _SUFFIX.get(m.group(2).lower(), 1)
    return value if digits <= _DIGITS_MAX and value <= _VALUE_MAX else None


def _range(where: str, key: str, text: str, floor: int) -> tuple[int, int | None]:
    if text == "*":
        return (0, None)
    lo_t, sep, hi_t = text.partition("..")
    if not sep:
        hi_t = lo_t
    if not lo_t and not hi_t:
        raise RulesError(f"{where}: {key}: empty range '{text}'")
    lo, hi = floor, None
    for part, is_lo in ((lo_t, True), (hi_t, False)):
        if part:
            v = parse_number(part)
            if v is None:
                what = "is too large" if _NUM.match(part) else \
                    "is not a non-negative integer"
                raise RulesError(f"{where}: {key}: '{part}' {what} (range '{text}')")
            if v < floor:
                raise RulesError(f"{where}: {key}: range '{text}' must not go below {floor}")
            lo, hi = (v, hi) if is_lo else (lo, v)
    if hi is not None and lo > hi:
        raise RulesError(f"{where}: {key}: empty range '{text}' (start above end)")
    return (lo, hi)


def _choice(where: str, coll: str, words: list[str], catalogue: dict | None):
    if not words:
        raise RulesError(f"{where}: no algorithm after '->'")
    name, rest = words[0], words[1:]
    if name == LIBRARY:
        if rest:
            raise RulesError(f"{where}: 'library' takes no parameters, got '{rest[0]}'")
        return name, {}
    params: dict[str, int] = {}
    spec = None
    if catalogue is not None:
        spec = catalogue.get(coll, {}).get(name)
        if spec is None:
            known = ", ".join([*catalogue.get(coll, {}), LIBRARY])
            raise RulesError(f"{where}: unknown {coll} algorithm '{name}' (known: {known})")
    for word in rest:
        key, eq, value = word.partition("=")
        if not eq:
            raise RulesError(f"{where}: expected PARAMETER=VALUE after the algorithm, got '{word}'")
        if spec is not None and key not in spec:
            names = ", ".join(spec) or "none"
            raise RulesError(f"{where}: {coll} {name} has no parameter '{key}' (parameters: {names})")
        if key in params:
            raise RulesError(f"{where}: parameter '{key}' given twice")
        # a parameter may go below 0 (logp_tree's lf=-1), as in the interposer's parser
        neg = value.startswith("-")
        v = parse_number(value[neg:])
        if v is not None:
            v = None if v > 2**31 - 1 else -v if neg else v
        lo, hi = (spec[key]["min"], spec[key]["max"]) if spec is not None else (-(2**31 - 1), 2**31 - 1)
        if v is None or not lo <= v <= hi:
            raise RulesError(f"{where}: {coll} {name}: {key}={value} is not an integer in "
                             f"[{lo}, {hi}]")
        params[key] = v
    if spec is not None:     # the interposer fills in defaults: so does the reader
        params = {k: params.get(k, p["default"]) for k, p in spec.items()}
    return name, params


def parse_rules(text: str, name: str = "<rules>", catalogue: dict | None = None) -> list[RulesLine]:
    """Parse rules text; RulesError names NAME:LINE and the value. With a
    catalogue ({coll: {alg: {param: {default, min, max}}}}, see catalogue_index)
    algorithm names and parameters are checked as the interposer checks them."""
    out: list[RulesLine] = []
    header = False
    lines = text.split("\n")
    for no, raw in enumerate(lines, 1):
        where = f"{name}:{no}"
        if no == len(lines) and raw == "":
            break
        if len(raw) > MAXLINE:
            raise RulesError(f"{where}: line longer than {MAXLINE} characters")
        # read as latin-1, a character per byte; words are printable ASCII, a comment
        # may hold any byte from 0x80 (UTF-8), as the interposer reads it
        words_end = raw.find("#") if "#" in raw else len(raw)
        for col, ch in enumerate(raw, 1):
            if (col <= words_end or ord(ch) < 0x80) and not (
                    ord(ch) < 0x7f and (ch.isprintable() or ch in " \t\r\v\f")):
                bom = no == 1 and col == 1 and raw.startswith("\xef\xbb\xbf")
                raise RulesError(f"{where}: not a text line (byte 0x{ord(ch) & 0xff:02x} at column {col})"
                                 + (": a UTF-8 byte-order mark, save the file without it" if bom else ""))
        words = [w for w in re.split(r"[ \t\r]+", raw.split("#", 1)[0]) if w]
        if not words:
            continue
        if len(words) > 64:
            raise RulesError(f"{where}: more than 64 words")
        if not header:
            if words[0] != HEADER:
                raise RulesError(f"{where}: expected the header '{HEADER} {VERSION}' before any "
                                 f"rule, got '{words[0]}'{_whose(words[0])}")
            if len(words) > 2:
                raise RulesError(f"{where}: the header is '{HEADER} {VERSION}' alone, got "
                                 f"'{words[2]}' after it")
            if len(words) != 2 or parse_number(words[1]) != VERSION:
                got = words[1] if len(words) > 1 else ""
                raise RulesError(f"{where}: unsupported rules version '{got}' (this interposer "
                                 f"reads version {VERSION})")
            header = True
            continue
        coll = words[0]
        if coll not in COLLS:
            raise RulesError(f"{where}: unknown collective '{coll}' (known: {', '.join(COLLS)})")
        if "->" not in words:
            raise RulesError(f"{where}: missing '->' between the conditions and the algorithm")
        arrow = words.index("->")
        ranges: dict[str, tuple[int, int | None]] = {}
        for word in words[1:arrow]:
            key, eq, value = word.partition("=")
            if not eq:
                raise RulesError(f"{where}: expected KEY=RANGE (size, nodes, ppn, bytes), got '{word}'")
            if key not in KEYS:
                raise RulesError(f"{where}: unknown key '{key}' (known: {', '.join(KEYS)})")
            if key in ranges:
                raise RulesError(f"{where}: key '{key}' given twice")
            ranges[key] = _range(where, key, value, 0 if key == "bytes" else 1)
        alg, params = _choice(where, coll, words[arrow + 1:], catalogue)
        out.append(RulesLine(no, coll, ranges, alg, params))
    if not header:
        raise RulesError(f"{name}:{max(1, len(lines) - (lines[-1] == ''))}: no '{HEADER} "
                         f"{VERSION}' header (empty file?)")
    return out


def _whose(first: str) -> str:
    """A library's own file given for colltune's (deploy writes all three): said, as the
    interposer says it."""
    if first.startswith("rule-file-version") or first[:1].isdigit():
        return (": this looks like Open MPI's coll/tuned rules file, which Open MPI reads "
                "(coll_tuned_dynamic_rules_filename); colltune's is colltune.rules")
    if first.startswith("{"):
        return (": this looks like MPICH's JSON selection file, which MPICH reads "
                "(MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE); colltune's is colltune.rules")
    return ""


def read_rules(path: str, catalogue: dict | None = None) -> list[RulesLine]:
    return parse_rules(read_text(path, RulesError, "cannot open"), path, catalogue)


def match(rules: list[RulesLine], collective: str, size: int, nodes: int, ppn: int,
          nbytes: int) -> RulesLine | None:
    """The rule the interposer applies to a call, or None (the library)."""
    point = {"size": size, "nodes": nodes, "ppn": ppn, "bytes": nbytes}
    return next((r for r in rules if r.collective == collective and r.matches(point)), None)


def catalogue_index(listing: dict) -> dict:
    """{coll: {alg: {param: {default, min, max}}}} from `colltune-rules list`."""
    out: dict = {}
    for a in listing["algorithms"]:
        out.setdefault(a["collective"], {})[a["name"]] = {p["name"]: p for p in a["params"]}
    return out


def split_label(label: str) -> tuple[str, dict[str, int]]:
    """'pipeline[segsize=16384,fanout=2]' -> ('pipeline', {...}) (Algorithm.label's form)."""
    m = _LABEL.match(label.strip())
    if not m:
        raise InputError(f"bad algorithm label {label!r}")
    params = {}
    for item in filter(None, (m.group(2) or "").split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            raise InputError(f"bad parameter {item!r} in algorithm label {label!r}: NAME=VALUE")
        if parse_number(v.strip()) is None:
            raise InputError(f"bad parameter {item!r} in algorithm label {label!r}: the value is "
                             f"a whole number >= 0 (suffixes K, M, G: 64K)")
        if k.strip() in params:
            raise InputError(f"parameter {k.strip()!r} given twice in algorithm label {label!r}")
        params[k.strip()] = parse_number(v.strip())
    return m.group(1).strip(), params


# ---- writer -------------------------------------------------------------------
def _cells(values: list[int]) -> list[tuple[int, int, int | None]]:
    """(tuned value, lo, hi) per distinct tuned value: the integers nearer to it
    (log scale) than to its neighbours; a tie goes to the smaller value, as in
    DecisionTable.lookup."""
    values = sorted(set(values))
    cuts = [math.isqrt(a * b) + 1 for a, b in zip(values, values[1:])]
    los = [1] + cuts
    his: list[int | None] = [c - 1 for c in cuts] + [None]
    return list(zip(values, los, his))


def _fmt_range(lo: int, hi: int | None, floor: int = 1) -> str:
    if lo <= floor and hi is None:
        return "*"
    if hi == lo:
        return str(lo)
    return f"{lo}.." + ("" if hi is None else str(hi))


@EXPORTERS.register("colltune")
class ColltuneRulesExporter(Exporter):
    name = "colltune"
    library = "colltune"
    description = "colltune's own rules file, read by the interposer libcolltune (docs/rules.md)"
    allow_substitute = False
    catalogue: dict | None = None      # catalogue_index(...) to validate names and parameters
    # where nothing was measured: beat the library default by this factor at every point
    # around, or the default runs; None: minimax regret alone, for a guarded deployment
    unmeasured_margin: float | None = UNMEASURED_MARGIN

    def _choice(self, entry: Entry, rule: Rule, notes: list[str],
                table: DecisionTable | None = None) -> str:
        from ._mapping import is_library_default
        if table is not None and is_library_default(table, rule):
            return LIBRARY          # the library's default decision: the interposer passes the call on
        if rule.provider == "colltune" and entry.collective in COLLS:
            name, params = split_label(rule.algorithm)
            params = {**params, **(rule.params or {})}
            text = " ".join([name, *(f"{k}={v}" for k, v in sorted(params.items()))])
            _choice(f"decision table {entry.collective} {entry.nodes}x{entry.ppn} from "
                    f"{rule.min_size} B", entry.collective, text.split(), self.catalogue)
            return text
        why = (f"{entry.collective} {entry.nodes}x{entry.ppn} from {rule.min_size} B/rank: "
               f"{rule.provider} algorithm {rule.algorithm!r} is not one of colltune's")
        if not self.allow_substitute:
            raise InputError(f"{why}; --allow-substitute would let the MPI library run it")
        notes.append(f"{why}: the library's own collective runs there")
        return LIBRARY

    def export(self, table: DecisionTable, target: str | None = None) -> Exported:
        notes: list[str] = []
        out = [f"# {line}" for line in header_lines(table, target, self.name)]
        if self.unmeasured_margin is None:
            out.append("# sizes and layouts not measured: the arm with the smallest worst slowdown "
                       "around them, no margin over the library default; run it with the guard "
                       "(COLLTUNE_GUARD, deploy --guard), which checks each rule against the library")
        out += [f"# first matching rule wins; keys: nodes, ppn, bytes per rank (docs/rules.md)",
                f"{HEADER} {VERSION}"]
        for coll in table.collectives():
            entries = [e for e in table.entries if e.collective == coll]
            if coll not in COLLS and not self.allow_substitute:
                raise InputError(f"the interposer handles {', '.join(COLLS)}, not {coll}; "
                                 f"--allow-substitute leaves it to the library")
            if coll not in COLLS:
                notes.append(f"{coll}: not intercepted, the library's own collective runs")
                continue
            layouts = sorted({(e.nodes, e.ppn) for e in entries})
            out.append(f"# {coll}: tuned layouts (nodes x ppn) "
                       + ", ".join(f"{n}x{p}" for n, p in layouts))
            for nodes, ppn, entry, rules in _regions(table, entries, self.unmeasured_margin):
                for i, rule in enumerate(rules):
                    hi = rules[i + 1].min_size - 1 if i + 1 < len(rules) else None
                    out.append(f"{coll} nodes={_fmt_range(*nodes)} ppn={_fmt_range(*ppn)} "
                               f"bytes={_fmt_range(rule.min_size, hi, 0)} -> "
                               f"{self._choice(entry, rule, notes, table)}")
        text = "\n".join(out) + "\n"
        parse_rules(text, f"<{self.name} export>", self.catalogue)   # never write what we cannot read
        return Exported(text, ".rules", env={"COLLTUNE_RULES": "{path}"},
                        notes=tuple(notes) + (
                            "run under the interposer: `colltune run --rules FILE -- ./app`, or "
                            "LD_PRELOAD libcolltune.so built for your MPI (docs/interposer.md)",))


def _gaps(values: list[int]) -> list[tuple[int, int | None, tuple[int, ...]]]:
    """(lo, hi, tuned values around it): each tuned value alone, the integers strictly
    between two tuned values (around: both), below the first and above the last."""
    values = sorted(set(values))
    out: list[tuple[int, int | None, tuple[int, ...]]] = []
    if values[0] > 1:
        out.append((1, values[0] - 1, (values[0],)))
    for a, b in zip(values, values[1:]):
        out.append((a, a, (a,)))
        if b > a + 1:
            out.append((a + 1, b - 1, (a, b)))
    out.append((values[-1], values[-1], (values[-1],)))
    out.append((values[-1] + 1, None, (values[-1],)))
    return out


def _regions(table: DecisionTable, entries: list[Entry], margin: float | None = UNMEASURED_MARGIN):
    """((nodes lo, hi), (ppn lo, hi), entry, rules) covering every layout. With every
    arm's times in the table (exhaustive tuner), decision.robust_rules: a tuned layout
    keeps its winners at the measured sizes, a layout between tuned ones gets the safe
    choice over the tuned layouts around it (all of them if none of those
    combinations was tuned); this holds for one tuned layout too when the table has a
    library default to be safe against. Otherwise: the nearest tuned layout's rules
    (log scale), as DecisionTable.lookup (a table of colltune's algorithms alone keeps
    its midpoints between measured sizes)."""
    arms = table.provenance.get("arms") or {}
    default = (arms["library"], arms["library_default"]) if arms.get("library_default") else None
    if not all(e.measured for e in entries) or (len(entries) == 1 and default is None):
        for n, nlo, nhi in _cells([e.nodes for e in entries]):
            for p, plo, phi in _cells([e.ppn for e in entries]):
                entry = _entry_at(table, entries, n, p)
                yield (nlo, nhi), (plo, phi), entry, entry.rules
        return
    from ..deploy import LIBRARY, kind_of
    # colltune's algorithms and the library's default decision: a library algorithm
    # would need its own rules file to say the same for this layout, which is keyed
    # by communicator size only
    allowed = lambda prov, alg: kind_of(table, Rule(0, alg, prov)) != LIBRARY  # noqa: E731
    tuned = {(e.nodes, e.ppn): e for e in entries}
    deployed = {(e.nodes, e.ppn): _as_deployed(table, e, default) for e in entries}
    for nlo, nhi, ns in _gaps([e.nodes for e in entries]):
        for plo, phi, ps in _gaps([e.ppn for e in entries]):
            around = [tuned[(n, p)] for n in ns for p in ps if (n, p) in tuned] or list(entries)
            exact = len(around) == 1 and nlo == nhi == around[0].nodes and plo == phi == around[0].ppn
            if not exact:      # sent to the library there, a call runs the library's file
                around = [deployed[(e.nodes, e.ppn)] for e in around]
            rules = robust_rules(around, None if exact else allowed, default, exact=exact, margin=margin)
            yield (nlo, nhi), (plo, phi), around[0], rules or _entry_at(table, entries, nlo, plo).rules


def _as_deployed(table: DecisionTable, entry: Entry, default) -> Entry:
    """entry with the library default's times replaced by those of what the deployed
    library's rules file runs at each measured size (deploy.library_part: the table's
    library algorithm there, or the neighbouring one where colltune serves the size).
    Where colltune.rules hands a call on (`library`) at a layout nobody measured, the
    library's file decides (it is keyed by communicator size only, so its choices hold
    there too): a colltune arm that beat the default but lost to the library algorithm
    the table chose was deployed over it (a user review: MPICH's nb allreduce, chosen at
    every measured size, replaced by a slower recursive doubling on every other layout)."""
    from dataclasses import replace

    from ..deploy import LIBRARY, kind_of, library_part
    part = library_part(replace(table, entries=(entry,)))
    if part is None or default is None:
        return entry
    lib_entry = part.entries[0]
    times = {(int(s), p, a): t for s, p, a, t in entry.measured}
    out = []
    for s, p, a, t in entry.measured:
        if (p, a) == default:
            rule = lib_entry.rule_for(int(s))
            if kind_of(table, rule) == LIBRARY:
                t = times.get((int(s), rule.provider, rule.algorithm), t)
        out.append((s, p, a, t))
    return replace(entry, measured=tuple(out))


def _entry_at(table: DecisionTable, entries: list[Entry], nodes: int, ppn: int) -> Entry:
    """The entry DecisionTable.lookup picks at this tuned corner."""
    rule = table.lookup(entries[0].collective, nodes, ppn, 0)
    return next(e for e in entries if any(r is rule for r in e.rules))
