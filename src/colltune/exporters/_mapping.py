"""Which algorithm a library runs for a decision-table rule.

A rule tuned on the local backend with the target library's own provider
(``openmpi`` / ``mpich``) names that library's algorithm directly. A rule tuned
in simulation names an SMPI algorithm; SMPI re-implements many Open MPI and
MPICH algorithms under its own names, and EQUIVALENT says which library
algorithm each one is (same communication pattern, from the algorithms'
descriptions in SMPI's and the libraries' sources; verify proves the mapped
algorithm runs, not that it performs as SMPI's did). A rule
with no equivalent, or naming an algorithm that cannot be deployed through a
rules file (UNDEPLOYABLE), is an error, unless another SMPI algorithm took the same
time at every size the rule was measured at and has an equivalent (an exact tie,
TIE), or the user allows a substitute: the library's own selection there (its
default decision, written as for a rule naming the table's library default:
coll/tuned's algorithm 0, MPICH's built-in CSEL branch), named in the file header.
A fixed general-purpose algorithm would be a poor choice at some sizes (a
binomial bcast of 1 MiB); the library's own decision at least depends on the size.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..decision import Entry, Rule
from ..errors import InputError
from ..mpi.impl import simulated
from .colltune_rules import split_label

# Segment size of SMPI's pipelined bcasts NTSL / NTSB (bcast-NTSL.cpp, bcast-NTSB.cpp).
SMPI_SEGMENT = 8192

# (library, collective) -> {smpi algorithm: library algorithm (provider name), or
# (name, parameters) when the library algorithm needs parameters to match}
EQUIVALENT: dict[tuple[str, str], dict[str, str | tuple[str, dict]]] = {
    ("openmpi", "bcast"): {
        "binomial_tree": "binomial", "flattree": "basic_linear",
        "NTSL": ("pipeline", {"segsize": SMPI_SEGMENT}),          # pipelined chain
        "NTSB": ("binary_tree", {"segsize": SMPI_SEGMENT}),       # pipelined binary tree
        "ompi_split_bintree": "split_binary_tree", "ompi_pipeline": "pipeline",
        "scatter_rdb_allgather": "scatter_allgather", "scatter_LR_allgather": "scatter_allgather_ring"},
    ("openmpi", "reduce"): {
        "ompi_chain": "chain", "ompi_pipeline": "pipeline", "ompi_basic_linear": "linear",
        "flat_tree": "linear", "ompi_in_order_binary": "in-order_binary", "ompi_binary": "binary",
        "ompi_binomial": "binomial", "rab": "rabenseifner"},
    ("openmpi", "allreduce"): {
        "ompi_ring_segmented": "segmented_ring", "lr": "ring", "rdb": "recursive_doubling",
        "redbcast": "nonoverlapping", "rab_rdb": "rabenseifner"},
    ("openmpi", "allgather"): {
        "bruck": "bruck", "rdb": "recursive_doubling", "ring": "ring",
        "ompi_neighborexchange": "neighbor", "GB": "linear"},
    ("openmpi", "gather"): {
        "ompi_basic_linear": "basic_linear", "ompi_binomial": "binomial",
        "ompi_linear_sync": "linear_sync"},
    ("openmpi", "scatter"): {
        "ompi_basic_linear": "basic_linear", "ompi_binomial": "binomial",
        "ompi_linear_nb": "linear_nb"},
    ("openmpi", "alltoall"): {"basic_linear": "linear", "pair": "pairwise"},
    ("openmpi", "reduce_scatter_block"): {
        "ompi_basic_recursivehalving": "recursive_halving", "ompi_butterfly": "butterfly",
        "mpich_rdb": "recursive_doubling"},
    ("openmpi", "barrier"): {
        "ompi_basic_linear": "linear", "ompi_two_procs": "two_proc", "ompi_tree": "tree",
        "ompi_bruck": "bruck", "ompi_recursivedoubling": "recursive_doubling",
        "ompi_doublering": "double_ring"},
    ("mpich", "bcast"): {
        "binomial_tree": "binomial", "scatter_rdb_allgather": "scatter_recursive_doubling_allgather",
        "scatter_LR_allgather": "scatter_ring_allgather",
        "NTSB": ("pipelined_tree", {"tree_type": "kary", "k": 2, "chunk_size": SMPI_SEGMENT}),
        "NTSL": ("pipelined_tree", {"tree_type": "kary", "k": 1, "chunk_size": SMPI_SEGMENT})},
    ("mpich", "reduce"): {"binomial": "binomial", "scatter_gather": "reduce_scatter_gather"},
    ("mpich", "allreduce"): {
        "rdb": "recursive_doubling", "rab_rdb": "reduce_scatter_allgather", "lr": "ring"},
    ("mpich", "allgather"): {"bruck": "brucks", "rdb": "recursive_doubling", "ring": "ring"},
    ("mpich", "gather"): {"ompi_binomial": "binomial"},
    ("mpich", "scatter"): {"ompi_binomial": "binomial"},
    ("mpich", "alltoall"): {"bruck": "brucks", "pair": "pairwise"},
    ("mpich", "reduce_scatter_block"): {
        "mpich_pair": "pairwise", "mpich_rdb": "recursive_doubling",
        "mpich_noncomm": "noncommutative", "ompi_basic_recursivehalving": "recursive_halving"},
    ("mpich", "barrier"): {"mpich_smp": "smp"},
}

# What --allow-substitute writes for a rule with no equivalent: the library's own
# selection there (Resolved.default), named DEFAULT like coll/tuned's algorithm 0
# (verify names that one "default" too).
DEFAULT = "default"
OWN_SELECTION = {"openmpi": "coll/tuned's fixed decision, algorithm 0",
                 "mpich": "its built-in CSEL branch"}


def own_selection(library: str) -> str:
    """What a substituted rule runs, in words."""
    how = OWN_SELECTION.get(library)
    return f"{library}'s own selection" + (f" ({how})" if how else "")


# Library algorithms a rules file must not select, with the reason (found by
# running the exported file).
UNDEPLOYABLE: dict[tuple[str, str], dict[str, str]] = {
    ("mpich", "allreduce"): {
        "ccl": "it needs NCCL/RCCL: selected by a CSEL file, MPICH 5.0.2 segfaults in MPI_Init "
               "on this CPU-only host (forced after MPI_Init, as when tuning, it completes)"},
}


@dataclass(frozen=True)
class Resolved:
    algorithm: str          # the library's (provider) name; DEFAULT where default
    substituted: str = ""   # "" or a sentence for the file header
    params: dict = field(default_factory=dict)   # the equivalent's parameters + the rule's
    # the library's own selection here: the table's library default decision, or
    # (with substituted set) the substitute for a rule the library cannot express
    default: bool = False


# SMPI is deterministic: algorithms that send the same messages take the same time (at
# 8 B, mvapich2_rs and rdb are both recursive doubling). Two arms within this fraction
# of each other at every size a rule was measured at are the same choice.
TIE = 1e-3


def equivalent(library: str, collective: str, smpi_algorithm: str) -> tuple[str | None, dict]:
    """The library's algorithm (None if it has none) and its parameters for an SMPI one."""
    equiv = EQUIVALENT.get((library, collective), {}).get(smpi_algorithm)
    return equiv if isinstance(equiv, tuple) else (equiv, {})


