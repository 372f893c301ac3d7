"""Cross-check a rules file against the decision table it was exported from:
at each sample point the file must name the algorithm the table's rule maps to
(through the same layout choice, size keys and name mapping as the exporters);
where the table names the library's default decision, what the library's own
selection runs there (default_name).

Size keys: the exporters write the collectives that the library keys by the
total message size (Open MPI: TOTAL_SIZE_KEY; MPICH: those without an
avg_msg_size key) as the table's bytes per rank times the comm size of the
layout the block was tuned on. A run on another comm size of the same block
reaches the file's thresholds at other bytes per rank (e.g. on 4 ranks, a
threshold tuned on 8 is met at twice the bytes per rank), so the table rule
the file says there is the one at total / tuned comm size, not at the bytes
per rank of the run (table_size)."""
from __future__ import annotations

from typing import Callable

from ..decision import DecisionTable, Entry
from ..errors import InputError
from ..exporters._mapping import is_library_default, resolve
from ..exporters.mpich_json import AVG_KEY
from ..exporters.openmpi_tuned import TOTAL_SIZE_KEY, comm_blocks


def entry_for(table: DecisionTable, coll: str, comm_size: int) -> tuple[Entry, int] | None:
    """(entry, its tuned comm size) whose rules an exported file applies to comm_size ranks."""
    blocks, _ = comm_blocks(table, coll, {coll})
    chosen = None
    for start, tuned, entry in blocks:
        if chosen is None or start <= comm_size:
            chosen = (entry, tuned)
    return chosen


def total_keyed(library: str, coll: str) -> bool:
    """Whether the library's file keys coll by the total message size."""
    return coll in TOTAL_SIZE_KEY if library == "openmpi" else coll not in AVG_KEY


def table_size(library: str, coll: str, nbytes: int, ranks: int, tuned: int) -> int:
    """The table's bytes per rank whose rule an exported file applies to a call of
    nbytes per rank on `ranks` ranks, in a block tuned on `tuned` ranks."""
    if coll != "barrier" and total_keyed(library, coll) and tuned:
        return nbytes * ranks // tuned
    return nbytes


def check_against_table(table: DecisionTable, library: str, results: list, ranks: int,
                        known: Callable[[str], set[str]],
                        default_name: Callable[[object], str | None] | None = None,
                        params_differ: Callable[[object, object], str | None] | None = None
                        ) -> list[str]:
    """Mark points where the file and the table disagree as failed; notes.
    default_name(point): the algorithm the library's own selection names there.
    params_differ(point, resolved): what differs between the file's parameters of the
    algorithm at point and the table's (resolved: the table rule's Resolved), or None."""
    notes = []
    for r in results:
        p = r.point
        found = entry_for(table, p.collective, ranks)
        if found is None:
            notes.append(f"{p.collective}: not in the table")
            continue
        entry, tuned = found
        rule = entry.rule_for(table_size(library, p.collective, p.nbytes, ranks, tuned))
        try:
            res = None if is_library_default(table, rule) else \
                resolve(library, entry, rule, known(p.collective), True)
        except InputError as exc:
            notes.append(str(exc))
            continue
        # the table's default decision, or a rule substituted by the library's own
        # selection (--allow-substitute): the file leaves the choice to the library
        if (res is None or getattr(res, "default", False)) and default_name is not None:
            r.default = True
            want_name = default_name(p)
            says = (f"its default decision, {want_name}" if res is None else
                    f"the library's own selection (a substitute), {want_name}")
        elif res is None:
            continue
        else:
            want_name = res.algorithm
            says = want_name
        if want_name != p.expected:
            r.honoured = False
            r.ran += f" [the table says {says}, the file {p.expected}]"
        elif res is not None and not getattr(res, "default", False) and params_differ is not None \
                and (differ := params_differ(p, res)):
            r.honoured = False
            r.ran += f" [{differ}]"
    return notes
