"""Cross-check a rules file against the decision table it was exported from:
at each sample point the file must name the algorithm the table's rule maps to
(through the same layout choice and name mapping as the exporters)."""
from __future__ import annotations

from typing import Callable

from ..decision import DecisionTable, Entry
from ..errors import InputError
from ..exporters._mapping import resolve
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
                        known: Callable[[str], set[str]]) -> list[str]:
    """Mark points where the file and the table disagree as failed; notes."""
    notes = []
    for r in results:
        p = r.point
        entry = entry_for(table, p.collective, ranks)
        if entry is None:
            notes.append(f"{p.collective}: not in the table")
            continue
        try:
            want = resolve(library, entry, entry.rule_for(p.nbytes), known(p.collective), True)
        except InputError as exc:
            notes.append(str(exc))
            continue
        if want.algorithm != p.expected:
            r.honoured = False
            r.ran += f" [the table says {want.algorithm}, the file {p.expected}]"
    return notes