def tied_equivalent(library: str, entry: Entry, rule: Rule, usable) -> Resolved | None:
    """For an SMPI rule without a usable equivalent: another SMPI algorithm measured
    within TIE of it at every size the rule was measured at, whose equivalent the
    target has (the first by name), with a header note saying so. None when the rule
    has no measured sizes (a size between measured ones, a layout not tuned)."""
    sizes = set(rule.measured_sizes)
    times: dict[str, dict[int, float]] = {}
    for size, provider, alg, seconds in entry.measured:
        if simulated(provider) and size in sizes:
            times.setdefault(alg, {})[size] = seconds
    own = times.get(rule.algorithm, {})
    if not sizes or set(own) != sizes:
        return None
    for alg in sorted(times):
        name, params = equivalent(library, entry.collective, alg)
        if alg == rule.algorithm or not usable(name) or set(times[alg]) != sizes or \
                any(abs(times[alg][s] - own[s]) > TIE * own[s] for s in sizes):
            continue
        at = ", ".join(f"{s} B" for s in sorted(sizes))
        return Resolved(name, f"{describe(entry, rule)} -> {name!r}, the equivalent of SMPI's "
                              f"{alg!r}, which took the same time (within {TIE:.1%}) at {at}",
                        params={**params, **rule.params})
    return None


def describe(entry: Entry, rule: Rule) -> str:
    return (f"{entry.collective} layout {entry.nodes}x{entry.ppn} from {rule.min_size} B/rank: "
            f"{rule.provider} algorithm {rule.algorithm!r}")


