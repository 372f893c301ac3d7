"""A run's traffic profile in memory: the per-rank files libcolltune writes at MPI_Finalize,
merged with SMPI's message trace (simtrace), Open MPI's monitoring counts and modelled MPICH
counts (model). docs/profile-files.md describes the files, the merge and the labels.

    prof = load_profile(out_dir)
    B, M = prof.matrix(region="run", kind="bcast")          # ranks x ranks bytes, messages
    prof.visibility("run", "bcast")                          # 'exact' | 'simulator' | ...

Regions are inclusive: a region's traffic includes that of the regions opened inside it, and
"run" holds everything (the files count a send in its innermost region only).
"""
from __future__ import annotations

import glob
import json
import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from . import simtrace

RANK_SCHEMA = "colltune-profile-rank/1"
JOB_SCHEMA = "colltune-profile-job/1"
KINDS = ("p2p", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter",
         "barrier", "scan", "exscan", "reduce_scatter", "reduce_scatter_block", "allgatherv",
         "alltoallv", "gatherv", "scatterv", "other")
SOURCES = ("interposer", "colltune", "monitoring", "simulator", "modelled")
LABEL = {"interposer": "exact", "colltune": "exact", "monitoring": "monitoring",
         "simulator": "simulator", "modelled": "modelled"}
# From best to worst; a cell made of several parts gets the worst part's label.
VISIBILITY = ("exact", "simulator", "monitoring", "modelled", "not visible")


# notes of traffic left out on purpose (colltune's own, paused counting): not missing;
# the report shows them apart from what is missing
LEFT_OUT = "left out on purpose: "


class ProfileError(ValueError):
    """A profile directory or file that cannot be read; the message names file and field."""


@dataclass
class Cell:
    """Sparse traffic of one (region, kind, source): sender, receiver, bytes, messages."""
    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    messages: np.ndarray

    @classmethod
    def from_dict(cls, acc: dict) -> "Cell":
        if not acc:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z.copy(), z.copy(), z.copy())
        keys = np.array(list(acc.keys()), dtype=np.int64).reshape(-1, 2)
        vals = np.array(list(acc.values()), dtype=np.int64).reshape(-1, 2)
        return cls(keys[:, 0], keys[:, 1], vals[:, 0], vals[:, 1])

    def as_dict(self) -> dict[tuple[int, int], tuple[int, int]]:
        """{(sender, receiver): (bytes, messages)}."""
        return {(int(s), int(d)): (int(b), int(m))
                for s, d, b, m in zip(self.src, self.dst, self.bytes, self.messages)}

    @property
    def total(self) -> tuple[int, int]:
        return int(self.bytes.sum()), int(self.messages.sum())


