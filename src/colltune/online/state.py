"""``STATE_DIR/state.txt``: read and write (format: docs/online.md, identical to the
C reader native/intercept/online*.c). Errors name ``file:line: what (value)``.

    colltune-online-state 1
    fingerprint 3f2a9c0d1e5b7788
    run-count 7
    block allreduce nodes=16 ppn=4 bytes=0..16 calls=1234 source=measured
    arm library p=0.05 n=40 mean=1.25e-05 m2=3.1e-12
"""
from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field

from ..errors import InputError
from ..inputs import read_text

HEADER, VERSION = "colltune-online-state", 1
# size classes of bytes per rank: upper edges (inclusive); class 5 is "more"
EDGES = (16, 256, 4096, 65536, 1048576)
SOURCES = ("measured", "prior")


class StateError(InputError):
    """A bad state file: ``FILE:LINE: what``."""


def class_range(cls: int) -> tuple[int, int | None]:
    """(lo, hi or None) bytes of size class cls."""
    lo = 0 if cls == 0 else EDGES[cls - 1] + 1
    return lo, (EDGES[cls] if cls < len(EDGES) else None)


def class_of(nbytes: int) -> int:
    return next((i for i, e in enumerate(EDGES) if nbytes <= e), len(EDGES))


def class_text(cls: int) -> str:
    lo, hi = class_range(cls)
    return f"{lo}.." + ("" if hi is None else str(hi))


def class_from_range(lo: int, hi: int | None) -> int | None:
    return next((c for c in range(len(EDGES) + 1) if class_range(c) == (lo, hi)), None)


@dataclass
class Arm:
    arm: str
    p: float
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0


@dataclass
class Block:
    collective: str
    nodes: int
    ppn: int
    cls: int
    calls: int = 0
    source: str = "measured"
    arms: list[Arm] = field(default_factory=list)
    runs: int = 0                 # runs that timed this block: the update rule's t
    setups: int = 0               # sampled calls that built per-communicator state
    setup_s: float = 0.0          # what they cost beyond what their arms learnt

    @property
    def key(self) -> tuple[str, int, int, int]:
        return (self.collective, self.nodes, self.ppn, self.cls)

    def arm(self, name: str) -> Arm | None:
        return next((a for a in self.arms if a.arm == name), None)

    def best(self) -> Arm:
        """The arm the next job runs in this measured block (C's ct_online_choice): once
        its budget is spent, and in every call that does not explore (ct_online_conservative
        leans on it, also where every call is a draw: a block called fewer times per run
        than the budget). The
        lowest mean among arms measured at least MIN_N times and the library's arm once
        timed (the update rule lets a slow library fade before MIN_N), but the library
        while its arm (when the block lists one) was never timed (the default is left only
        on a measured comparison with it); nothing measured MIN_N times: the library, as C
        runs it after a spent budget, or without a library arm the most probable one."""
        from .update import MIN_N
        measured = [a for a in self.arms if a.n >= MIN_N]
        lib = self.arm("library")
        if lib is not None and (not measured or lib.n < 1):
            return lib
        if measured:
            if lib is not None and lib not in measured:
                measured.append(lib)
            return min(measured, key=lambda a: (a.mean, a.arm))
        return max(self.arms, key=lambda a: (a.p, -self.arms.index(a)))

    def why(self) -> str:
        """Why best() chose its arm, in words (online show)."""
        from .update import MIN_N
        best, lib = self.best(), self.arm("library")
        measured = [a for a in self.arms if a.n >= MIN_N]
        if lib is not None and best is lib and not measured:
            return f"the library: no arm timed {MIN_N} times yet"
        if lib is not None and best is lib and lib.n < 1:
            return "the library: its own arm not timed yet (it is left only on a measured comparison)"
        if not measured:
            return f"draws from p, this arm the most probable: none timed {MIN_N} times, no library arm"
        why = f"the lowest mean of the arms timed at least {MIN_N} times"
        fewer = [a for a in self.arms if 0 < a.n < MIN_N and a.mean < best.mean]
        if fewer:
            why += "; not yet " + ", ".join(f"{a.arm} (lower mean, n={a.n} < {MIN_N})" for a in fewer)
        return why

    def label(self) -> str:
        return f"{self.collective} nodes={self.nodes} ppn={self.ppn} bytes={class_text(self.cls)}"


@dataclass
class State:
    fingerprint: str = ""
    run_count: int = 0
    blocks: dict = field(default_factory=dict)     # Block.key -> Block, in file order

    def add(self, block: Block) -> Block:
        self.blocks[block.key] = block
        return block


