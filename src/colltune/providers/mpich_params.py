"""MPICH's algorithm parameters, in one place for the provider, the exporter and verify.

An algorithm that takes parameters gets them from one of two places (MPICH's
src/mpi/coll/coll_algorithms.txt, ``extra_params`` / ``cvar_params``): chosen by a
CSEL JSON file, from its leaf's parameter object (``"k=4": {}``); forced with
``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``, from a control variable per parameter. So a
measured ``tree[k=4]`` is forced with MPIR_CVAR_BCAST_TREE_KVAL=4 and exported as a
leaf with ``k=4``, and every parameter the label leaves out is written as the control
variable's default, which is what the forced run used (a leaf must name every
parameter: MPICH reads unset ones from uninitialised memory).

Defaults are MPICH 5.0.2's control-variable defaults, read through MPI_T
(tests/test_verify.py compares them with the installed library).
``tree_type`` is MPIR_Tree_type_t's number in a label (0 kary, 1 knomial_1,
2 knomial_2: parameters are integers) and a name in files from 4.3 on.
The topology-aware trees' latencies (``topo_*``) only matter for tree types colltune
does not tune (they need the machine's topology), so they are written, not tuned.
"""
from __future__ import annotations

TREE_TYPES = ("kary", "knomial_1", "knomial_2")        # MPIR_Tree_type_t order

_TREE = {"tree_type": ("TREE_TYPE", "kary"), "k": ("TREE_KVAL", 2)}
_TOPO = {"topo_overhead": ("TOPO_OVERHEAD", 200), "topo_diff_groups": ("TOPO_DIFF_GROUPS", 2800),
         "topo_diff_switches": ("TOPO_DIFF_SWITCHES", 1900),
         "topo_same_switches": ("TOPO_SAME_SWITCHES", 1600)}
_RECEXCH = {"k": ("RECEXCH_KVAL", 2), "single_phase_recv": ("RECEXCH_SINGLE_PHASE_RECV", 0)}

# {leaf function: {parameter: (control variable without MPIR_CVAR_<COLL>_, default)}}
_BY_FUNC = {
    "MPIR_Bcast_intra_tree": {**_TREE, "is_non_blocking": ("IS_NON_BLOCKING", 1), **_TOPO},
    "MPIR_Bcast_intra_pipelined_tree": {**_TREE, "is_non_blocking": ("IS_NON_BLOCKING", 1),
                                        "chunk_size": ("TREE_PIPELINE_CHUNK_SIZE", 8192),
                                        "recv_pre_posted": ("RECV_PRE_POST", 0)},
    "MPIR_Allreduce_intra_tree": {"buffer_per_child": ("TREE_BUFFER_PER_CHILD", 0),
                                  "k": ("TREE_KVAL", 2), "tree_type": ("TREE_TYPE", "knomial_1"),
                                  "chunk_size": ("TREE_PIPELINE_CHUNK_SIZE", 0), **_TOPO},
    "MPIR_Allreduce_intra_recexch": _RECEXCH,
    "MPIR_Allreduce_intra_k_reduce_scatter_allgather": _RECEXCH,
    "MPIR_Allreduce_intra_recursive_multiplying": {"k": ("RECURSIVE_MULTIPLYING_KVAL", 2)},
    "MPIR_Allgather_intra_k_brucks": {"k": ("BRUCKS_KVAL", 2)},
    "MPIR_Allgather_intra_recexch_doubling": _RECEXCH,
    "MPIR_Allgather_intra_recexch_halving": _RECEXCH,
    "MPIR_Alltoall_intra_k_brucks": {"k": ("BRUCKS_KVAL", 2)},
    "MPIR_Barrier_intra_k_dissemination": {"k": ("DISSEM_KVAL", 2)},
    "MPIR_Barrier_intra_recexch": _RECEXCH,
}
# Not algorithm parameters colltune writes: the accelerator library's name.
_OTHER_LEAVES = {"MPIR_Allreduce_intra_ccl": {"ccl": "auto"}}

