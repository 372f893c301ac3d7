"""The state's current choices as a decision table (per measured block its choice,
State.Block.best: docs/online.md), for the existing exporters. Blocks that are only
priors are left out: nothing was measured.

A rule names the provider that runs it (docs/deploy.md, "provider semantics"):

- colltune's arms: provider ``colltune`` with the arm's parameters;
- the ``library`` arm: the library's default decision — provider = the library the
  state was learnt on (the samples' job provenance: Open MPI -> ``openmpi``, MPICH ->
  ``mpich``, SMPI -> ``smpi``), algorithm = the provenance's ``arms.library_default``
  (``default`` on a real library; on SMPI the selector the jobs ran, which the samples
  do not record: ``unknown`` unless ``online export --library-default`` names it), so
  that openmpi-tuned writes algorithm 0 there, mpich-json the built-in branch, and the
  colltune format ``library``;
- MPICH's own algorithms (``mpich:<name>``, drawn through MPI_T): provider ``mpich``
  with that algorithm (mpich-json: ``MPIR_<Coll>_intra_<name>``). Other formats cannot
  express them (check_format).
"""
from __future__ import annotations

from ..decision import DecisionTable, Entry, Rule
from ..errors import InputError
from ..exporters._mapping import own_selection
from ..mpi.impl import simulated
from .arms import LIBRARY, LIBRARY_PREFIXES, split_arm
from .state import Arm, Block, State, class_range

UNKNOWN_SELECTOR = "unknown"
# MPI_Get_library_version's text (the samples' job "library") -> library provider
_LIBRARY_WORDS = (("open mpi", "openmpi"), ("smpi", "smpi"), ("simgrid", "smpi"), ("mpich", "mpich"))
LIBRARIES = ("openmpi", "mpich", "smpi")


def library_of(provenance: dict, state: State | None = None) -> str | None:
    """The library provider the state was learnt on, from the job provenance
    (job_provenance: mpi_library, backend); None when it does not say."""
    text = (provenance.get("mpi_library") or "").lower()
    for word, name in _LIBRARY_WORDS:
        if word in text:
            return name
    from ..backends import trait
    if trait(provenance.get("backend"), "simulated"):
        return "smpi"
    if state is not None:                   # MPICH's own arms exist only on MPICH builds
        for b in state.blocks.values():
            if any(split_arm(a.arm)[0] == "mpich" for a in b.arms):
                return "mpich"
    return None


def choices(state: State) -> list[tuple[Block, Arm]]:
    """(block, chosen arm) of every measured block."""
    return [(b, b.best()) for b in state.blocks.values() if b.source != "prior"]


def arms_provenance(library: str, library_default: str | None = None) -> dict:
    """The table's ``arms`` member, as providers/both.py writes it."""
    selector = simulated(library)   # SMPI: the default decision is the run's selector
    known = not selector or bool(library_default)
    default = library_default or (UNKNOWN_SELECTOR if selector else "default")
    if selector:
        what = (f"the selector {default!r}" if known else
                "the selector the jobs ran, not recorded by the samples (smpirun's own 'default' "
                "unless the platform's smpi_config or `run --default-selector` set one; "
                "`online export --library-default NAME` names it)")
    else:
        what = f"{library}'s own selection ({default!r})"
    return {"provider": "both", "library": library, "colltune": "colltune",
            "library_default": default, "library_default_known": known,
            "library_algorithms_deployable": not selector,
            "note": (f"online arms: colltune's algorithms, {library}'s default decision "
                     f"(the `library` arm: {what})"
                     + (" and MPICH's own algorithms (mpich:<name>)" if library == "mpich" else ""))}


def decision_table(state: State, provenance: dict, library: str | None = None,
                   library_default: str | None = None) -> DecisionTable:
    """library: the library provider (default: library_of(provenance)); library_default:
    SMPI's selector the jobs ran (real libraries: ``default``)."""
    if library is not None and library not in LIBRARIES:
        raise InputError(f"library {library!r}: expected one of {', '.join(LIBRARIES)}")
    lib = library or library_of(provenance, state)
    arms = arms_provenance(lib, library_default) if lib else None
    chosen = choices(state)
    if lib is None:
        lib_blocks = [b.label() for b, a in chosen if a.arm == LIBRARY]
        if lib_blocks:
            raise InputError(f"{len(lib_blocks)} block(s) chose the library ({lib_blocks[0]}, ...), "
                             f"but the samples do not say which library the state was learnt on "
                             f"(job library {provenance.get('mpi_library')!r}): pass --library "
                             f"{'|'.join(LIBRARIES)}")
    layouts: dict = {}
    for b, a in chosen:
        layouts.setdefault((b.collective, b.nodes, b.ppn), []).append((b, a))
    entries = []
    for (coll, nodes, ppn), blocks in sorted(layouts.items()):
        rules: list[Rule] = []
        for b, best in sorted(blocks, key=lambda x: x[0].cls):
            prov, name, params = split_arm(best.arm)
            if prov == LIBRARY:              # the library's default decision
                prov, name = arms["library"], arms["library_default"]
            mean = best.mean if best.n else None
            lo = class_range(b.cls)[0] if rules else 0
            if rules and (rules[-1].algorithm, rules[-1].provider, rules[-1].params) == (name, prov, params):
                continue
            rules.append(Rule(lo, name, prov, params, mean, ()))
        entries.append(Entry(coll, nodes, ppn, tuple(rules)))
    prov = {**provenance, "source": "online", "fingerprint": state.fingerprint,
            "run_count": state.run_count}
    if arms:
        prov["arms"] = arms
    return DecisionTable("online", prov, tuple(entries))


def check_format(state: State, fmt: str, fmt_library: str, allow_substitute: bool,
                 library: str | None = None) -> list[str]:
    """Blocks whose choice a file of fmt (read by fmt_library: openmpi, mpich, colltune)
    cannot express: an InputError naming them all, unless allow_substitute (then notes).
    A library's own algorithm (mpich:<name>) runs only in that library's own file."""
    bad = []
    for b, a in choices(state):
        prov = split_arm(a.arm)[0]
        if prov in LIBRARY_PREFIXES and prov != fmt_library:
            bad.append(f"{b.label()} chose {a.arm}")
    if not bad:
        return []
    src = library or "mpich"
    reader = ("the interposer's rules file (colltune's algorithms and `library` only)"
              if fmt_library == "colltune" else f"{fmt_library}")
    what = (f"the state was learnt on {src}: {len(bad)} block(s) chose {src}'s own algorithm, "
            f"which a file of format {fmt} cannot express (read by {reader})")
    instead = ("the library's own selection (`library`)" if fmt_library == "colltune"
               else own_selection(fmt_library))
    if not allow_substitute:
        raise InputError(f"{what}:\n  " + "\n  ".join(bad) +
                         f"\n--allow-substitute puts {instead} there"
                         + (f"; `--format mpich-json` keeps them" if src == "mpich" else ""))
    return [f"{what}; substituted by {instead}: " + "; ".join(bad)]