def resolve(library: str, entry: Entry, rule: Rule, known: set[str] | None,
            allow_substitute: bool) -> Resolved:
    """The library algorithm for rule, or InputError naming the rule. known: the
    target's algorithm names (None: not known, names are not checked)."""
    coll = entry.collective
    banned = UNDEPLOYABLE.get((library, coll), {})

    def usable(name: str | None) -> bool:
        return name is not None and (known is None or name in known) and name not in banned

    if rule.provider == library:
        name, params = split_label(rule.algorithm)   # a tuned preset: pipeline[segsize=16384]
        if usable(name):
            return Resolved(name, params={**params, **rule.params})
        problem = banned.get(name, f"{library} has no such {coll} algorithm in the target version")
    elif simulated(rule.provider):
        name, params = equivalent(library, coll, rule.algorithm)
        if usable(name):
            return Resolved(name, params={**params, **rule.params})
        problem = (f"SMPI's {rule.algorithm!r} has no {library} equivalent"
                   if name is None else f"its equivalent {name!r} is not in the target version")
        tie = tied_equivalent(library, entry, rule, usable)
        if tie:
            return tie
    elif rule.provider == "colltune":
        problem = f"rules of provider {rule.provider!r} cannot be expressed for {library}"
    else:       # another library's algorithm: a namesake is another implementation
        problem = (f"measured on {rule.provider}, not {library}: the rules file of {library} names "
                   f"only {library}'s own algorithms (tune on {library} for its table)")
    if allow_substitute:
        return Resolved(DEFAULT, f"{describe(entry, rule)} -> substituted by "
                                 f"{own_selection(library)}: {problem}", default=True)
    hint = f"--allow-substitute would leave it to {own_selection(library)} there"
    if rule.provider not in (library, "smpi", "colltune"):
        raise InputError(f"{describe(entry, rule)}: {problem}; {hint}")
    known_list = "not checked" if known is None else ", ".join(sorted(set(known) - set(banned)))
    raise InputError(f"{describe(entry, rule)}: {problem} (known: {known_list}); {hint}")


def is_library_default(table, rule: Rule) -> bool:
    """Whether rule is the library's default decision: the arm named in the
    table's provenance ``arms.library_default`` (tables of ``--provider both``).
    A rules file writes it as "the library's own selection here": coll/tuned's
    algorithm 0 (its fixed decision), MPICH's built-in selection subtree."""
    arms = (getattr(table, "provenance", None) or {}).get("arms") or {}
    return bool(arms.get("library_default")) and \
        (rule.provider, rule.algorithm) == (arms.get("library"), arms.get("library_default"))


class Problems:
    """Collects the rules an export cannot express, to report them all at once, and
    counts per collective the rules resolved and those substituted."""

    def __init__(self, allow_substitute: bool = False) -> None:
        self.allow_substitute = allow_substitute
        self.items: list[str] = []
        self.counts: dict[str, list[int]] = {}     # collective -> [rules, substituted]

    def resolve(self, library: str, entry: Entry, rule: Rule, known: set[str] | None,
                table=None) -> Resolved | None:
        """The library algorithm for rule (Resolved.default: the library's own
        selection, where table names its default decision or as a substitute);
        None, with the problem collected, if it cannot be expressed."""
        count = self.counts.setdefault(entry.collective, [0, 0])
        count[0] += 1
        if table is not None and is_library_default(table, rule):
            return Resolved(DEFAULT, default=True)
        try:
            res = resolve(library, entry, rule, known, self.allow_substitute)
        except InputError as exc:
            self.items.append(str(exc))
            return None
        count[1] += res.default
        return res

    def all_substituted(self, library: str) -> list[str]:
        """For each collective whose every rule was substituted, a warning (the
        file keeps nothing of its tuning); also written to stderr."""
        out = []
        for coll, (n, subs) in self.counts.items():
            if n and subs == n:
                out.append(f"every {coll} rule ({n}) was substituted: the file leaves {coll} "
                           f"to {own_selection(library)} and keeps nothing of its tuning")
                print(f"colltune: warning: {out[-1]}", file=sys.stderr)
        return out

    def check(self, fmt: str, shown: int = 12) -> None:
        if self.items:
            more = f"\n  ... and {len(self.items) - shown} more" if len(self.items) > shown else ""
            hint = ("\n(colltune's own algorithms run through its interposer: `colltune deploy "
                    "--table T --library LIB -o DIR` writes the library's rules file for the "
                    "library's rules and colltune's for the rest)"
                    if any("rules of provider 'colltune'" in i for i in self.items) else "")
            raise InputError(f"{len(self.items)} rule(s) cannot be exported as {fmt}:\n  "
                             + "\n  ".join(self.items[:shown]) + more + hint)