# What a label may set, with its range (Provider.parameters' form).
_SPECS = {
    "k": {"min": 1, "max": 64, "unit": "",
          "help": "radix: children per tree node / peers per step (1: a kary tree is a chain)"},
    "tree_type": {"min": 0, "max": len(TREE_TYPES) - 1, "unit": "",
                  "help": "tree shape: " + ", ".join(f"{i} {n}" for i, n in enumerate(TREE_TYPES))},
    "chunk_size": {"min": 0, "max": 1 << 30, "unit": "bytes",
                   "help": "pipeline chunk: the message goes in pieces of this size (0: one piece)"},
    "is_non_blocking": {"min": 0, "max": 1, "unit": "", "help": "1: send to the children with MPI_Isend"},
    "recv_pre_posted": {"min": 0, "max": 1, "unit": "", "help": "1: post every chunk's receive first"},
    "buffer_per_child": {"min": 0, "max": 1, "unit": "", "help": "1: one receive buffer per child"},
    "single_phase_recv": {"min": 0, "max": 1, "unit": "",
                          "help": "1: post the receives of one phase at a time"},
}

# Parametrised variants a tuning campaign also measures (tune_presets), next to each
# algorithm with its defaults: radix 4 and 8 where the default is 2, the bcast tree as a
# k-nomial, the pipelined trees at larger chunks. A starting set, not a search.
PRESETS = {
    "bcast": {"tree": ("k=4", "k=8", "tree_type=1,k=4"),
              "pipelined_tree": ("chunk_size=32768", "chunk_size=131072", "k=4,chunk_size=32768")},
    "allreduce": {"tree": ("k=4", "chunk_size=65536"), "recexch": ("k=4", "k=8"),
                  "k_reduce_scatter_allgather": ("k=4", "k=8"),
                  "recursive_multiplying": ("k=4", "k=8")},
    "allgather": {"k_brucks": ("k=4", "k=8"), "recexch_doubling": ("k=4",),
                  "recexch_halving": ("k=4",)},
    "alltoall": {"k_brucks": ("k=4",)},
    "barrier": {"k_dissemination": ("k=4", "k=8"), "recexch": ("k=4",)},
}


def _coll_prefix(func: str) -> str:
    """MPIR_CVAR_<COLL>_ of a leaf function (MPIR_Bcast_intra_tree -> MPIR_CVAR_BCAST_)."""
    return "MPIR_CVAR_" + func.split("_")[1].upper() + "_"


def leaf_defaults(func: str) -> dict:
    """{parameter: default} a leaf of func must name (empty: it takes none)."""
    if func in _OTHER_LEAVES:
        return dict(_OTHER_LEAVES[func])
    return {p: d for p, (_, d) in _BY_FUNC.get(func, {}).items()}


def param_cvars(func: str) -> dict[str, str]:
    """{parameter: the control variable that sets it for a forced run}."""
    return {p: _coll_prefix(func) + cvar for p, (cvar, _) in _BY_FUNC.get(func, {}).items()}


def tree_type_name(value) -> str:
    """A tree type as MPICH 4.3+ files and the control variables spell it."""
    text = str(value)
    if text.isdigit() and int(text) < len(TREE_TYPES):
        return TREE_TYPES[int(text)]
    return text


def tunable(func: str) -> dict:
    """{parameter: spec} a label of func may set (Provider.parameters' form)."""
    return {p: {"default": (TREE_TYPES.index(d) if p == "tree_type" else d), **_SPECS[p]}
            for p, (_, d) in _BY_FUNC.get(func, {}).items() if p in _SPECS}


def invalid(func: str, params: dict) -> str | None:
    """Why MPICH cannot run func with params (a radix of 1 is a chain for a kary tree,
    and aborts MPICH in a k-nomial one or an exchange), or None."""
    merged = {**leaf_defaults(func), **params}
    if "k" in merged and int(merged["k"]) < 2 and \
            tree_type_name(merged.get("tree_type", "")) != "kary":
        return f"k={merged['k']}: only a kary tree takes a radix below 2 (a chain); MPICH aborts"
    return None


def forcing_env(func: str, params: dict) -> dict[str, str]:
    """The control variables that give a forced run of func these parameters."""
    cvars = param_cvars(func)
    return {cvars[p]: (tree_type_name(v) if p == "tree_type" else str(v))
            for p, v in params.items() if p in cvars}
