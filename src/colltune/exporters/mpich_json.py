"""MPICH collective selection ("CSEL") JSON (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE).

The file replaces MPICH's whole built-in MPIR-level selection tree, and MPICH 5.0
aborts ("Assertion failed ... mpir_coll.c: cnt") as soon as any collective —
its own internal ones inside MPI_Init included — finds no branch. So the export
starts from the target library's own default tree (the JSON string compiled into
libmpi, or --base FILE, e.g. maint/tuning/coll/mpir/generic.json of that
release) and replaces only the ``comm_type=intra`` branch of each tuned
collective; everything else stays the library's choice.

Format facts (MPICH src/mpi/coll/src/csel.c, csel_container.c of 4.0–5.0, and
runs of 5.0.2): siblings are tried in file order and ``<=`` thresholds are
inclusive, so ladders ascend and end with an "any" branch, spelled
``comm_size=any`` / ``avg_msg_size=any`` / ``total_msg_size=any`` up to 4.1 and
``any`` from 4.2; leaves are ``algorithm=MPIR_<Coll>_intra_<name>`` (``nb`` is
``MPIR_<Coll>_allcomm_nb``) whose parameter object must name every parameter
(unset ones are uninitialised memory): the rule's parameters, the others at the
control variables' defaults that a forced measurement ran with
(providers/mpich_params.py); ``tree_type`` is an integer up to 4.2 and a name
from 4.3. ``avg_msg_size`` (type size x count) keys bcast, reduce,
allreduce and alltoall; ``total_msg_size`` the others: allgather and
reduce_scatter_block in bytes x comm size, gather and scatter in *elements* x
comm size (MPICH's get_total_msgsize omits the type size there; colltune's
bench uses char for them, so bytes = elements).

No comments in JSON, and an unknown key at any operator level aborts MPICH
(a top-level ``"_comment"`` included, checked on 5.0.2). Parameter objects of
leaves ignore keys they do not know, so the provenance header goes into the
first tuned leaf as ``"colltune: <line>": {}`` keys.

The library's default decision (a rule naming the table's
``arms.library_default``, or the substitute for a rule without an MPICH
equivalent, --allow-substitute) is written as a copy of the default tree's own
``comm_type=intra`` branch of that collective under the rule's message-size
branch: CSEL evaluates operators at any depth (csel.c: MPIR_Csel_search walks
comm_size / comm_hierarchy / msg_size / count nodes wherever they are), so at
those sizes MPICH decides exactly as its built-in selection does.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from ..decision import DecisionTable, Entry
from ..errors import InputError
from . import EXPORTERS
from ..providers.mpich_params import TREE_TYPES, leaf_defaults, tree_type_name
from ._mapping import Problems, describe
from .base import Exported, Exporter, header_lines
from .openmpi_tuned import comm_blocks, parse_version

FUNC = {"bcast": "Bcast", "reduce": "Reduce", "allreduce": "Allreduce", "allgather": "Allgather",
        "gather": "Gather", "scatter": "Scatter", "alltoall": "Alltoall",
        "reduce_scatter_block": "Reduce_scatter_block", "barrier": "Barrier"}
AVG_KEY = {"bcast", "reduce", "allreduce", "alltoall"}
DEFAULT_NOTE = ("where the table names the library's default decision: a copy of the "
                "default selection's comm_type=intra branch of the collective")
_LEAF = re.compile(rb"algorithm=(MPIR_[A-Z][a-z_]*?_(?:intra|allcomm)_[A-Za-z0-9_]+)")


def func_name(coll: str, name: str) -> str:
    return f"MPIR_{FUNC[coll]}_allcomm_nb" if name == "nb" else f"MPIR_{FUNC[coll]}_intra_{name}"


def any_key(key: str, v: tuple[int, ...]) -> str:
    return "any" if v >= (4, 2) else f"{key}=any"


def library_json(lib: str) -> tuple[dict, set[str]]:
    """(MPIR default selection tree, leaf function names) compiled into libmpi."""
    data = Path(lib).read_bytes()
    best = None
    for m in re.finditer(rb'\{\s*"collective=', data):
        blob = data[m.start():data.index(b"\0", m.start())]
        if b"algorithm=MPIR_" in blob and (best is None or len(blob) > len(best)):
            best = blob
    if best is None:
        raise InputError(f"{lib}: no built-in MPIR selection JSON found (use --base FILE)")
    return json.loads(best), {m.decode() for m in _LEAF.findall(data)}


def installed_base(v: tuple[int, ...]) -> tuple[dict, set[str], str]:
    from .. import mpi
    try:
        impl = mpi.find("mpich")
    except mpi.MPINotFound:
        impl = None
    if impl is None or parse_version(impl.version)[:2] != v[:2] or not impl.prefix:
        raise InputError(f"MPICH {'.'.join(map(str, v))} is not installed here to read its "
                         f"default selection from: pass --base FILE (that release's "
                         f"maint/tuning/coll/mpir/generic.json)")
    libs = sorted(Path(impl.prefix, "lib").glob("libmpi.so.*"))
    if not libs:
        raise InputError(f"no libmpi.so.* under {impl.prefix}/lib")
    tree, leaves = library_json(str(libs[0]))
    return tree, leaves, f"{libs[0]} (MPICH {impl.version})"


def leaf(coll: str, name: str, params: dict, v: tuple[int, ...], where: str) -> dict:
    func = func_name(coll, name)
    merged = leaf_defaults(func)
    unknown = set(params) - set(merged)
    if unknown:
        raise InputError(f"{where}: {func} takes no parameter(s) {', '.join(sorted(unknown))}"
                         f" (it takes: {', '.join(merged) or 'none'})")
    merged.update(params)
    if "tree_type" in merged:      # a number up to 4.2, a name from 4.3
        name = tree_type_name(merged["tree_type"])
        merged["tree_type"] = (TREE_TYPES.index(name) if name in TREE_TYPES else int(name)) \
            if v < (4, 3) else name
    return {f"algorithm={func}": {f"{k}={val}": {} for k, val in merged.items()}}


def msg_ladder(entry: Entry, comm_size: int, v: tuple[int, ...], known: set[str] | None,
               problems: Problems, notes: list[str], table: DecisionTable | None = None,
               default_branch: dict | None = None) -> dict:
    """The message-size ladder of entry; where the table names the library's
    default decision, or a rule is substituted (--allow-substitute), a copy of
    default_branch (the default tree's intra branch)."""
    coll = entry.collective
    key = "avg_msg_size" if coll in AVG_KEY else "total_msg_size"
    factor = 1 if coll in AVG_KEY else comm_size
    rules = entry.rules if coll != "barrier" else (entry.rule_for(0),)
    out: dict = {}
    for i, rule in enumerate(rules):
        res = problems.resolve("mpich", entry, rule, known, table)
        if res is None:
            continue
        if res.default:        # the table's default decision, or the substitute
            if not default_branch:
                problems.items.append(f"{describe(entry, rule)}: the library's default "
                                      f"selection has no comm_type=intra branch for {coll} "
                                      f"to fall back to")
                continue
            node = copy.deepcopy(default_branch)
            note = res.substituted or DEFAULT_NOTE
            if note not in notes:
                notes.append(note)
        else:
            if res.substituted:
                notes.append(res.substituted)
            try:
                node = leaf(coll, res.algorithm, res.params, v, describe(entry, rule))
            except InputError as exc:
                problems.items.append(str(exc))
                continue
        if i + 1 < len(rules):
            out[f"{key}<={rules[i + 1].min_size * factor - 1}"] = node
        else:
            out[any_key(key, v)] = node
    return out


def known_names(coll: str, leaves: set[str] | None) -> set[str] | None:
    if leaves is None:
        return None
    pre, nb = f"MPIR_{FUNC[coll]}_intra_", f"MPIR_{FUNC[coll]}_allcomm_nb"
    return {f[len(pre):] for f in leaves if f.startswith(pre)} | ({"nb"} if nb in leaves else set())


@EXPORTERS.register("mpich-json")
class MPICHJsonExporter(Exporter):
    deploys = True     # the library part of `colltune deploy`
    name = "mpich-json"
    library = "mpich"
    description = "MPICH CSEL JSON: the library's default tree with the tuned collectives replaced"
    allow_substitute = False
    base_path: str | None = None      # --base: that release's generic.json instead of libmpi's

    def export(self, table: DecisionTable, target: str | None = None) -> Exported:
        v = parse_version(target, default=(5, 0, 2))
        if self.base_path:
            try:
                base, leaves = json.loads(Path(self.base_path).read_text()), None
            except (OSError, json.JSONDecodeError) as exc:
                raise InputError(f"--base {self.base_path}: {exc}") from None
            source = self.base_path
        else:
            base, leaves, source = installed_base(v)
        notes: list[str] = []
        problems = Problems(self.allow_substitute)
        tree = dict(base)
        for coll in table.collectives():
            blocks, dropped = comm_blocks(table, coll, FUNC)
            notes += dropped
            ladder: dict = {}
            for i, (_, p, entry) in enumerate(blocks):
                node = msg_ladder(entry, p, v, known_names(coll, leaves), problems, notes,
                                  table, base.get(f"collective={coll}", {}).get("comm_type=intra"))
                if i + 1 < len(blocks):
                    ladder[f"comm_size<={blocks[i + 1][0] - 1}"] = node
                else:
                    ladder[any_key("comm_size", v)] = node
            old = base.get(f"collective={coll}", {})
            tree[f"collective={coll}"] = {"comm_type=intra": ladder,
                                          **{k: b for k, b in old.items() if k != "comm_type=intra"}}
        problems.check(self.name)
        notes += problems.all_substituted(self.library)
        resolved = target or ".".join(map(str, v))
        layouts = sorted({(e.nodes, e.ppn) for e in table.entries})
        lines = header_lines(table, resolved, self.name) + [
            f"default selection from {source}",
            "tuned on " + ", ".join(f"{n}x{p}" for n, p in layouts)]   # verify's default ranks
        lines += [f"NOTE {n}" for n in notes]
        tuned = {f"collective={c}" for c in table.collectives()}
        first = next((k for k in tree if k in tuned), None)    # first tuned one in file order
        if first is not None:
            _first_leaf(tree[first]).update({f"colltune: {ln}": {} for ln in lines})
        env = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": "{path}",
               "MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
        doc = ["MPIR_CVAR_DEVICE_COLLECTIVES=none: otherwise ch4 may serve a blocking "
               "collective with its own device algorithms before the file is consulted",
               "unset MPIR_CVAR_<COLL>_INTRA_ALGORITHM: a forced algorithm bypasses the file"]
        return Exported(json.dumps(tree, indent=1) + "\n", ".json", env, tuple(doc + notes),
                        resolved)


def _first_leaf(node: dict) -> dict:
    """The parameter object of the first leaf under node."""
    for key, sub in node.items():
        if key.startswith("algorithm="):
            return sub
        return _first_leaf(sub)
    raise InputError("empty selection branch")
