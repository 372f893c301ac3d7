"""Open MPI coll/tuned dynamic rules (``coll_tuned_dynamic_rules_filename``).

The classic format is a stream of integers with ``#`` comments: number of
collectives; per collective its id and number of communicator sizes; per
communicator size the size and number of message-size rules; per rule: message
size, algorithm, fan-in/out, segment size [, max requests]. Open MPI 4.1.8+ and
5.0.7+ accept a ``rule-file-version-2`` first line that adds the max-requests
column; older releases would misparse it, so the header is written only for them.

Checked against Open MPI 5.0.11 (tests): a communicator-size block applies to
communicators of that size and larger, up to the next block (smaller ones use
the first block); each block must start at message size 0 and everything must
ascend, or the whole file is dropped without a word.

Decisions kept from the table:
- communicator size = nodes x ppn of each entry. coll/tuned cannot tell layouts
  with the same size apart: the one with the most nodes wins (the file is for
  multi-node jobs; single-node communicators are usually taken by other
  components), and the others are named in the header.
- between two tuned communicator sizes a and b the file switches at the
  geometric midpoint, as DecisionTable.lookup picks the nearest layout.
- message size key: tables store bytes per rank; allgather, alltoall, gather,
  scatter and reduce_scatter_block are keyed by the total (x comm size),
  bcast, reduce and allreduce by bytes per rank, barrier by 0.
- the library's default decision (a rule naming the table's
  ``arms.library_default``, or the substitute for a rule without an Open MPI
  equivalent, --allow-substitute) is algorithm 0: coll/tuned's dynamic decision runs
  a file rule only when its algorithm is non-zero and otherwise falls through
  to its fixed decision (coll_tuned_decision_dynamic.c, ``if (alg)``), which is
  what runs without a file where coll/tuned has the communicator.
"""
from __future__ import annotations

import re

from ..decision import DecisionTable, Entry, boundary
from ..errors import InputError
from ..providers.openmpi import PARAMETERS, RADIX, RADIX_VAR
from . import EXPORTERS
from ._mapping import DEFAULT, Problems, describe
from .base import Exported, Exporter, header_lines

COLL_ID = {"allgather": 0, "allreduce": 2, "alltoall": 3, "barrier": 6, "bcast": 7,
           "gather": 9, "reduce": 11, "reduce_scatter_block": 13, "scatter": 15}
TOTAL_SIZE_KEY = {"allgather", "alltoall", "gather", "scatter", "reduce_scatter_block"}

# coll_tuned_<coll>_algorithm enumerator values of the 5.0 series (ompi_info
# --param coll tuned --level 9 of 5.0.11; docs/local.md). Other series: read
# them from that release's ompi_info (installed_ids).
IDS_5_0 = {
    "bcast": ["basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree",
              "binomial", "knomial", "scatter_allgather", "scatter_allgather_ring"],
    "reduce": ["linear", "chain", "pipeline", "binary", "binomial", "in-order_binary",
               "rabenseifner"],
    "allreduce": ["basic_linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner"],
    "allgather": ["linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc",
                  "sparbit"],
    "gather": ["basic_linear", "binomial", "linear_sync"],
    "scatter": ["basic_linear", "binomial", "linear_nb"],
    "alltoall": ["linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"],
    "reduce_scatter_block": ["basic_linear", "recursive_doubling", "recursive_halving",
                             "butterfly"],
    "barrier": ["linear", "double_ring", "recursive_doubling", "bruck", "two_proc", "tree"],
}
# Algorithm 0 in a rules file: "no algorithm here", coll/tuned's fixed decision runs.
DEFAULT_ID, DEFAULT_NAME = 0, DEFAULT
DEFAULT_NOTE = ("algorithm 0 where the table names the library's default decision: "
                "coll/tuned runs its fixed decision there")
# Rule params each column takes (the first one present wins).
SEGSIZE_KEYS, FANOUT_KEYS, MAXREQ_KEYS = (("segsize", "segment_size"),
                                          ("fanout", "tree_fanout", "chain_fanout"),
                                          ("max_requests",))


def parse_version(target: str | None, default: tuple[int, ...] = (5, 0, 11)) -> tuple[int, ...]:
    if target is None:
        return default
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?\S*", target.strip())
    if not m:
        raise InputError(f"--target {target!r}: expected a library version MAJOR.MINOR[.PATCH], "
                         f"such as 5.0.11 (Open MPI) or 5.0.2 (MPICH)")
    return tuple(int(g or 0) for g in m.groups())


def rules_version(v: tuple[int, ...]) -> int:
    """2 (header + max-requests column) from 4.1.8 and 5.0.7 on, else 1."""
    return 2 if ((4, 1, 8) <= v < (5, 0, 0)) or v >= (5, 0, 7) else 1


