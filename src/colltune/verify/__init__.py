"""`colltune verify`: prove on the real library that a rules file is read and
honoured (docs/exporters.md).

Three checks, each from the library's own evidence:
1. accepted: the library read the file (Open MPI coll/tuned: the file's
   algorithm runs where the library default runs another one — a malformed
   file is dropped silently; coll/han: its own rules dump; MPICH: its
   debug summary names the file, and it aborts on files it cannot use);
2. honoured: at sample points the algorithm that ran is the file's: the
   observation of the run with the file equals that of a run with the file's
   algorithm forced explicitly (Open MPI: which of libmpi's algorithm functions
   ran; MPICH: per-peer message counts and bytes handed to UCX);
3. ratio: library default time / time with the file, measured in the same
   verify run (launches back to back; on a busy 2-core machine only indicative).
A library module registers a Verifier per library name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..registry import Registry

VERIFIERS: Registry[type] = Registry("verify library")


@dataclass(frozen=True)
class Point:
    collective: str
    nbytes: int                 # bytes per rank
    expected: str               # the file's algorithm (library name)
    force: tuple = ()           # how to force it: hashable, library-specific
    detail: str = ""            # the file's parameters of it, as said in the report


@dataclass
class PointResult:
    point: Point
    honoured: bool
    distinguishes: bool         # forcing the file's algorithm looks different from the default
    ran: str                    # what the file run looked like
    ratio: float | None = None  # default time / time with the file
    default: bool = False       # the file's rule is the library's own selection (the
                                # table's default decision: coll/tuned algorithm 0, or
                                # MPICH's built-in branch); it need not differ from it


@dataclass
class Report:
    library: str
    fmt: str
    path: str
    ranks: int
    accepted: bool
    evidence: str
    results: list[PointResult] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    static: object | None = None    # static_check.StaticResult: every block, run or not

    @property
    def ok(self) -> bool:
        return (self.accepted and all(r.honoured for r in self.results)
                and not (self.static is not None and self.static.problems))

    def render(self) -> str:
        out = [f"verify {self.path} ({self.fmt}) on {self.library}, {self.ranks} ranks",
               f"(1) file accepted: {'yes' if self.accepted else 'NO'} - {self.evidence}"]
        if self.results:
            bad = [r for r in self.results if not r.honoured]
            out.append(f"(2) file honoured at {len(self.results) - len(bad)}/{len(self.results)} "
                       f"sample points")
            for r in self.results:
                p = r.point
                mark = ("ok  " if r.distinguishes or r.default else "ok* ") if r.honoured \
                    else "FAIL"
                ratio = f"  default/file time {r.ratio:.3g}" if r.ratio else ""
                says = p.expected if not r.default or p.expected == "default" else \
                    f"{p.expected} (default)"
                says += f" {p.detail}" if p.detail else ""
                out.append(f"  {mark} {p.collective:<21} {p.nbytes:>9} B/rank  file says "
                           f"{says:<28} ran: {r.ran}{ratio}")
        if any(r.default for r in self.results):
            out.append("  (default): the library's own selection, as the table's default "
                       "decision (coll/tuned: algorithm 0, its fixed decision; MPICH: its "
                       "built-in branch)")
        if any(r.honoured and not r.distinguishes and not r.default for r in self.results):
            out.append("  * the file's algorithm and the library default look alike at this "
                       "point: it agrees with the file but does not prove it")
        for u in self.unchecked:
            out.append(f"(2) not checked: {u}")
        partial, static = "", []
        if self.static is not None:
            static, unchecked = self.static.lines(self.ranks)
            if unchecked:
                partial = (f"partial: {unchecked} block(s) neither run nor checked against a "
                           f"table; pass --table")
        if self.results and not any(r.distinguishes or r.default for r in self.results):
            partial = "; ".join(filter(None, [partial, (
                f"consistent, not proven: at no point did the file's algorithm look different "
                f"from the library default on {self.ranks} ranks; try more --ranks")]))
        out += report_tail("default/file", [r.ratio for r in self.results], self.notes, self.ok,
                           partial, static)
        return "\n".join(out)


def report_tail(what: str, ratios: list, notes: list[str], ok: bool,
                partial: str = "", extra: list[str] = ()) -> list[str]:
    """The last lines of a verify report: (3) the median time ratio, extra lines
    (the static check, (4)), notes, RESULT (a PASS names what it did not cover: partial)."""
    times = sorted(r for r in ratios if r)
    out = []
    if times:
        out.append(f"(3) {what} time ratio: median {times[len(times) // 2]:.3g} over "
                   f"{len(times)} points (same verify run, launches back to back; on an "
                   f"oversubscribed or busy host this is noise)")
    out += list(extra)
    out += [f"note: {n}" for n in notes]
    out.append("RESULT: " + (("PASS" + (f" ({partial})" if partial else "")) if ok else "FAIL"))
    return out


def compare(points: list[Point], default, with_file, forced: dict) -> list[PointResult]:
    """Per point: did the file run look like the forced run of its algorithm?
    ``forced`` maps Point.force to the Observed of that forced launch; each
    Observed indexes points by their position in ``points``.

    The algorithm compared is the outermost call of the point's own collective
    (Observed.signature with the collective): the collectives an algorithm calls
    inside (coll/tuned's nonoverlapping allreduce = reduce + bcast) follow the
    file's own rules for those collectives in the run with the file, and the
    library's fixed decision in the forced run, so they may differ there."""
    results = []
    for i, p in enumerate(points):
        ref = forced[p.force]
        want = ref.signature(i, p.collective)
        got, dflt = with_file.signature(i, p.collective), default.signature(i, p.collective)
        honoured = ref.ok and got == want and bool(got)
        if not ref.ok:
            # the last line that says something: Open MPI frames its messages in rules of dashes
            last = [ln for ln in ref.output.splitlines() if any(c.isalnum() for c in ln)][-1:] \
                or ["no output"]
            ran = f"cannot tell: forcing {p.expected} alone failed ({last[0].strip()[:160]})"
        elif honoured:
            ran = f"{p.expected} (same as forced)"
            inside_file, inside_forced = with_file.signature(i), ref.signature(i)
            if inside_file != inside_forced:
                ran += (f"; the calls inside it follow the file's rules for their collectives "
                        f"(with the file: {_short(inside_file, 1)}; forced: "
                        f"{_short(inside_forced, 1)})")
        elif got == dflt:
            ran = "the library default (not the file's algorithm)"
        else:
            ran = "something else: " + _short(with_file.signature(i))
        ratio = None
        if i in default.times and with_file.times.get(i):
            ratio = default.times[i] / with_file.times[i]
        results.append(PointResult(p, honoured, want != dflt, ran, ratio))
    return results


def acceptance_from_points(results: list[PointResult]) -> tuple[bool, str]:
    """Accepted when some point ran the file's algorithm where the default differs.
    Points where the file names the library's own selection prove nothing here:
    coll/tuned runs its fixed decision there with the file dropped too."""
    results = [r for r in results if not r.default]
    proof = [r for r in results if r.honoured and r.distinguishes]
    if proof:
        p = proof[0].point
        return True, (f"{len(proof)} point(s) ran the file's algorithm where the library default "
                      f"runs another, e.g. {p.collective} {p.nbytes} B/rank -> {p.expected}")
    telling = [r for r in results if r.distinguishes]
    if telling and all(r.ran.startswith("the library default") for r in telling):
        return False, ("the library ran its default everywhere the file differs from it: the file "
                       "was dropped (Open MPI drops a malformed file without a word)")
    if not telling:
        return False, ("cannot tell: at every sample point the file's algorithm looks like the "
                       "library default (choose other --ranks)")
    return False, "the file's algorithms did not run where they differ from the default"


def default_note(results: list[PointResult], settings: str) -> list[str]:
    """A note when, at points where the file names the library's own selection,
    the untouched library (no file, no settings) runs something else."""
    differ = [r.point for r in results if r.default and r.distinguishes]
    if not differ:
        return []
    where = ", ".join(f"{p.collective} {p.nbytes} B/rank" for p in differ[:3])
    return [f"at {len(differ)} point(s) where the file names the library's default decision "
            f"({where}{', ...' if len(differ) > 3 else ''}), the untouched library runs "
            f"something else: the settings the file needs ({settings}) change what the "
            f"library's own selection is there"]


def _short(sig: tuple, ranks: int = 2) -> str:
    if not sig:
        return "nothing observed"
    parts = []
    for rank, fns, peers in sig[:ranks]:
        what = ",".join(f.replace("ompi_coll_base_", "") for f in fns) or \
            " ".join(f"{n}msg/{b}B" for n, b in peers)
        parts.append(f"rank {rank}: {what}")
    return "; ".join(parts)


from ..registry import import_plugins  # noqa: E402

import_plugins(__name__, __path__, skip=("probe", "rules", "table_check", "deployment"))  # each registers itself

__all__ = ["VERIFIERS", "Point", "PointResult", "Report", "compare", "acceptance_from_points",
           "default_note"]
