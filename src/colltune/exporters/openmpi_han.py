"""Open MPI coll/han dynamic rules (``coll_han_dynamic_rules_filename``).

Format (ompi/mca/coll/han/coll_han_dynamic_file.c, 5.0 series; read by 5.0.11
in the tests): number of collectives; per collective its name, number of
topology levels; per level its id (0 intra-node, 1 inter-node, 2 global
communicator) and number of configuration sizes; per configuration its size
(the communicator size at that level: ppn, nodes, or nodes x ppn; the first
must be 1; a configuration applies from its size up to the next one, and the
file switches halfway (geometric midpoint) between two tuned sizes) and number of message-size rules; per rule the message size
(bytes per rank, the first must be 0) and a component name (self, basic,
libnbc, tuned, sm, adapt, han). A ``[...]`` list of segment lengths may follow a
component; 5.0 parses and discards it, so it is not written (HAN's segment
sizes are global MCA parameters, listed in the notes when rules carry one).

What a decision table says in HAN's terms, per rule:
- global level: ``han`` (hierarchical) when the rule's algorithm is a
  hierarchical one (HIERARCHICAL below, or a rule param ``han: true``), else
  ``tuned``: HAN steps aside and coll/tuned runs the flat algorithm, chosen by
  the openmpi-tuned file exported from the same table (deploy both);
- rule params ``low`` / ``up`` (component names) add intra-node (configuration
  size = ppn) and inter-node (configuration size = nodes) rules.
HAN only implements allgather, allreduce, barrier, bcast, gather, reduce and
scatter dynamically; other collectives are an error.
"""
from __future__ import annotations

import re

from ..decision import DecisionTable, Entry, Rule, boundary
from ..errors import InputError
from . import EXPORTERS
from .base import Exported, Exporter, header_lines
from .openmpi_tuned import parse_version

COMPONENTS = ("self", "basic", "libnbc", "tuned", "sm", "adapt", "han")
HAN_COLLECTIVES = ("allgather", "allreduce", "barrier", "bcast", "gather", "reduce", "scatter")
GLOBAL, INTRA, INTER = 2, 0, 1
# Algorithms that are node-aware (two-level) in the providers' lists.
HIERARCHICAL = re.compile(r"^(SMP_|smp_|mvapich2_two_level|mvapich2_inter_node|mvapich2_intra_node|"
                          r"mpich_smp$|smp$|han)")


def is_hierarchical(rule: Rule) -> bool:
    if "han" in rule.params:
        return bool(rule.params["han"])
    return bool(HIERARCHICAL.match(rule.algorithm))


def _component(value: str, where: str) -> str:
    if value not in COMPONENTS:
        raise InputError(f"{where}: HAN component {value!r} unknown; known: {', '.join(COMPONENTS)}")
    return value


def level_rules(entry: Entry, level: int) -> list[tuple[int, str]]:
    """[(message size, component)] of one entry at one level, merged."""
    rows: list[tuple[int, str]] = []
    rules = entry.rules if entry.collective != "barrier" else (entry.rule_for(0),)
    for rule in rules:
        where = f"{entry.collective} {entry.nodes}x{entry.ppn} from {rule.min_size} B/rank"
        if level == GLOBAL:
            comp = "han" if is_hierarchical(rule) else "tuned"
        else:
            key = "low" if level == INTRA else "up"
            if key not in rule.params:
                continue
            comp = _component(str(rule.params[key]), where)
        size = 0 if entry.collective == "barrier" else rule.min_size
        if not rows and size != 0:
            rows.append((0, comp))
        elif not rows or rows[-1][1] != comp:
            rows.append((size, comp))
    return rows


def config_blocks(entries: list[Entry], level: int) -> list[tuple[int, list[tuple[int, str]]]]:
    """[(first configuration size, rules)], ascending, the first at size 1."""
    key = {GLOBAL: lambda e: e.nodes * e.ppn, INTRA: lambda e: e.ppn, INTER: lambda e: e.nodes}[level]
    by_size: dict[int, list[tuple[int, str]]] = {}
    for e in sorted(entries, key=lambda e: (-e.nodes, e.ppn)):   # most nodes first wins
        rows = level_rules(e, level)
        if rows and key(e) not in by_size:
            by_size[key(e)] = rows
    sizes = sorted(by_size)
    # switch at geometric midpoints (the nearest tuned size wins, as for coll/tuned);
    # HAN requires the first configuration size to be 1
    return [(1 if i == 0 else boundary(sizes[i - 1], c), by_size[c]) for i, c in enumerate(sizes)]


@EXPORTERS.register("openmpi-han")
class OpenMPIHanExporter(Exporter):
    name = "openmpi-han"
    library = "openmpi"
    description = "Open MPI coll/han dynamic rules: hierarchical (han) or flat (tuned) per rule"

    def export(self, table: DecisionTable, target: str | None = None) -> Exported:
        v = parse_version(target)
        if v < (4, 1, 0):
            raise InputError(f"--target {target}: coll/han exists from Open MPI 4.1")
        colls = []
        notes: list[str] = []
        for coll in table.collectives():
            if coll not in HAN_COLLECTIVES:
                raise InputError(f"collective {coll!r}: coll/han has no dynamic rules for it "
                                 f"(it has: {', '.join(HAN_COLLECTIVES)})")
            entries = [e for e in table.entries if e.collective == coll]
            segs = {r.params.get("segsize") for e in entries for r in e.rules} - {None}
            if segs:
                notes.append(f"{coll}: HAN segment size is global: set coll_han_{coll}_segsize "
                             f"(table rules use {sorted(segs)})")
            levels = [(lvl, config_blocks(entries, lvl)) for lvl in (INTRA, INTER, GLOBAL)]
            colls.append((coll, [(lvl, b) for lvl, b in levels if b]))
        resolved = target or ".".join(map(str, v))
        lines = [f"# {h}" for h in header_lines(table, resolved, self.name)]
        lines.append("# levels: 0 intra-node (size = ppn), 1 inter-node (size = nodes), "
                     "2 global communicator (size = nodes x ppn); message sizes in bytes per rank")
        lines += [f"# NOTE {n}" for n in notes]
        lines.append(f"{len(colls)}  # collectives")
        for coll, levels in colls:
            lines.append(f"{coll} {len(levels)}  # topology levels")
            for lvl, blocks in levels:
                lines.append(f"  {lvl} {len(blocks)}  # level, configuration sizes")
                for size, rows in blocks:
                    lines.append(f"    {size} {len(rows)}  # configuration size, rules")
                    lines += [f"      {m} {c}" for m, c in rows]
        env = {"OMPI_MCA_coll_han_use_dynamic_file_rules": "1",
               "OMPI_MCA_coll_han_dynamic_rules_filename": "{path}"}
        doc = ["rules naming 'tuned' hand the communicator to coll/tuned: deploy the "
               "openmpi-tuned export of the same table with it (without its coll_han_priority=0)",
               "coll/han steps aside on one node and with uneven ppn: the file then has no effect"]
        return Exported("\n".join(lines) + "\n", ".rules", env, tuple(doc + notes), resolved)
