"""Read the rules files back, as the libraries do, to know what each one says
for a (collective, communicator size, message size) point. Errors name the
file and line (or JSON path); the libraries themselves say nothing."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import InputError
from ..exporters.mpich_json import AVG_KEY, FUNC
from ..exporters.openmpi_tuned import COLL_ID, TOTAL_SIZE_KEY

COLL_OF_ID = {i: c for c, i in COLL_ID.items()}


def _tokens(text: str) -> list[tuple[str, int]]:
    """(token, line) with # comments removed."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        out += [(tok, n) for tok in line.split("#", 1)[0].split()]
    return out


@dataclass
class TunedRules:
    version: int
    # collective -> [(comm size, [(msg size, alg, fan-in/out, segsize, maxreq)])]
    blocks: dict[str, list[tuple[int, list[tuple[int, ...]]]]]

    def lookup_block(self, coll: str, comm_size: int) -> list[tuple[int, ...]]:
        """The message-size rules coll/tuned uses for comm_size: the last block
        whose size is <= comm_size, else the first (checked on 5.0.11)."""
        blocks = self.blocks[coll]
        block = blocks[0][1]
        for size, rows in blocks:
            if size <= comm_size:
                block = rows
        return block

    def lookup(self, coll: str, comm_size: int, bytes_per_rank: int) -> tuple[int, ...] | None:
        """The rule coll/tuned applies, or None when the file has none for coll."""
        if not self.blocks.get(coll):
            return None
        block = self.lookup_block(coll, comm_size)
        key = bytes_per_rank * (comm_size if coll in TOTAL_SIZE_KEY else 1)
        chosen = block[0]
        for row in block:
            if row[0] <= key:
                chosen = row
        return chosen


class RulesSyntaxError(InputError):
    """The file's numbers do not line up with the format (a count, a column or a
    line missing or extra): what it means cannot be told, so nothing is run."""


_RULE_COLUMNS = ("message size", "algorithm", "fan-in/out", "segment size", "max requests")


