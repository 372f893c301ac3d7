"""The decision table: (collective, nodes, ppn, message size) -> (algorithm, params).

Every tuner writes one, every exporter reads one. On disk it is versioned JSON
(schemas/decision-table.schema.json). Within an entry, rules are sorted by
``min_size``; a rule applies from its ``min_size`` up to the next rule's. Sizes
are bytes per rank (the benchmarks' unit); exporters convert to each library's key.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import jsonschema

from . import __version__
from .errors import InputError
from .inputs import read_json

FORMAT, VERSION = "colltune.decision-table", 1


@dataclass(frozen=True)
class Rule:
    min_size: int
    algorithm: str
    provider: str
    params: dict = field(default_factory=dict)
    expected_s: float | None = None
    measured_sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Entry:
    collective: str
    nodes: int
    ppn: int
    rules: tuple[Rule, ...]
    # every arm's time at the measured sizes, (size, provider, algorithm, seconds):
    # what robust_rules needs for layouts the tuner did not measure (exhaustive)
    measured: tuple = ()

    def rule_for(self, size: int) -> Rule:
        chosen = self.rules[0]
        for r in self.rules:
            if r.min_size <= size:
                chosen = r
        return chosen


@dataclass(frozen=True)
class DecisionTable:
    tuner: str
    provenance: dict
    entries: tuple[Entry, ...]
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    colltune_version: str = __version__

    def collectives(self) -> list[str]:
        return sorted({e.collective for e in self.entries})

    def entry(self, collective: str, nodes: int, ppn: int) -> Entry:
        """Exact layout if tuned, else the nearest tuned layout (log distance)."""
        cands = [e for e in self.entries if e.collective == collective]
        if not cands:
            raise KeyError(f"decision table has no entry for {collective}")
        return min(cands, key=lambda e: (abs(math.log(e.nodes / nodes)) + abs(math.log(e.ppn / ppn)),
                                         e.nodes, e.ppn))

    def lookup(self, collective: str, nodes: int, ppn: int, size: int) -> Rule:
        """The rule of the entry() for this layout at this size."""
        return self.entry(collective, nodes, ppn).rule_for(size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "created": self.created,
            "colltune_version": self.colltune_version, "tuner": self.tuner,
            "size_unit": "bytes-per-rank", "provenance": self.provenance,
            "entries": [{"collective": e.collective, "nodes": e.nodes, "ppn": e.ppn,
                         "rules": [{**asdict(r), "measured_sizes": list(r.measured_sizes)}
                                   for r in e.rules],
                         **({"measured": [list(m) for m in e.measured]} if e.measured else {})}
                        for e in self.entries],
        }

    def save(self, path: str) -> str:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1, default=float)
            fh.write("\n")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "<dict>") -> "DecisionTable":
        schema = json.loads(resources.files("colltune").joinpath(
            "schemas/decision-table.schema.json").read_text())
        try:
            jsonschema.validate(data, schema)
        except jsonschema.ValidationError as exc:
            path = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            raise InputError(f"{where}: not a valid decision table at {path}: {exc.message}") from None
        entries = []
        for i, e in enumerate(data["entries"]):
            sizes = [r["min_size"] for r in e["rules"]]
            if sizes != sorted(set(sizes)) or sizes[0] != 0:
                raise InputError(f"{where}: entries/{i}/rules: min_size must start at 0 and "
                                 f"increase strictly, got {sizes}")
            rules = tuple(Rule(r["min_size"], r["algorithm"], r["provider"], r.get("params", {}),
                               r.get("expected_s"), tuple(r.get("measured_sizes", ())))
                          for r in e["rules"])
            entries.append(Entry(e["collective"], e["nodes"], e["ppn"], rules,
                                 tuple(tuple(m) for m in e.get("measured", ()))))
        return cls(data["tuner"], data["provenance"], tuple(entries), data.get("created", ""),
                   data.get("colltune_version", "?"))

    @classmethod
    def load(cls, path: str) -> "DecisionTable":
        return cls.from_dict(read_json(path, "cannot read decision table {path}: {why}"), path)


def boundary(lo: int, hi: int) -> int:
    """Break point between two measured sizes whose best algorithms differ: the
    geometric midpoint (sizes are sampled on a log scale), at least lo + 1."""
    if lo <= 0:
        return max(1, hi // 2) if hi > 1 else hi
    return max(lo + 1, int(math.ceil(math.sqrt(lo * hi))))


def rules_from_points(points: list[tuple[int, str, str, dict, float | None]]) -> tuple[Rule, ...]:
    """Turn measured (size, algorithm, provider, params, time) winners into rules,
    merging neighbours with the same choice."""
    points = sorted(points)
    rules: list[Rule] = []
    prev_size = None
    for size, alg, prov, params, t in points:
        if rules and (rules[-1].algorithm, rules[-1].provider, rules[-1].params) == (alg, prov, params):
            last = rules[-1]
            rules[-1] = Rule(last.min_size, alg, prov, params, last.expected_s,
                             last.measured_sizes + (size,))
        else:
            start = 0 if not rules else boundary(prev_size, size)
            rules.append(Rule(start, alg, prov, params, t, (size,)))
        prev_size = size
    return tuple(rules)


# Where nothing was measured (a size between two trained sizes, or a layout that was
# not trained), an arm replaces the library's default only if it beat the default by at
# least this factor at every measured point around: a narrower win did not survive the
# sizes in between (dragonfly 128x2: multileader fs=1 MiB beat `ompi` by 1.07x at 2 MiB
# and 1.12x at 8 MiB, and lost 1.095x at 3000000 B; docs/rules.md).
UNMEASURED_MARGIN = 1.10


def robust_rules(entries: list[Entry], allowed=None, default=None,
                 exact: bool = False, margin: float | None = UNMEASURED_MARGIN) -> tuple[Rule, ...]:
    """Rules that generalise safely from the measured points of `entries` (a tuned
    layout, or the tuned layouts around one that was not). At a size measured on all
    of them, and between two measured sizes: among the arms no slower than the library's
    default decision `default` ((provider, algorithm)) at every layout and size considered
    -- by UNMEASURED_MARGIN faster where nothing was measured, i.e. everywhere but the
    measured sizes of a tuned layout (`exact`) -- the one whose worst slowdown against the
    best is smallest (minimax regret; ties: the smaller summed slowdown, then the default,
    then the name); the default itself always qualifies. A deployment promises never to be slower than the
    default: the nearest layout's winner lost 2.6x to the default at a held-out layout,
    minimax regret alone 1.1x (docs/rules.md). At a tuned layout the measured sizes keep
    their winner; only the sizes in between are affected. allowed: (provider, algorithm)
    -> bool, the arms that may be chosen (default: all). margin None: no margin and no
    promise where nothing was measured, minimax regret alone -- for a deployment whose
    guard (COLLTUNE_GUARD) checks each of colltune's rules against the default at run
    time (deploy --guard)."""
    times: dict[int, list[dict]] = {}
    for e in entries:
        by_size: dict[int, dict] = {}
        for size, prov, alg, sec in e.measured:
            arm = by_size.setdefault(int(size), {})
            arm[(prov, alg)] = min(sec, arm.get((prov, alg), math.inf))
        for size, arms in by_size.items():
            times.setdefault(size, []).append(arms)
    times = {s: t for s, t in times.items() if len(t) == len(entries)}

    def choose(sets: list[dict], factor: float):
        common = {a for a in set.intersection(*(set(t) for t in sets))
                  if allowed is None or allowed(*a) or a == default}
        if default in common and factor is not None:
            common = {a for a in common
                      if a == default or all(t[a] * factor <= t[default] for t in sets)}

        def cost(arm):          # a tie with the default goes to the default: nothing to gain
            slow = [t[arm] / min(t.values()) for t in sets]
            return (max(slow), sum(slow), arm != default, arm)
        return min(common, key=cost) if common else None

    winner = {s: w for s in sorted(times) if (w := choose(times[s], 1.0 if exact else margin))}
    sizes = list(winner)
    picks: list[tuple[int, tuple]] = []                  # (min_size, arm), merged below
    for prev, size in zip([None] + sizes, sizes):
        arm = winner[size]
        if picks and size > prev + 1:                    # the sizes in between
            gap = choose(times[prev] + times[size], margin) or arm
            if gap != picks[-1][1]:
                picks.append((prev + 1, gap))
        if not picks or arm != picks[-1][1]:
            picks.append((0 if not picks else size, arm))
    rules: list[Rule] = []
    for lo, (prov, alg) in picks:
        if rules and (rules[-1].provider, rules[-1].algorithm) == (prov, alg):
            continue
        rules.append(Rule(lo, alg, prov, {}, None,
                          tuple(s for s in sizes if s >= lo and winner[s] == (prov, alg))))
    return tuple(rules)