@dataclass
class TrafficProfile:
    size: int
    hosts: list[str]
    missing: list[int]
    meta: dict
    notes: list[str]
    cells: dict[tuple[str, str, str], Cell]                 # (region, kind, source) -> Cell
    # (region, kind) -> (library calls, label of what covers them: a source's label or
    # 'not visible'); only kinds the library ran itself
    library: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    shadowed: frozenset = frozenset()                        # (kind, source) left out of merges
    region_order: list[str] = field(default_factory=lambda: ["run"])
    # world rank -> (its run interval or None, its colltune_own intervals): which traced
    # messages were libcolltune's own (colltune_own)
    windows: dict = field(default_factory=dict)
    # (region, kind, communicator size) -> rank-calls of the collectives the library ran
    comm_calls: dict = field(default_factory=dict)

    def colltune_own(self, sender: int, t: float) -> bool:
        """Was a message the sender sent at simulated time t libcolltune's own (outside
        its run, or in one of its colltune_own intervals)? Such messages are left out."""
        run, own = self.windows.get(sender, (None, ()))
        return _is_own(run, own, t)

    # ---- queries ----------------------------------------------------------------------
    def regions(self) -> list[str]:
        seen = {r for r, _, _ in self.cells} | {r for r, _ in self.library}
        return [r for r in self.region_order if r in seen or r == "run"]

    def kinds(self, region: str | None = None) -> list[str]:
        seen = {k for r, k, _ in self.cells if region in (None, r)}
        seen |= {k for r, k in self.library if region in (None, r)}
        return [k for k in KINDS if k in seen]

    def sources(self, region: str | None = None, kind: str | None = None) -> list[str]:
        seen = {s for r, k, s in self.cells if region in (None, r) and kind in (None, k)
                and (k, s) not in self.shadowed}       # left out of merged views: not a source
        return [s for s in SOURCES if s in seen]

    def _selected(self, region: str, kind: str | None, source: str | None):
        if region not in self.region_order:
            raise ProfileError(f"no region '{region}' in the profile (regions: {self.region_order})")
        if kind is not None and kind not in KINDS:
            raise ProfileError(f"no kind '{kind}' (kinds: {', '.join(KINDS)}; in this profile: "
                               f"{', '.join(self.kinds(region)) or 'none'})")
        for (r, k, s), cell in self.cells.items():
            if r != region or kind not in (None, k):
                continue
            if source is None and (k, s) in self.shadowed:
                continue
            if source in (None, s):
                yield cell

    def pairs(self, region: str = "run", kind: str | None = None, source: str | None = None) -> Cell:
        """Sparse form of matrix(): one entry per (sender, receiver) with traffic."""
        parts = list(self._selected(region, kind, source))
        if not parts:
            return Cell.from_dict({})
        src = np.concatenate([c.src for c in parts])
        dst = np.concatenate([c.dst for c in parts])
        key = src * max(self.size, 1) + dst
        uniq, inv = np.unique(key, return_inverse=True)
        b = np.zeros(len(uniq), dtype=np.int64)
        m = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(b, inv, np.concatenate([c.bytes for c in parts]))
        np.add.at(m, inv, np.concatenate([c.messages for c in parts]))
        return Cell(uniq // max(self.size, 1), uniq % max(self.size, 1), b, m)

    def matrix(self, region: str = "run", kind: str | None = None, source: str | None = None):
        """(bytes, messages): size x size int64 arrays, row = sender, column = receiver.
        kind / source None: every kind / the merge of the sources (docs/profile-files.md)."""
        c = self.pairs(region, kind, source)
        B = np.zeros((self.size, self.size), dtype=np.int64)
        M = np.zeros((self.size, self.size), dtype=np.int64)
        B[c.src, c.dst] = c.bytes
        M[c.src, c.dst] = c.messages
        return B, M

    def host_matrix(self, region: str = "run", kind: str | None = None, source: str | None = None):
        """(bytes, messages, hosts) node x node, hosts in order of first appearance; ranks
        of unknown host (missing file) are left out (a note says so)."""
        order = [h for h in dict.fromkeys(self.hosts) if h]
        pos = {h: i for i, h in enumerate(order)}
        of = np.array([pos.get(h, -1) for h in self.hosts] or [0], dtype=np.int64)
        c = self.pairs(region, kind, source)
        keep = (of[c.src] >= 0) & (of[c.dst] >= 0) if len(c.src) else np.zeros(0, bool)
        B = np.zeros((len(order), len(order)), dtype=np.int64)
        M = np.zeros_like(B)
        np.add.at(B, (of[c.src[keep]], of[c.dst[keep]]), c.bytes[keep])
        np.add.at(M, (of[c.src[keep]], of[c.dst[keep]]), c.messages[keep])
        return B, M, order

    def visibility(self, region: str = "run", kind: str | None = None) -> str:
        """How the traffic of (region, kind) is known: the worst of its parts (VISIBILITY).
        A kind nothing sent and the library never ran is 'exact' (the interposer sees every
        call); kind None: the worst over the region's kinds."""
        if kind is None:
            labels = [self.visibility(region, k) for k in self.kinds(region)]
            return max(labels, key=VISIBILITY.index) if labels else "exact"
        labels = {LABEL[s] for (r, k, s), c in self.cells.items()
                  if r == region and k == kind and (k, s) not in self.shadowed and len(c.src)}
        lib = self.library.get((region, kind))
        if lib:
            labels.add(lib["label"])
        return max(labels, key=VISIBILITY.index) if labels else "exact"

    def select(self, region: str | None = None, kind: str | None = None) -> "TrafficProfile":
        """A new profile restricted to one region and / or kind."""
        cells = {key: c for key, c in self.cells.items()
                 if region in (None, key[0]) and kind in (None, key[1])}
        lib = {key: dict(v) for key, v in self.library.items()
               if region in (None, key[0]) and kind in (None, key[1])}
        order = [r for r in self.region_order if region in (None, r)]
        return TrafficProfile(self.size, list(self.hosts), list(self.missing), dict(self.meta),
                              list(self.notes), cells, lib, self.shadowed, order, dict(self.windows),
                              {k: v for k, v in self.comm_calls.items()
                               if region in (None, k[0]) and kind in (None, k[1])})


# ---- reading ---------------------------------------------------------------------------
def _load_json(path: str, schema: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        with open(path, "rb") as f:
            line = f.read()[:exc.start].count(b"\n") + 1
        raise ProfileError(f"{path}:{line}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at "
                           f"offset {exc.start})") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ProfileError(f"{path}: schema '{got}', expected '{schema}'")
    return doc


def _need(doc: dict, key: str, typ, path: str):
    v = doc.get(key)
    if not isinstance(v, typ):
        raise ProfileError(f"{path}: field '{key}' is {v!r}, expected {getattr(typ, '__name__', typ)}")
    return v


class _RankFile:
    """One rank-R.json: its region names, nesting and intervals (times rounded as the trace's)."""

    def __init__(self, path: str):
        doc = _load_json(path, RANK_SCHEMA)
        self.path, self.doc = path, doc
        self.rank = _need(doc, "rank", int, path)
        self.processor_name = str(doc.get("host", ""))
        # under Slurm its node name (SLURMD_NODENAME): what topology.conf, sinfo and the
        # job's node list call the node, where the host name may differ
        self.slurm_node = str(doc.get("slurm_node") or "")
        self.host = self.slurm_node or self.processor_name
        self.names = _need(doc, "regions", list, path)
        if not self.names or self.names[0] != "run":
            raise ProfileError(f"{path}: field 'regions' must start with \"run\", got {self.names[:1]}")
        ivs = []
        for k, iv in enumerate(_need(doc, "intervals", list, path)):
            if (not isinstance(iv, list) or len(iv) != 3 or not 0 <= iv[0] < len(self.names)
                    or not iv[1] <= iv[2]):
                raise ProfileError(f"{path}: intervals[{k}] = {iv!r}: expected [region index, t_enter, t_leave]")
            p = simtrace.TRACE_PRECISION
            ivs.append((int(iv[0]), round(float(iv[1]), p), round(float(iv[2]), p)))
        self.intervals = ivs
        # the whole run, MPI_Init's end to MPI_Finalize's start (the "run" region's interval)
        self.run = next(((a, b) for j, a, b in ivs if j == 0), None)
        self.pauses = [(round(float(a), 9), round(float(b), 9)) for a, b in doc.get("paused", [])]
        # colltune's own traffic inside the run: a communicator's set-up on its first use
        self.own = [(round(float(a), 9), round(float(b), 9)) for a, b in doc.get("colltune_own", [])]
        self.ancestors = self._ancestors()
        self._segments()

    def _ancestors(self) -> dict[int, list[int]]:
        """A region's parents, for summing, "run" always: from 'parents' (libcolltune writes
        each region's, exact even where intervals were dropped past the cap); in files
        without it, the regions that enclose every interval of the region."""
        parents = self.doc.get("parents")
        if isinstance(parents, list) and len(parents) == len(self.names) and \
                all(isinstance(p, int) and -1 <= p < len(self.names) for p in parents):
            chains: dict[int, list[int]] = {}
            for j in range(len(self.names)):
                seen, p = [], parents[j]
                while p >= 0 and p not in seen and p != j:
                    seen.append(p)
                    p = parents[p]
                chains[j] = sorted(set(seen) | {0})
            return chains
        out: dict[int, set[int]] = {}
        for j, a, b in self.intervals:
            enclosing = {i for i, c, d in self.intervals if i != j and c <= a and b <= d and (c, d) != (a, b)}
            out[j] = enclosing if j not in out else out[j] & enclosing
        return {j: sorted(s | {0}) for j, s in out.items()}

    def _segments(self) -> None:
        # Elementary time segments and the regions open in each: a send at t counts in every
        # interval with t_enter <= t < t_leave (at a shared boundary, in the one entered).
        cuts = sorted({t for _, a, b in self.intervals for t in (a, b)})
        self.cuts = cuts
        self.open: list[tuple[int, ...]] = []
        for k in range(len(cuts)):
            t = cuts[k]
            self.open.append(tuple(sorted({j for j, a, b in self.intervals if a <= t < b} | {0})))
        # the names open in each segment, each once (names_at, once per traced message)
        self.open_names = [self._names(o) for o in self.open]

    def regions_at(self, t: float) -> tuple[int, ...]:
        k = bisect_right(self.cuts, t) - 1
        return self.open[k] if k >= 0 else (0,)

    def paused(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.pauses)

    def up(self, region: int) -> list[int]:
        return sorted({region, 0, *self.ancestors.get(region, [])})

    # A name opened under two parents is two entries of 'regions' (libcolltune keys a
    # region by name and parent): counts go to each name once, X inside X included.
    def _names(self, regions) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.names[r] for r in regions))

    def names_up(self, region: int) -> tuple[str, ...]:
        return self._names(self.up(region))

    def names_at(self, t: float) -> tuple[str, ...]:
        k = bisect_right(self.cuts, t) - 1
        return self.open_names[k] if k >= 0 else ("run",)