def parse_tuned(text: str, path: str, strict: bool = True) -> TunedRules:
    """Parse a coll/tuned classic / version-2 rules file, with the checks Open
    MPI makes (first message size 0) plus ascending order; strict=False skips
    those checks (to know what a malformed file meant).

    Open MPI reads the file as one stream of numbers, so a missing or extra
    number shifts everything after it. Files are written one rule per line: the
    first rule that is not a whole line of its own (a column missing or extra, a
    rule line missing) is remembered, and any later error — numbers left over
    after what the counts announce included — is reported at that line
    (RulesSyntaxError)."""
    version = 1
    if text.lstrip().startswith("rule-file-version-"):
        m = re.match(r"\s*rule-file-version-(\d+)", text)
        version = int(m.group(1)) if m else 1
        skipped = text[:len(text) - len(text.lstrip())].count("\n") + 1
        text = text.lstrip().split("\n", 1)[1] if "\n" in text.lstrip() else ""
        line0 = skipped
    else:
        line0 = 0
    toks = _tokens(text)
    per_line: dict[int, int] = {}
    for _, line in toks:
        per_line[line] = per_line.get(line, 0) + 1
    ncols = 5 if version > 1 else 4
    cols = ", ".join(_RULE_COLUMNS[:ncols])
    pos = 0
    suspect: list[str] = []        # where the numbers first stop lining up with the lines

    def fail(msg: str, structural: bool = False):
        if suspect:
            raise RulesSyntaxError(f"{suspect[0]}; Open MPI reads the file as one stream of "
                                   f"numbers, so everything after it is misread (then: {msg})")
        raise (RulesSyntaxError if structural else InputError)(msg)

    def nxt(what: str) -> int:
        nonlocal pos
        if pos >= len(toks):
            fail(f"{path}: ended while reading {what}", structural=True)
        tok, line = toks[pos]
        pos += 1
        if not re.fullmatch(r"\d+", tok):
            fail(f"{path}:{line + line0}: {what}: expected a non-negative integer, got {tok!r}",
                 structural=True)
        return int(tok)

    def line_of(i: int) -> int:
        """The line of token i (the file's numbering)."""
        return toks[min(i, len(toks) - 1)][1] + line0 if toks else 0

    def check_rule_line(start: int, coll: str, csize: int, i: int, n: int) -> None:
        """The rule about to be read from toks[start:] should be one whole line."""
        if suspect or start >= len(toks):
            return
        line = toks[start][1]
        whole = (start == 0 or toks[start - 1][1] != line) and per_line[line] == ncols
        if not whole:
            suspect.append(f"{path}:{line + line0}: {coll} comm size {csize}, rule {i + 1} of "
                           f"{n}: its line has {per_line[line]} number(s), a "
                           f"{'rule-file-version-2' if version > 1 else 'classic'} rule has "
                           f"{ncols} ({cols})")

    blocks: dict[str, list] = {}
    for _ in range(nxt("number of collectives")):
        cid = nxt("collective id")
        coll = COLL_OF_ID.get(cid, f"collective id {cid}")     # one colltune does not write
        comm_blocks = []
        for _ in range(nxt(f"{coll}: number of communicator sizes")):
            csize = nxt(f"{coll}: communicator size")
            if strict and comm_blocks and csize <= comm_blocks[-1][0]:
                fail(f"{path}:{line_of(pos - 1)}: {coll}: communicator sizes must ascend "
                     f"({comm_blocks[-1][0]} then {csize})")
            rows = []
            n = nxt(f"{coll} comm size {csize}: number of message sizes")
            for i in range(n):
                start = pos
                check_rule_line(start, coll, csize, i, n)
                row = [nxt(f"{coll} comm {csize}, rule {i + 1} of {n}: message size"), nxt("algorithm"),
                       nxt("fan-in/out"), nxt("segment size")]
                if version > 1:
                    row.append(nxt("max requests"))
                if strict and i == 0 and row[0] != 0:
                    fail(f"{path}:{line_of(start)}: {coll} comm {csize}: the first rule must "
                         f"be for message size 0, got {row[0]} (Open MPI drops the file)")
                if strict and rows and row[0] <= rows[-1][0]:
                    fail(f"{path}:{line_of(start)}: {coll} comm {csize}: message sizes must "
                         f"ascend ({rows[-1][0]} then {row[0]})")
                rows.append(tuple(row))
            comm_blocks.append((csize, rows))
        blocks[coll] = comm_blocks
    if suspect and pos < len(toks):
        # not one rule per line, and numbers left over after what the counts announce
        # (Open MPI reads no further): the numbers did not line up
        fail(f"{path}:{toks[pos][1] + line0}: {len(toks) - pos} number(s) after the last "
             f"rule the counts announce")
    return TunedRules(version, blocks)


def parse_han(text: str, path: str) -> list[tuple[str, int, int, int, str]]:
    """[(collective, level, configuration size, message size, component)] of a
    coll/han rules file, in file order (what HAN's dump lists)."""
    toks = _tokens(text)
    pos = 0

    def nxt(what: str, integer: bool = True):
        nonlocal pos
        if pos >= len(toks):
            raise InputError(f"{path}: ended while reading {what}")
        tok, line = toks[pos]
        pos += 1
        if integer and not re.fullmatch(r"\d+", tok):
            raise InputError(f"{path}:{line}: {what}: expected an integer, got {tok!r}")
        return int(tok) if integer else tok

    out = []
    for _ in range(nxt("number of collectives")):
        coll = nxt("collective name", integer=False)
        for _ in range(nxt(f"{coll}: number of topology levels")):
            level = nxt(f"{coll}: topology level")
            for k in range(nxt(f"{coll} level {level}: number of configurations")):
                conf = nxt(f"{coll} level {level}: configuration size")
                for m in range(nxt(f"{coll} level {level} conf {conf}: number of rules")):
                    size = nxt("message size")
                    out.append((coll, level, conf, size, nxt("component", integer=False)))
    return out


