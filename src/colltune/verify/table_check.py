"""Cross-check a rules file against the decision table it was exported from:
at each sample point the file must name the algorithm the table's rule maps to
(through the same layout choice and name mapping as the exporters); where the
table names the library's default decision, what the library's own selection
runs there (default_name)."""
from __future__ import annotations

from typing import Callable

from ..decision import DecisionTable, Entry
from ..errors import InputError
from ..exporters._mapping import is_library_default, resolve
from ..exporters.openmpi_tuned import comm_blocks


def entry_for(table: DecisionTable, coll: str, comm_size: int) -> Entry | None:
    """The entry whose rules an exported file applies to comm_size ranks."""
    blocks, _ = comm_blocks(table, coll, {coll})
    chosen = None
    for start, _, entry in blocks:
        if chosen is None or start <= comm_size:
            chosen = entry
    return chosen


def check_against_table(table: DecisionTable, library: str, results: list, ranks: int,
                        known: Callable[[str], set[str]],
                        default_name: Callable[[object], str | None] | None = None) -> list[str]:
    """Mark points where the file and the table disagree as failed; notes.
    default_name(point): the algorithm the library's own selection names there."""
    notes = []
    for r in results:
        p = r.point
        entry = entry_for(table, p.collective, ranks)
        if entry is None:
            notes.append(f"{p.collective}: not in the table")
            continue
        rule = entry.rule_for(p.nbytes)
        if is_library_default(table, rule) and default_name is not None:
            r.default = True
            want_name = default_name(p)
            says = f"its default decision, {want_name}"
        else:
            try:
                want_name = resolve(library, entry, rule, known(p.collective), True).algorithm
            except InputError as exc:
                notes.append(str(exc))
                continue
            says = want_name
        if want_name != p.expected:
            r.honoured = False
            r.ran += f" [the table says {says}, the file {p.expected}]"
    return notes