def load_profile(out_dir: str | os.PathLike, *, trace: bool = True) -> TrafficProfile:
    """Read job.json, every rank-R.json and, when present, the simulator's trace
    (simgrid.trace), then model MPICH's library collectives where the algorithm is known.
    A rank whose file is missing is listed in prof.missing and the notes, never filled in."""
    from . import model
    out_dir = os.fspath(out_dir)
    job_path = os.path.join(out_dir, "job.json")
    rank_paths = sorted(glob.glob(os.path.join(out_dir, "rank-*.json")))
    tpath = simtrace.trace_path(out_dir)
    has_trace = trace and os.path.exists(tpath)
    if not os.path.exists(job_path) and not rank_paths and not has_trace:
        raise ProfileError(f"{out_dir}: no job.json, rank-*.json or {simtrace.TRACE_NAME}: not a profile directory")
    notes: list[str] = []
    job = _load_json(job_path, JOB_SCHEMA) if os.path.exists(job_path) else {}
    if not job:
        notes.append("job.json is missing (rank 0 did not finish): world size taken from the files present")
    files: dict[int, _RankFile] = {}
    for p in rank_paths:
        if not re.fullmatch(r"rank-\d+\.json", os.path.basename(p)):
            continue
        rf = _RankFile(p)
        if os.path.basename(p) != f"rank-{rf.rank}.json":
            raise ProfileError(f"{p}: field 'rank' is {rf.rank}, the file name says otherwise")
        files[rf.rank] = rf
    info = simtrace.TraceInfo(tpath)
    if job and not (isinstance(job.get("size"), int) and job["size"] > 0):
        raise ProfileError(f"{job_path}: field 'size' is {job.get('size')!r}, expected the job's "
                           f"rank count (an integer > 0)")
    size = int(job.get("size") or 0) or (max(files) + 1 if files else 0)
    for rf in files.values():
        if job and int(rf.doc.get("size", size)) != size:
            raise ProfileError(f"{rf.path}: field 'size' is {rf.doc.get('size')}, but {job_path} "
                               f"says {size}: a file of another run (profile each run into its "
                               f"own folder)")
    # which run wrote each file: one id, or none anywhere (a job started without colltune
    # run, PMIx or Slurm; files of an older build); ids mixed with files without one are
    # two runs as well
    by_job: dict[str, list[int]] = {}
    for rf in files.values():
        by_job.setdefault(rf.doc.get("job") or "", []).append(rf.rank)
    named = {j for j in by_job if j} | ({job["job"]} if job.get("job") else set())
    if len(named) > 1 or (named and "" in by_job):
        seen = "; ".join(f"{j or 'no run id'}: ranks {_ranges(sorted(r))}" for j, r in sorted(by_job.items()))
        raise ProfileError(f"{out_dir}: files of {len(named) + ('' in by_job)} runs ({seen}"
                           + (f"; job.json: {job.get('job')}" if job.get("job") else "")
                           + "): profile each run into its own folder")
    stray = sorted(r for r in files if r >= size)
    if stray:
        raise ProfileError(f"{files[stray[0]].path}: rank {stray[0]}, but {job_path} says the job "
                           f"had {size} ranks: a file of an earlier run (profile each run into "
                           f"its own folder)")

    acc = _Accumulator()
    names = ["run"]
    for rf in files.values():
        for n in rf.names:
            if n not in names:
                names.append(n)
        _add_rank_counts(rf, acc, size)
    if has_trace:
        own, fileless = [0, 0], {}
        paused = _add_trace(tpath, info, files, acc, own, fileless)
        if fileless and files:
            n, b = sum(v[0] for v in fileless.values()), sum(v[1] for v in fileless.values())
            notes.append(f"{n} traced messages ({b} B) were sent by rank(s) "
                         f"{_ranges(sorted(fileless))}, which left no file: they are counted in "
                         f"'run' only, colltune's own among them (their files hold the times "
                         f"that tell them apart), so 'run' may hold up to that much of "
                         f"colltune's traffic as the application's")
        if own[0]:
            notes.append(f"{LEFT_OUT}{own[0]} traced messages ({own[1]} B) were colltune's own (its "
                         f"agreements in MPI_Init and MPI_Finalize, a communicator's set-up on "
                         f"its first use) and are left out")
        if paused:
            notes.append(f"{LEFT_OUT}{paused} traced messages were sent while counting was paused "
                         "(MPI_Pcontrol(0)) and are left out")
        size = max(size, info.size)
        if not files and not job and not info.messages:
            raise ProfileError(f"{out_dir}: no rank wrote its profile and the simulator's trace "
                               f"holds no message: the run crashed or timed out before "
                               f"anything was recorded (see the run's output)")
        if info.cut_at:
            notes.append(f"{info.path}:{info.cut_at}: the simulator's trace ends in the middle "
                         f"of this line (cut off, or the simulation died writing it): read up "
                         f"to the line before")
        cut = info.unfinished()
        if cut:
            notes.append(f"the simulator's trace ends before {len(cut)} of {info.size} ranks "
                         f"finished ({_ranges(cut)}): it was cut, or the simulation died; what "
                         f"they sent after its end is missing")
    if not has_trace:       # (on SMPI the trace has their messages)
        notes += _uncounted_notes(files)
    hosts = [files[r].host if r in files else "" for r in range(size)]
    renamed = sorted({(f.processor_name, f.slurm_node) for f in files.values()
                      if f.slurm_node and f.slurm_node != f.processor_name})
    if renamed:
        notes.append("hosts are Slurm's node names (SLURMD_NODENAME) where they differ from "
                     "MPI_Get_processor_name: " + ", ".join(f"{n} (on {h})" for h, n in renamed[:8])
                     + (f" and {len(renamed) - 8} more" if len(renamed) > 8 else ""))
    missing = [r for r in range(size) if r not in files]
    if missing:
        notes.append(f"{len(missing)} of {size} ranks left no file (crashed or killed before "
                     f"MPI_Finalize): {_ranges(missing)}; their own counts are not in the profile")
    if has_trace and missing and info.hostfile():
        sim_hosts = simtrace.read_hostfile(info.hostfile())
        hosts = [h or (sim_hosts[r] if r < len(sim_hosts) else "") for r, h in enumerate(hosts)]
    for rf in files.values():
        lost = {k: rf.doc.get(k) for k in ("intervals_dropped", "library_calls_dropped")}
        lost.update(rf.doc.get("dropped") or {})
        lost = {k: v for k, v in lost.items() if v}
        if lost:
            notes.append(f"rank {rf.rank}: not counted (bounded memory, docs/profile-counting.md): "
                         + ", ".join(f"{k} {v}" for k, v in lost.items()))
        notes.extend(f"rank {rf.rank}: {n}" for n in rf.doc.get("notes", []))
    notes.extend(str(n) for n in job.get("notes", []))

    backend = job.get("backend_hint", "smpi" if has_trace else "")
    shadowed = frozenset()
    if has_trace:
        meta_trace = {"simgrid": info.version, "messages": info.messages,
                      "duplicates_dropped": info.dropped_duplicates}
        if files:
            # The trace files colltune's own sends (PMPI_Isend...) and the application's
            # under p2p; the rank files split them exactly (interposer + colltune sources).
            shadowed = frozenset({("p2p", "simulator")})
    by_comm: dict = {}
    library = _library_coverage(files, job, backend, has_trace, acc, notes, model, by_comm)
    if not has_trace:       # on SMPI the trace has their messages
        _uncounted_coverage(files, library)
    cells = {key: Cell.from_dict(d) for key, d in acc.cells.items()}
    meta = {"out_dir": os.path.abspath(out_dir), "size": size, "backend": backend,
            **{k: v for k, v in job.items() if k not in ("schema", "notes")}}
    if has_trace:
        meta["trace"] = meta_trace
    prof = TrafficProfile(size, hosts, missing, meta, notes, cells, library, shadowed, names,
                          {r: (rf.run, tuple(rf.own)) for r, rf in files.items()}, by_comm)
    if has_trace and files:
        _check_trace_p2p(prof)
    return prof


