"""SimGrid SMPI's message trace: the smpirun flags that record it, and a streaming reader.

SMPI (SimGrid 3.32) writes a Paje trace when tracing is on; with ``tracing/smpi/internals``
every message, including those posted inside the library's collectives, is a Paje link
(``PajeStartLink`` at the send, ``PajeEndLink`` at the matching receive) and with
``tracing/smpi/display-sizes`` the start carries the message size in bytes. See
docs/profile-files.md for what the reader relies on.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable, Iterator

TRACE_NAME = "simgrid.trace"
# Decimals of the trace's timestamps: SMPI's clock at nanosecond resolution, so the sends
# can be split by the regions' MPI_Wtime intervals (the default, 6, is a microsecond).
TRACE_PRECISION = 9


def trace_path(out_dir: str | os.PathLike) -> str:
    return os.path.join(os.path.abspath(os.fspath(out_dir)), TRACE_NAME)


def smpirun_args(out_dir: str | os.PathLike) -> list[str]:
    """smpirun --cfg flags that make SimGrid 3.32 record every message with its size into
    <out_dir>/simgrid.trace (out_dir must exist: SimGrid aborts otherwise). ``tracing/smpi/group`` is left off: on cluster platforms
    SimGrid 3.32 aborts with it ('container with name ..._DOWN not found')."""
    return ["--cfg=tracing:yes", "--cfg=tracing/smpi:yes", "--cfg=tracing/smpi/internals:yes",
            "--cfg=tracing/smpi/display-sizes:yes", f"--cfg=tracing/precision:{TRACE_PRECISION}",
            f"--cfg=tracing/filename:{trace_path(out_dir)}"]


class TraceError(ValueError):
    """A trace this reader cannot use; the message names the file and line."""


@dataclass(frozen=True)
class Message:
    """One message of the trace: world ranks, bytes, simulated send time (s), the kind of the
    MPI call the sender was in (colltune's kinds: 'p2p', 'bcast', ..., 'other') and SMPI's
    name of that call ('PMPI_Bcast'; '' outside any call)."""
    sender: int
    receiver: int
    bytes: int
    time: float
    kind: str
    call: str


# MPI calls whose SMPI 3.32 binding traces the send itself although tracing/smpi/internals
# also traces it where the request starts: one message gives two StartLinks there, the
# binding's first (smpi_pmpi_request.cpp: Isend, Issend, Ibsend, Ssend, Sendrecv; Send,
# Bsend, Start and Startall skip theirs when internals are on). Each posts one message.
_TRACED_TWICE = frozenset({"isend", "issend", "ibsend", "ssend", "sendrecv", "sendrecv_replace"})
_P2P = frozenset({"send", "bsend", "rsend", "start", "startall", "irsend", *_TRACED_TWICE})
_COLLECTIVES = frozenset({"bcast", "reduce", "allreduce", "allgather", "alltoall", "gather",
                          "scatter", "barrier", "scan", "exscan", "reduce_scatter",
                          "reduce_scatter_block", "allgatherv", "alltoallv", "gatherv", "scatterv"})


def call_kind(state: str) -> str:
    """colltune's kind of an SMPI state name: PMPI_Allreduce -> allreduce, PMPI_Ibcast ->
    bcast (a non-blocking collective's sends are posted at the call in SMPI), PMPI_Isend ->
    p2p, anything else (init, comm_split, one-sided, alltoallw, no call) -> other."""
    name = state.lower()
    for prefix in ("pmpi_", "mpi_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name in _P2P:
        return "p2p"
    if name in _COLLECTIVES:
        return name
    if name.startswith("i") and name[1:] in _COLLECTIVES:
        return name[1:]
    return "other"


@dataclass
class TraceInfo:
    """What the header and containers of a trace say: SimGrid version, command line, and the
    world rank of each 'rank-N' container (SMPI names a rank's container rank-<world rank>)."""
    path: str
    version: str = ""
    command: str = ""
    ranks: dict[str, int] = field(default_factory=dict)      # container alias -> world rank
    messages: int = 0
    dropped_duplicates: int = 0
    dropped_proc_null: int = 0
    end_time: float = 0.0          # time of the last message
    finished: set = field(default_factory=set)               # aliases of destroyed rank containers
    cut_at: int = 0                # line the file ends in the middle of (cut, or the writer died)

    @property
    def size(self) -> int:
        return max(self.ranks.values()) + 1 if self.ranks else 0

    def unfinished(self) -> list[int]:
        """World ranks whose container the trace creates and never destroys (SMPI destroys
        a rank's at its MPI_Finalize): the trace was cut, or the simulation died, before
        they finished, and whatever they sent afterwards is missing."""
        return sorted(r for a, r in self.ranks.items()
                      if a not in self.finished and f"rank-{r}" not in self.finished)

    def hostfile(self) -> str | None:
        """The smpirun hostfile named on the trace's command line, if it still exists."""
        m = re.search(r"--cfg=smpi/hostfile:(\S+)", self.command)
        if not m:
            return None
        path = m.group(1)
        return path if os.path.isabs(path) and os.path.exists(path) else None


def read_hostfile(path: str) -> list[str]:
    """Hosts of world ranks 0.. from an smpirun hostfile (one host a line, or host:slots)."""
    hosts: list[str] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            host, _, slots = line.partition(":")
            try:
                n = int(slots) if slots else 1
            except ValueError:
                raise TraceError(f"{path}:{lineno}: bad slot count '{slots}'") from None
            hosts.extend([host] * n)
    return hosts


def read_trace(path: str | os.PathLike, info: TraceInfo | None = None) -> Iterator[Message]:
    """Stream the messages of an SMPI Paje trace written with smpirun_args(), in trace order
    (simulated time order), holding only the per-rank call stacks. ``info`` (optional) is
    filled as the file is read. Raises TraceError naming file:line on a trace without message
    sizes or internals, or on an event this reader does not understand."""
    path = os.fspath(path)
    info = info if info is not None else TraceInfo(path)
    info.path = path
    defs: dict[str, tuple[str, list[str]]] = {}       # event id -> (Paje name, field names)
    cur: tuple[str, list[str]] | None = None
    values: dict[str, str] = {}                       # entity value alias -> name (PMPI_Bcast)
    types: dict[str, str] = {}                        # 'state' / 'link' -> the type's alias
    stacks: dict[str, list[list]] = {}                # container -> [[call, kind, starts seen]]
    checked = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.endswith("\n"):
                # a last line without its end: the file was cut there (copied partly, or the
                # simulation died writing it); its fields had been read as missing ones
                # ("message without a size"): the trace ends before it (the note says so)
                info.cut_at = lineno
                break
            if line.startswith("%"):
                words = line[1:].split()
                if words and words[0] == "EventDef":
                    cur = (words[1], [])
                    defs[words[2]] = cur
                elif words and words[0] != "EndEventDef" and cur is not None:
                    cur[1].append(words[0])
                continue
            if line.startswith("#"):
                if line.startswith("#This file was generated using SimGrid-"):
                    info.version = line.split("SimGrid-", 1)[1].strip()
                elif line.startswith("#[") and not info.command:
                    info.command = line[2:].rstrip().rstrip("]")
                continue
            if not checked:
                checked = True
                for flag in ("tracing/smpi/internals:yes", "tracing/smpi/display-sizes:yes"):
                    if info.command and f"--cfg={flag}" not in info.command:
                        raise TraceError(f"{path}:{lineno}: the trace was written without "
                                         f"--cfg={flag} (use simtrace.smpirun_args)")
            words = line.split()
            if not words:
                continue
            d = defs.get(words[0])
            if d is None:
                raise TraceError(f"{path}:{lineno}: event '{words[0]}' not defined in the header")
            try:
                msg = _event(d, words, line, info, stacks, values, types, path, lineno)
            except TraceError:
                raise
            except (IndexError, KeyError, ValueError):
                raise TraceError(f"{path}:{lineno}: a {d[0]} event this reader cannot read "
                                 f"({line.strip()[:80]!r}): the trace is cut or not SMPI's") from None
            if msg is not None:
                yield msg


def _event(d, words, line, info, stacks, values, types, path, lineno) -> Message | None:
    """One event line of the trace: its message, if it is one (the other events update
    info, stacks, values and types: {'state': alias, 'link': alias})."""
    name = d[0]
    if name == "PajeStartLink":
        if words[2] != types.get("link"):
            return None
        msg = _start_link(words, d[1], info, stacks, path, lineno)
        if msg is not None:
            info.messages += 1
            info.end_time = msg.time
        return msg
    elif name == "PajePushState":
        if words[2] == types.get("state"):
            call = values.get(words[4], words[4])
            stacks.setdefault(words[3], []).append([call, call_kind(call), 0])
    elif name == "PajePopState":
        if words[2] == types.get("state") and stacks.get(words[3]):
            stacks[words[3]].pop()
    elif name == "PajeCreateContainer":
        rec = dict(zip(d[1], shlex.split(line)[1:]))
        m = re.fullmatch(r"rank-(\d+)", rec.get("Name", ""))
        if m:
            info.ranks[rec["Alias"]] = int(m.group(1))
    elif name == "PajeDestroyContainer":
        rec = dict(zip(d[1], shlex.split(line)[1:]))
        info.finished.add(rec["Name"])
    elif name == "PajeDefineEntityValue":
        rec = dict(zip(d[1], shlex.split(line)[1:]))
        values[rec["Alias"]] = rec["Name"]
    elif name == "PajeDefineStateType" or name == "PajeDefineLinkType":
        rec = dict(zip(d[1], shlex.split(line)[1:]))
        if rec.get("Name") == "MPI_STATE":
            types["state"] = rec["Alias"]
        elif rec.get("Name") == "MPI_LINK":
            types["link"] = rec["Alias"]
    return None


def _start_link(words, fields, info, stacks, path, lineno) -> Message | None:
    # Fields: Time Type Container Value StartContainer Key Size (the header's order is used).
    rec = dict(zip(fields, words[1:]))
    size = rec.get("Size")
    if size is None:
        raise TraceError(f"{path}:{lineno}: message without a size: the trace was written "
                         "without --cfg=tracing/smpi/display-sizes:yes")
    container = rec["StartContainer"]
    sender = info.ranks.get(container)
    if sender is None:
        raise TraceError(f"{path}:{lineno}: message from container '{container}', "
                         "not an SMPI rank container")
    stack = stacks.get(container)
    call, kind = (stack[-1][0], stack[-1][1]) if stack else ("", "other")
    if stack and call_kind(call) == "p2p" and _bare(call) in _TRACED_TWICE:
        stack[-1][2] += 1
        if stack[-1][2] == 1:          # the binding's own trace of a send traced again below
            info.dropped_duplicates += 1
            return None
    # Key: <src pid>_<dst pid>_<tag>_<counter>; SMPI's pids are world rank + 1 (the offset is
    # taken from the sender's container so the receiver's rank needs no assumption).
    try:
        src_pid, dst_pid = (int(x) for x in rec["Key"].split("_", 2)[:2])
        nbytes = int(size)
    except ValueError:
        raise TraceError(f"{path}:{lineno}: cannot read key '{rec['Key']}' / size '{size}'") from None
    receiver = dst_pid - (src_pid - sender)
    if receiver < 0:
        info.dropped_proc_null += 1
        return None
    return Message(sender, receiver, nbytes, float(rec["Time"]), kind, call)


def _bare(call: str) -> str:
    name = call.lower()
    return name[5:] if name.startswith("pmpi_") else name[4:] if name.startswith("mpi_") else name


def simgrid_link_loads(path: str | os.PathLike, hosts: list[str], platform_xml: str | os.PathLike,
                       *, cache_dir: str | os.PathLike = ".colltune-cache",
                       keep: Callable[[Message], bool] | None = None) -> dict[str, tuple[int, int]]:
    """The reference of the ground-truth checks: every traced message (or those ``keep``
    accepts) summed along SimGrid's own route between its ranks' hosts (s4u
    Host::route_to, through simgrid_routes): SimGrid link name -> (bytes, messages).
    ``hosts[r]``: host of world rank r."""
    from . import simgrid_routes
    pairs: dict[tuple[int, int], list[int]] = {}
    for m in read_trace(path):
        if keep is None or keep(m):
            v = pairs.setdefault((m.sender, m.receiver), [0, 0])
            v[0] += m.bytes
            v[1] += 1
    host_pairs = sorted({(hosts[s], hosts[d]) for s, d in pairs})
    sg = simgrid_routes.routes(platform_xml, host_pairs, cache_dir=cache_dir)
    out: dict[str, list[int]] = {}
    for (s, d), (nb, nm) in pairs.items():
        for link in sg.routes[(hosts[s], hosts[d])]:
            v = out.setdefault(link, [0, 0])
            v[0] += nb
            v[1] += nm
    return {k: (v[0], v[1]) for k, v in out.items()}


def profile_link_loads(prof, topo, region: str = "run") -> dict[str, tuple[int, int]]:
    """What colltune reports, in the reference's terms: the profile's host matrix of
    ``region`` routed by colltune.profile (link_loads), SimGrid link name -> (bytes, messages)."""
    from .loads import link_loads
    B, M, hosts = prof.host_matrix(region)
    ld = link_loads(topo, B, M, hosts=hosts)
    return {topo.links[r["id"]].sg_name: (int(r["bytes"]), int(r["messages"])) for r in ld.rows()}