def installed_ids(v: tuple[int, ...]) -> dict[str, dict[str, int]]:
    """{collective: {name: id}} for release v: the 5.0 table, or the installed
    Open MPI's own ompi_info when it is of the same series."""
    if v[:2] == (5, 0):
        return {c: {n: i + 1 for i, n in enumerate(names)} for c, names in IDS_5_0.items()}
    from .. import mpi
    from ..providers.openmpi import OMPI_NAME, _probe
    try:
        impl = mpi.find("openmpi")
    except mpi.MPINotFound:
        impl = None
    if impl is None or parse_version(impl.version)[:2] != v[:2] or impl.info_tool is None:
        raise InputError(f"algorithm numbers of Open MPI {'.'.join(map(str, v))} are not known "
                         f"here: built in for 5.0.x; for another series run export where that "
                         f"Open MPI is installed (its ompi_info is read)")
    ids, _, _ = _probe(impl.info_tool, tuple(sorted(impl.run_env().items())))
    return {c: ids.get(OMPI_NAME[c], {}) for c in COLL_ID}


def pick_layouts(entries: list[Entry]) -> tuple[dict[int, Entry], list[str]]:
    """{comm size: entry} (most nodes wins) and notes on the layouts left out."""
    by_size: dict[int, Entry] = {}
    notes = []
    for e in sorted(entries, key=lambda e: (-e.nodes, e.ppn)):
        p = e.nodes * e.ppn
        if p in by_size:
            kept = by_size[p]
            notes.append(f"{e.collective} {e.nodes}x{e.ppn} left out: same comm size {p} as "
                         f"{kept.nodes}x{kept.ppn} (coll/tuned keys on comm size only)")
        else:
            by_size[p] = e
    return dict(sorted(by_size.items())), notes


def comm_blocks(table: DecisionTable, coll: str, known: dict) -> tuple[list[tuple[int, int, Entry]], list[str]]:
    """[(first comm size of the block, tuned comm size, entry)] ascending for coll,
    switching at geometric midpoints, and notes on the layouts left out."""
    if coll not in known:
        raise InputError(f"collective {coll!r} cannot be expressed in this format")
    layouts, notes = pick_layouts([e for e in table.entries if e.collective == coll])
    sizes = list(layouts)
    return [(p if i == 0 else boundary(sizes[i - 1], p), p, layouts[p])
            for i, p in enumerate(sizes)], notes


def param_value(params: dict, keys: tuple[str, ...]) -> int:
    for k in keys:
        if k in params:
            return int(params[k])
    return 0


def columns(collective: str, algorithm: str, params: dict) -> tuple[int, int, int]:
    """A rule's fan-in/out, segment size and max requests columns. A chain's fan-out
    where the rule names none is the one it was measured with, coll/tuned's forced
    default (chain_fanout, 4): the file's 0 would build other chains."""
    declared = PARAMETERS.get(collective, {}).get(algorithm, {})
    fan = param_value(params, FANOUT_KEYS) or \
        (declared["fanout"]["default"] if "fanout" in declared else 0)
    return fan, param_value(params, SEGSIZE_KEYS), param_value(params, MAXREQ_KEYS)


def rule_rows(entry: Entry, ids: dict[str, int], comm_size: int, problems: Problems,
              notes: list[str], table: DecisionTable | None = None, job_wide: dict | None = None
              ) -> list[tuple[int, int, int, int, int]]:
    """(message size key, algorithm id, fan-in/out, segment size, max requests), merged.
    A rule that is the table's library default decision, or substituted by it
    (--allow-substitute), gets algorithm 0. job_wide: {parameter: {value: [rule, ...]}}
    of the parameters that are one MCA variable for the whole job (JOB_WIDE)."""
    known_params = set(SEGSIZE_KEYS + FANOUT_KEYS + MAXREQ_KEYS)
    rows: list[tuple[int, int, int, int, int]] = []
    rules = entry.rules if entry.collective != "barrier" else (entry.rule_for(0),)
    for rule in rules:
        size = 0 if entry.collective == "barrier" else rule.min_size
        if entry.collective in TOTAL_SIZE_KEY:
            size *= comm_size
        res = problems.resolve("openmpi", entry, rule, set(ids), table)
        if res is None:
            continue
        if res.default:
            row = (size, DEFAULT_ID, 0, 0, 0)
            note = res.substituted or DEFAULT_NOTE
            if note not in notes:
                notes.append(note)
        else:
            wide = JOB_WIDE.get((entry.collective, res.algorithm), {})
            for name, spec in wide.items():
                value = res.params.get(name, spec["default"])
                if job_wide is not None:
                    job_wide.setdefault(name, {}).setdefault(value, []).append(describe(entry, rule))
            extra = set(res.params) - known_params - set(wide)
            if extra:
                problems.items.append(f"{describe(entry, rule)}: parameter(s) "
                                      f"{', '.join(sorted(extra))} have no coll/tuned rules column")
                continue
            if res.substituted:
                notes.append(res.substituted)
            row = (size, ids[res.algorithm], *columns(entry.collective, res.algorithm, res.params))
        if rows and rows[-1][1:] == row[1:]:
            continue                      # same choice as the previous range: merge
        rows.append(row)
    return rows