class _Accumulator:
    def __init__(self):
        self.cells: dict[tuple[str, str, str], dict[tuple[int, int], list[int]]] = {}

    def add(self, region: str, kind: str, source: str, s: int, d: int, nb: int, nm: int) -> None:
        cell = self.cells.setdefault((region, kind, source), {})
        v = cell.get((s, d))
        if v is None:
            cell[(s, d)] = [nb, nm]
        else:
            v[0] += nb
            v[1] += nm


def _add_rank_counts(rf: _RankFile, acc: _Accumulator, size: int) -> None:
    for k, entry in enumerate(_need(rf.doc, "counts", list, rf.path)):
        where = f"{rf.path}: counts[{k}]"
        try:
            region, kind, source, peers = entry["region"], entry["kind"], entry["source"], entry["peers"]
        except (KeyError, TypeError):
            raise ProfileError(f"{where}: expected region, kind, source, peers") from None
        if kind not in KINDS or source not in ("interposer", "colltune", "monitoring"):
            raise ProfileError(f"{where}: unknown kind '{kind}' or source '{source}'")
        if not isinstance(region, int) or not 0 <= region < len(rf.names):
            raise ProfileError(f"{where}: region {region!r} is not an index of 'regions'")
        up = rf.names_up(region)
        for p in peers:
            if not (isinstance(p, list) and len(p) == 3 and all(isinstance(x, int) and x >= 0 for x in p)):
                raise ProfileError(f"{where}: peer entry {p!r}: expected [rank, bytes, messages]")
            if size and p[0] >= size:     # it would land on another pair of the matrix
                raise ProfileError(f"{where}: peer entry {p!r}: rank {p[0]} is not a rank of the "
                                   f"job ({size} ranks)")
            for name in up:
                acc.add(name, kind, source, rf.rank, p[0], p[1], p[2])


