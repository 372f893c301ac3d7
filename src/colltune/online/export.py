"""The state's current choices as a decision table (per measured block its best arm:
lowest mean among arms timed at least 3 times, else the most probable), for the
existing exporters. Blocks that are only priors are left out: nothing was measured."""
from __future__ import annotations

from ..decision import DecisionTable, Entry, Rule
from .arms import LIBRARY, split_arm
from .state import State, class_range


def decision_table(state: State, provenance: dict) -> DecisionTable:
    layouts: dict = {}
    for b in state.blocks.values():
        if b.source == "prior":
            continue
        layouts.setdefault((b.collective, b.nodes, b.ppn), []).append(b)
    entries = []
    for (coll, nodes, ppn), blocks in sorted(layouts.items()):
        rules: list[Rule] = []
        for b in sorted(blocks, key=lambda b: b.cls):
            best = b.best()
            prov, name, params = split_arm(best.arm)
            if prov == LIBRARY:
                prov = "colltune"          # the colltune rules file's `library`
            mean = best.mean if best.n else None
            lo = class_range(b.cls)[0] if rules else 0
            if rules and (rules[-1].algorithm, rules[-1].provider, rules[-1].params) == (name, prov, params):
                continue
            rules.append(Rule(lo, name, prov, params, mean, ()))
        entries.append(Entry(coll, nodes, ppn, tuple(rules)))
    return DecisionTable("online", {**provenance, "source": "online",
                                    "fingerprint": state.fingerprint,
                                    "run_count": state.run_count}, tuple(entries))