# Parameters coll/tuned reads from one MCA variable for the whole job, not from a rules
# column: bcast knomial's radix (ompi_coll_tuned_bcast_intra_do_this passes
# coll_tuned_bcast_knomial_radix to every knomial call, rules file or forced). An export
# sets the variable once; rules asking for two values cannot be honoured, and are refused.
JOB_WIDE = {("bcast", "knomial"): {"radix": {**RADIX, "var": RADIX_VAR}}}


def _job_wide_env(job_wide: dict[str, dict[int, list[str]]], problems: Problems) -> dict[str, str]:
    specs = {name: spec for per in JOB_WIDE.values() for name, spec in per.items()}
    env = {}
    for name, by_value in job_wide.items():
        spec = specs[name]
        if len(by_value) > 1:
            seen = "; ".join(f"{name}={v} at {', '.join(where[:2])}" + (" ..." if len(where) > 2 else "")
                             for v, where in sorted(by_value.items()))
            problems.items.append(f"{name}: Open MPI takes one value per job "
                                  f"({spec['var'].removeprefix('OMPI_MCA_')}), the table asks for "
                                  f"{len(by_value)}: {seen} (tune with one {name})")
            continue
        (value,) = by_value
        if value != spec["default"]:
            env[spec["var"]] = str(value)
    return env


@EXPORTERS.register("openmpi-tuned")
class OpenMPITunedExporter(Exporter):
    deploys = True     # the library part of `colltune deploy`
    name = "openmpi-tuned"
    library = "openmpi"
    description = "Open MPI coll/tuned dynamic rules file (classic, or rule-file-version-2)"
    allow_substitute = False

    def export(self, table: DecisionTable, target: str | None = None) -> Exported:
        v = parse_version(target)
        version = rules_version(v)
        ids_all = installed_ids(v)
        notes: list[str] = []
        problems = Problems(self.allow_substitute)
        blocks = []
        job_wide: dict[str, dict[int, list[str]]] = {}
        for coll in table.collectives():
            layout_blocks, dropped = comm_blocks(table, coll, COLL_ID)
            notes += dropped
            blocks.append((coll, [(start, e.nodes, e.ppn,
                                   rule_rows(e, ids_all.get(coll, {}), p, problems, notes, table,
                                             job_wide))
                                  for start, p, e in layout_blocks]))
        wide_env = _job_wide_env(job_wide, problems)
        problems.check(self.name)
        notes += problems.all_substituted(self.library)
        resolved = target or ".".join(map(str, v))
        lines = [f"# {h}" for h in header_lines(table, resolved, self.name)]
        lines.append(f"# coll/tuned rules file format {version}; message sizes in bytes "
                     f"(total for allgather/alltoall/gather/scatter/reduce_scatter_block)")
        lines += [f"# NOTE {n}" for n in notes]
        if version == 2:
            lines.insert(0, "rule-file-version-2")
        lines.append(f"{len(blocks)}  # collectives")
        for coll, per_size in blocks:
            lines.append(f"{COLL_ID[coll]}  # {coll}")
            lines.append(f"{len(per_size)}  # communicator sizes")
            for start, nodes, ppn, rows in per_size:
                lines.append(f"{start} {len(rows)}  # comm size >= {start}: tuned on "
                             f"{nodes}x{ppn}")
                for size, alg, fan, seg, maxreq in rows:
                    cols = [size, alg, fan, seg] + ([maxreq] if version == 2 else [])
                    lines.append(" ".join(map(str, cols)))
        env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
               "OMPI_MCA_coll_tuned_dynamic_rules_filename": "{path}", **wide_env}
        doc = ["unset every OMPI_MCA_coll_tuned_<coll>_algorithm: Open MPI 5.0 prefers them "
               "to the file (4.1 the opposite)"]
        if v >= (5, 0, 0):
            env["OMPI_MCA_coll_han_priority"] = "0"
            doc.append("coll_han_priority=0: otherwise coll/han (5.0 default) takes multi-node "
                       "communicators and tuned sees only its sub-communicators")
        return Exported("\n".join(lines) + "\n", ".rules", env, tuple(doc + notes), resolved)