# what an uncounted call's traffic would be (libcolltune's profile_uncounted.c names)
_UNCOUNTED_KIND = {"MPI_Ibcast": "bcast", "MPI_Ireduce": "reduce", "MPI_Iallreduce": "allreduce",
                   "MPI_Iallgather": "allgather", "MPI_Ialltoall": "alltoall", "MPI_Igather": "gather",
                   "MPI_Iscatter": "scatter", "MPI_Ibarrier": "barrier",
                   "MPI_Ireduce_scatter_block": "reduce_scatter_block",
                   "MPI_Bcast_c": "bcast", "MPI_Reduce_c": "reduce", "MPI_Allreduce_c": "allreduce",
                   "MPI_Allgather_c": "allgather", "MPI_Alltoall_c": "alltoall",
                   "MPI_Gather_c": "gather", "MPI_Scatter_c": "scatter"}
# a blocking collective's Open MPI monitoring window that a non-blocking collective of the
# application shared (profile_pending.c): left out, its kind not visible; its calls are
# already in library_calls
_SHARED_WINDOW = " during a non-blocking collective"


def _shared_window_kind(call: str) -> str | None:
    kind = call[:-len(_SHARED_WINDOW)] if call.endswith(_SHARED_WINDOW) else None
    return kind if kind in KINDS else None