# -- MPICH CSEL -----------------------------------------------------------------
def load_csel(path: str) -> dict:
    try:
        with open(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (MPICH aborts in "
                         f"MPI_Init)") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None


def _matches(key: str, coll: str, comm_size: int, nbytes: int) -> bool | None:
    """Whether an operator key holds for an intra-communicator of comm_size
    ranks on distinct (fake) nodes, a built-in commutative op, not in place (the
    probe's elements: 4-byte floats for reductions, chars otherwise);
    None when the key depends on something else."""
    k = key.replace(" ", "")
    if k == "any" or k.endswith("=any"):
        return True
    avg = nbytes
    total = nbytes * comm_size
    count = nbytes // (4 if coll in ("reduce", "allreduce", "reduce_scatter_block") else 1)
    pof2 = 1 << (max(comm_size, 1).bit_length() - 1)       # MPL_pof2: largest 2^k <= size
    tests = [(r"count<=(\d+)", lambda v: count <= v), (r"count<pow2", lambda: count < pof2),
             (r"comm_type=intra", lambda: True), (r"comm_type=inter", lambda: False),
             (r"comm_size<=(\d+)", lambda v: comm_size <= v), (r"comm_size<(\d+)", lambda v: comm_size < v),
             (r"comm_size=pow2", lambda: comm_size & (comm_size - 1) == 0),
             (r"avg_msg_size<=(\d+)", lambda v: avg <= v), (r"avg_msg_size<(\d+)", lambda v: avg < v),
             (r"total_msg_size<=(\d+)", lambda v: total <= v),
             (r"total_msg_size<(\d+)", lambda v: total < v),
             (r"is_commutative=(yes|no)", lambda v: v == "yes"),
             (r"is_op_built_in=(yes|no)", lambda v: v == "yes"),
             (r"is_sendbuf_inplace=(yes|no)", lambda v: v == "no"),
             (r"is_block_regular=(yes|no)", lambda v: v == "yes"),
             (r"is_multi_threaded=(yes|no)", lambda v: v == "no"),
             (r"comm_hierarchy=(parent|node_roots|node|flat)", lambda v: v != "parent"),
             (r"comm_avg_ppn<=?(\d+)", lambda v: False)]
    for pattern, test in tests:
        m = re.fullmatch(pattern, k)
        if m:
            args = [int(a) if a.isdigit() else a for a in m.groups()]
            return test(*args)
    return None


def comm_branch(tree: dict, coll: str, comm_size: int) -> dict:
    """The part of coll's tree that comm_size ranks reach before any message-size
    key (what their sizes are chosen by); {} if none."""
    node = tree.get(f"collective={coll}", {})
    while isinstance(node, dict) and node:
        key = next(iter(node))
        if "msg_size" in key or key.startswith("algorithm=") or key.startswith("count"):
            return node
        for key, sub in node.items():
            if _matches(key, coll, comm_size, 0):
                node = sub
                break
        else:
            return {}
    return {}


def csel_leaf(tree: dict, coll: str, comm_size: int, nbytes: int) -> tuple[str, dict] | str:
    """(leaf function, params) MPICH selects, or a string saying why it cannot be told."""
    node = tree.get(f"collective={coll}")
    if node is None:
        return f"no collective={coll} branch (MPICH aborts when it needs one)"
    path = f"collective={coll}"
    while True:
        for key, sub in node.items():
            if key.startswith("algorithm="):
                params = {p.split("=", 1)[0]: p.split("=", 1)[1] for p in sub if "=" in p
                          and not p.startswith("colltune:")}
                return key[len("algorithm="):], params
            ok = _matches(key, coll, comm_size, nbytes)
            if ok is None:
                return f"{path}/{key}: cannot evaluate this key here"
            if ok:
                node, path = sub, f"{path}/{key}"
                break
        else:
            return f"{path}: no branch matches"


def cvar_name(coll: str, func: str) -> str | None:
    """MPIR_CVAR_<COLL>_INTRA_ALGORITHM value of a leaf function (the inverse
    of exporters.mpich_json.func_name)."""
    for prefix in (f"MPIR_{FUNC[coll]}_intra_", f"MPIR_{FUNC[coll]}_allcomm_"):
        if func.startswith(prefix):
            return func[len(prefix):]
    return None


__all__ = ["TunedRules", "RulesSyntaxError", "parse_tuned", "parse_han", "load_csel", "comm_branch", "csel_leaf", "cvar_name",
           "AVG_KEY"]