def _kv(where: str, words: list[str], keys: dict) -> dict:
    """key=value words -> {key: converted}; every key of `keys` required, no other."""
    out = {}
    for w in words:
        k, eq, v = w.partition("=")
        if not eq or k not in keys:
            raise StateError(f"{where}: unknown field {w!r} (expected {', '.join(f'{k}=' for k in keys)})")
        if k in out:
            raise StateError(f"{where}: {k} given twice")
        try:
            out[k] = keys[k](v)
        except ValueError:
            raise StateError(f"{where}: {k}: bad value {v!r}") from None
    missing = [k for k in keys if k not in out and k not in OPTIONAL]
    if missing:
        raise StateError(f"{where}: missing {', '.join(missing)}")
    return out


# an arm with n=0 may leave its statistics out; a state written before the update
# rule counted runs has no runs= (read as 0); a block without setup calls, no setups=
OPTIONAL = {"mean", "m2", "runs", "setups", "setup_s"}


def _count(v: str) -> int:
    n = int(v)
    if n < 0:
        raise ValueError(v)
    return n


def _real(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise ValueError(v)
    return x


def _bytes(v: str) -> int:
    lo, sep, hi = v.partition("..")
    cls = class_from_range(int(lo), int(hi) if hi else None) if sep else None
    if cls is None:
        raise ValueError(v)
    return cls


def parse(text: str, path: str = "<state>") -> State:
    state, block, header = State(), None, False
    for no, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{no}"
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        head, rest = words[0], words[1:]
        if not header:
            if words != [HEADER, str(VERSION)]:
                raise StateError(f"{where}: expected '{HEADER} {VERSION}', got {raw.strip()!r}")
            header = True
        elif head == "fingerprint" and len(rest) == 1:
            state.fingerprint = "" if rest[0] == "-" else rest[0]
        elif head == "run-count" and len(rest) == 1:
            try:
                state.run_count = _count(rest[0])
            except ValueError:
                raise StateError(f"{where}: run-count: bad value {rest[0]!r}") from None
        elif head == "block" and rest:
            f = _kv(where, rest[1:], {"nodes": _count, "ppn": _count, "bytes": _bytes,
                                      "calls": _count, "runs": _count, "source": str,
                                      "setups": _count, "setup_s": _real})
            if f["source"] not in SOURCES:
                raise StateError(f"{where}: source: bad value {f['source']!r} "
                                 f"(one of {', '.join(SOURCES)})")
            block = Block(rest[0], f["nodes"], f["ppn"], f["bytes"], f["calls"], f["source"],
                          runs=f.get("runs", 0), setups=f.get("setups", 0),
                          setup_s=f.get("setup_s", 0.0))
            if block.key in state.blocks:
                raise StateError(f"{where}: block {block.label()} given twice")
            state.add(block)
        elif head == "arm" and rest:
            if block is None:
                raise StateError(f"{where}: arm {rest[0]!r} before any block")
            f = _kv(where, rest[1:], {"p": _real, "n": _count, "mean": _real, "m2": _real})
            if block.arm(rest[0]):
                raise StateError(f"{where}: arm {rest[0]!r} given twice in {block.label()}")
            block.arms.append(Arm(rest[0], f["p"], f["n"], f.get("mean", 0.0), f.get("m2", 0.0)))
        else:
            raise StateError(f"{where}: unknown line {raw.strip()!r}")
    if not header:
        raise StateError(f"{path}:1: empty state file (expected '{HEADER} {VERSION}')")
    for b in state.blocks.values():
        if not sum(a.p for a in b.arms) > 0:
            raise StateError(f"{path}:{no}: block {b.label()} has no arm with p > 0")
    return state


def load(path: str) -> State:
    return parse(read_text(path, StateError), path)


def _num(x: float) -> str:
    return f"{x:.9g}"            # as C writes it (update.py rounds to this between runs)


def format_state(state: State) -> str:
    out = [f"{HEADER} {VERSION}", f"fingerprint {state.fingerprint or '-'}",
           f"run-count {state.run_count}"]
    for b in state.blocks.values():
        out.append(f"block {b.collective} nodes={b.nodes} ppn={b.ppn} bytes={class_text(b.cls)} "
                   f"calls={b.calls} runs={b.runs} source={b.source}"
                   + (f" setups={b.setups} setup_s={_num(b.setup_s)}" if b.setups else ""))
        for a in b.arms:
            stats = f" mean={_num(a.mean)} m2={_num(a.m2)}" if a.n else ""
            out.append(f"arm {a.arm} p={_num(a.p)} n={a.n}{stats}")
    return "\n".join(out) + "\n"


def _umask() -> int:
    mask = os.umask(0)          # read once, at import: setting it is process-wide
    os.umask(mask)
    return mask


_UMASK = _umask()


def save(state: State, path: str) -> str:
    """Atomically (temp file in the same folder + rename)."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=d)
    try:
        with os.fdopen(fd, "w") as fh:
            # as a plain open() would (0666 less the umask), not mkstemp's 0600: jobs of
            # other users sharing the state folder read it (the native writer's fopen does
            # the same); 0600 had made their runs draw from the default arms, silently
            os.fchmod(fh.fileno(), 0o666 & ~_UMASK)
            fh.write(format_state(state))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