def _uncounted_entries(rf: _RankFile):
    """(region index, call, calls) of each of the file's 'uncounted' entries, checked."""
    for k, u in enumerate(rf.doc.get("uncounted", [])):
        try:
            region, call, n = u["region"], str(u["call"]), int(u["calls"])
            if not (isinstance(region, int) and 0 <= region < len(rf.names)):
                raise IndexError(region)
        except (KeyError, TypeError, IndexError, ValueError):
            raise ProfileError(f"{rf.path}: uncounted[{k}]: expected region (index of "
                               f"'regions'), call, calls") from None
        yield region, call, n


def _uncounted_coverage(files: dict, library: dict) -> None:
    """The non-blocking collectives no counter saw (real MPI) make their (region, kind)
    'not visible', with their calls: a region of only such calls had been absent and its
    kind 'exact' (an analyst's review); one-sided calls stay in the notes."""
    for rf in files.values():
        for region, call, n in _uncounted_entries(rf):
            shared = _shared_window_kind(call)
            kind = shared or _UNCOUNTED_KIND.get(call)
            if kind is None:
                continue
            for name in rf.names_up(region):
                cur = library.setdefault((name, kind), {"calls": 0, "label": "not visible"})
                cur["calls"] += 0 if shared else n
                cur["label"] = "not visible"


def _uncounted_notes(files: dict) -> list[str]:
    """The application's non-blocking collectives and one-sided calls, which no counter sees
    on a real library: what is missing, per region and call."""
    calls: dict[tuple[str, str], list[int]] = {}
    for rf in files.values():
        for region, call, n in _uncounted_entries(rf):
            v = calls.setdefault((rf.names[region], call), [0, 0])
            v[0] += n
            v[1] += 1
    return [f"region '{r}': {n} {call[:-len(_SHARED_WINDOW)]} call(s) on {k} rank(s) ran while a "
            f"non-blocking collective of the application was in flight: Open MPI's monitoring "
            f"counters cannot tell their traffic apart, so neither is counted: missing, not zero"
            if _shared_window_kind(call) else
            f"region '{r}': {n} {call} call(s) on {k} rank(s) whose traffic no counter sees "
            f"(non-blocking and large-count collectives, MPI_Alltoallw and one-sided calls are "
            f"counted only on SMPI): missing, not zero" for (r, call), (n, k) in sorted(calls.items())]


def _is_own(run, own, t: float) -> bool:
    return bool(run and not run[0] <= t < run[1]) or any(a <= t < b for a, b in own)


def _add_trace(path: str, info, files: dict[int, _RankFile], acc: _Accumulator,
               own: list[int], fileless: dict[int, list[int]]) -> int:
    """Each traced message into every region open on its sender at its send time; a
    message sent while the sender had counting paused (MPI_Pcontrol(0)) is left out, as
    the rank files leave it out. One sent before the sender's "run" began or after it
    ended is colltune's own (its agreements in MPI_Init, COLLTUNE_TIMES in MPI_Finalize:
    the application can send neither then): left out, counted in own [messages, bytes]."""
    paused = 0
    for m in simtrace.read_trace(path, info):
        rf = files.get(m.sender)
        if rf is None:          # fileless[sender] = [messages, bytes]: said in the notes
            acc.add("run", m.kind, "simulator", m.sender, m.receiver, m.bytes, 1)
            v = fileless.setdefault(m.sender, [0, 0])
            v[0] += 1
            v[1] += m.bytes
            continue
        if _is_own(rf.run, rf.own, m.time):
            own[0] += 1
            own[1] += m.bytes
            continue
        if rf.pauses and rf.paused(m.time):
            paused += 1
            continue
        for name in rf.names_at(m.time):
            acc.add(name, m.kind, "simulator", m.sender, m.receiver, m.bytes, 1)
    return paused


def _library_coverage(files, job, backend, has_trace, acc, notes, model, by_comm=None) -> dict:
    """(region, kind) -> {'calls', 'label'} for the collectives the library ran itself; adds
    modelled counts (MPICH with a known algorithm) to ``acc``; by_comm (filled): (region,
    kind, communicator size) -> rank-calls."""
    from ..mpi.impl import library
    out: dict[tuple[str, str], dict] = {}
    monitoring = str(job.get("monitoring", "")).startswith("on")
    counters = getattr(library(backend), "pml_monitoring", False)   # the library counts its sends
    unmodelled: dict[str, int] = {}
    by_comm = by_comm if by_comm is not None else {}
    for rf in files.values():
        comms = rf.doc.get("comms", [])
        for k, call in enumerate(rf.doc.get("library_calls", [])):
            where = f"{rf.path}: library_calls[{k}]"
            try:
                region, kind, n = call["region"], call["kind"], int(call["calls"])
                members = comms[call["comm"]]
            except (KeyError, TypeError, IndexError, ValueError):
                raise ProfileError(f"{where}: expected region, kind, comm (index of 'comms'), root, bytes, calls") from None
            if has_trace:
                label = "simulator"
            elif counters:
                label = "monitoring" if monitoring else "not visible"
            else:
                sends = model.model_sends(kind, members, int(call.get("root", -1)),
                                          int(call.get("bytes", 0)), job, rank=rf.rank,
                                          type_size=call.get("type_size"))
                if sends is None:
                    label = "not visible"
                    unmodelled[kind] = unmodelled.get(kind, 0) + n
                else:
                    label = "modelled"
                    for name in rf.names_up(region):
                        for dst, nb, nm in sends:
                            acc.add(name, kind, "modelled", rf.rank, dst, nb * n, nm * n)
            for name in rf.names_up(region):
                cur = out.setdefault((name, kind), {"calls": 0, "label": "exact"})
                cur["calls"] += n
                cur["label"] = max(cur["label"], label, key=VISIBILITY.index)
                key = (name, kind, len(members))
                by_comm[key] = by_comm.get(key, 0) + n
    if unmodelled:
        why = model.why_not(job)
        notes.append("not visible (no per-peer counters in this MPI and no model of the algorithm"
                     f"{': ' + why if why else ''}): " +
                     ", ".join(f"{k} x{v}" for k, v in sorted(unmodelled.items())) + " rank-calls")
    if not has_trace and counters and not monitoring and out:
        notes.append(f"Open MPI monitoring was {job.get('monitoring', 'off')}: the library's own "
                     "collectives are not visible")
    return {k: {"calls": v["calls"], "label": v["label"]} for k, v in out.items()}


def _check_trace_p2p(prof: TrafficProfile) -> None:
    """The trace's p2p must be the interposer's p2p plus colltune's own sends, region by
    region; a difference is noted (it would mean a send one of them missed)."""
    for region in prof.regions():
        t = prof.pairs(region, "p2p", "simulator").total
        i = prof.pairs(region, "p2p", "interposer").total
        c = prof.pairs(region, None, "colltune").total
        if t != (i[0] + c[0], i[1] + c[1]):
            prof.notes.append(f"region {region}: the simulator's p2p messages ({t[0]} B, {t[1]} msgs) "
                              f"differ from the interposer's p2p + colltune's sends "
                              f"({i[0] + c[0]} B, {i[1] + c[1]} msgs)")


def _ranges(xs: list[int]) -> str:
    out, start = [], None
    for k, x in enumerate(xs):
        if start is None:
            start = x
        if k + 1 == len(xs) or xs[k + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}-{x}")
            start = None
    return ",".join(out)
