"""An InfiniBand fabric as a :class:`Topology`: ``ibnetdiscover`` output plus the switches'
linear forwarding tables (``dump_lfts`` / ``ibroute`` output), routed hop by hop exactly
as the fabric forwards.

Nodes. Every channel adapter (``Ca``) belongs to a host named by the first word of its
node description (``"node01 HCA-1"``, ``"node01 mlx5_0"`` -> ``node01``; a description
that is empty or a vendor default such as ``"MT4123 ConnectX6 Mellanox Technologies"``
gives ``H-<node guid>``); a host with several HCAs is one host node with several cables.
Switches are named by their node description (with the GUID appended when two switches
share one) and get a level by breadth-first search from the hosts (leaf 1, spine 2, ...).
GUIDs and LIDs are in ``topo.params`` (``guids``, ``lids``).

Links. Each cable is two directed links, ``up`` (towards the higher level) and ``down``;
cables between nodes of the same level are ``side`` both ways. Link ids follow
``Topology`` (``"leaf1 -> spine1"``, ``#k`` for parallel cables, ordered by the lower
end's port); ``Link.sg_name`` names the ports (``"leaf1[5] -> spine1[1]"``). Bandwidth
is the data rate of the width x speed the dump reports (``4xEDR`` = 4 x 25 Gb/s =
12.5e9 B/s; 0 when the dump has none); latency 0 (not in the dumps).

Routing. A message from host a to host b leaves a's *primary port* (the first connected
port of its HCAs in description order, then port number), is addressed to b's primary
port's base LID, and at every switch takes the output port the switch's LFT gives for
that LID. With LMC > 0 only the base LID is routed (which LID offset an MPI library
uses is not in the dumps); other ports of multi-port hosts are drawn but carry no
traffic in the model. A host to itself is an empty route. Errors name file:line.
"""
from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .topology import Node, Topology, TopologyError

__all__ = ["IBNode", "LFT", "parse_ibnetdiscover", "parse_lfts", "ib_topology", "host_of",
           "LANE_GBPS"]

#: data rate per lane in Gb/s after line encoding (8b/10b up to QDR, 64b/66b from FDR)
LANE_GBPS = {"SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0, "FDR": 13.64, "EDR": 25.0,
             "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}

_HEADER = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)"(.*))?$')
_PORT = re.compile(r'^\[(\d+)\](?:\[ext\s+\d+\])?(?:\(([0-9a-fA-F]+)\))?\s*'
                   r'"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\[ext\s+\d+\])?(?:\(([0-9a-fA-F]+)\))?\s*'
                   r'(?:#\s*(.*))?$')
_SKIP = re.compile(r"^(#.*|\s*|(vendid|devid|sysimgguid|switchguid|caguid|routerguid)=.*)$")
_RATE = re.compile(r"\b(\d+)x([A-Za-z0-9]+)\s*$")
_LID_LMC = re.compile(r"\blid (\d+) lmc (\d+)")
_VENDOR_DEFAULT = re.compile(r"^(MT\d+|Mellanox|NVIDIA|ConnectX)", re.I)


@dataclass
class IBPort:
    port: int
    remote: str          # remote node guid (16 hex digits)
    remote_port: int
    gbps: float          # width x lane rate, 0 when unknown
    where: str
    remote_lid: int = 0  # the remote port's LID as the comment gives it


@dataclass
class IBNode:
    """One node of an ``ibnetdiscover`` dump: ``type`` Switch or Ca, 16-hex-digit ``guid``,
    node description ``desc``, base ``lid``/``lmc`` (switch: port 0; Ca: of its first
    port with one), ``ports`` by number, ``port_lids`` (Ca), ``where`` = file:line."""
    type: str
    guid: str
    nports: int
    desc: str
    where: str
    lid: int = 0
    lmc: int = 0
    ports: dict[int, IBPort] = field(default_factory=dict)
    port_lids: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass
class LFT:
    """One switch's linear forwarding table: LID -> output port (None: 255, drop)."""
    guid: str
    name: str
    table: dict[int, int | None]
    where: str


def _guid(text: str) -> str:
    return f"{int(text, 16):016x}"


def _rate(comment: str) -> float:
    m = _RATE.search(comment or "")
    if not m:
        return 0.0
    lane = LANE_GBPS.get(m.group(2).upper())
    return int(m.group(1)) * lane if lane else 0.0


def _read(path: str | os.PathLike) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError as exc:
        raise TopologyError(f"{path}: {exc}") from None


def parse_ibnetdiscover(path: str | os.PathLike) -> dict[str, IBNode]:
    """Nodes of an ``ibnetdiscover`` output file, by node GUID (file order)."""
    nodes: dict[str, IBNode] = {}
    cur: IBNode | None = None
    for no, line in enumerate(_read(path), 1):
        where = f"{path}:{no}"
        text = line.strip()
        if _SKIP.match(text):
            continue
        m = _HEADER.match(text)
        if m:
            kind, nports, _, guid, desc, rest = m.groups()
            if kind == "Rt":
                raise TopologyError(f"{where}: InfiniBand routers (Rt) are not supported: '{text}'")
            guid = _guid(guid)
            if guid in nodes:
                raise TopologyError(f"{where}: node GUID {guid} listed twice (first at {nodes[guid].where})")
            cur = nodes[guid] = IBNode(kind, guid, int(nports), desc or "", where)
            lm = _LID_LMC.search(rest or "")
            if lm:
                cur.lid, cur.lmc = int(lm.group(1)), int(lm.group(2))
            continue
        m = _PORT.match(text)
        if not m:
            raise TopologyError(f"{where}: not an ibnetdiscover line: '{text}'")
        if cur is None:
            raise TopologyError(f"{where}: port line before any Switch/Ca header: '{text}'")
        port, _, _, rguid, rport, _, comment = m.groups()
        port = int(port)
        if not 1 <= port <= cur.nports or port in cur.ports:
            raise TopologyError(f"{where}: port {port} of {cur.type} '{cur.desc}' is out of range "
                                f"1..{cur.nports} or listed twice: '{text}'")
        rlids = re.findall(r"\blid (\d+)", comment or "")
        cur.ports[port] = IBPort(port, _guid(rguid), int(rport), _rate(comment or ""), where,
                                 int(rlids[-1]) if rlids else 0)
        if cur.type == "Ca":
            lm = re.match(r"\s*lid (\d+) lmc (\d+)", comment or "")
            if lm:
                cur.port_lids[port] = (int(lm.group(1)), int(lm.group(2)))
                if not cur.lid:
                    cur.lid, cur.lmc = cur.port_lids[port]
    if not nodes:
        raise TopologyError(f"{path}: no Switch or Ca in this file (is it ibnetdiscover output?)")
    return nodes


_LFT_HEAD = re.compile(r"^Unicast lids \[(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+)\] of switch .*?"
                       r"guid (0x[0-9a-fA-F]+)(?:\s*\((.*)\))?:\s*$")
_LFT_ROW = re.compile(r"^(0x[0-9a-fA-F]+)\s+(\d+)(?:\s*:.*)?$")
_LFT_SKIP = re.compile(r"^(#.*|\*\*\* WARNING \*\*\*.*|\s*|Lid\s+Out.*|Port\s+Info.*|\d+ (valid )?lids dumped.*)$")


def parse_lfts(paths: str | os.PathLike | list) -> dict[str, LFT]:
    """Forwarding tables from ``dump_lfts`` / ``ibroute`` output (one or several files;
    multicast sections skipped), by switch GUID."""
    out: dict[str, LFT] = {}
    for path in ([paths] if isinstance(paths, (str, os.PathLike)) else paths):
        cur: LFT | None = None
        bounds = (0, 0)
        for no, line in enumerate(_read(path), 1):
            where = f"{path}:{no}"
            text = line.strip()
            if text.startswith("Multicast mlids"):
                cur = None
                bounds = (-1, -1)
                continue
            m = _LFT_HEAD.match(text)
            if m:
                guid = _guid(m.group(3))
                if guid in out:
                    raise TopologyError(f"{where}: a second forwarding table for switch {guid} "
                                        f"(first at {out[guid].where})")
                cur = out[guid] = LFT(guid, m.group(4) or "", {}, where)
                bounds = (int(m.group(1), 16), int(m.group(2), 16))
                continue
            if _LFT_SKIP.match(text) or bounds == (-1, -1):
                continue
            m = _LFT_ROW.match(text)
            if not m:
                raise TopologyError(f"{where}: not a forwarding-table line: '{text}'")
            if cur is None:
                raise TopologyError(f"{where}: LFT entry before any 'Unicast lids ... of switch' header: '{text}'")
            lid, port = int(m.group(1), 16), int(m.group(2))
            if not bounds[0] <= lid <= bounds[1] or lid in cur.table or port > 255:
                raise TopologyError(f"{where}: LID {lid:#x} outside {bounds[0]:#x}-{bounds[1]:#x}, "
                                    f"listed twice, or port {port} > 255: '{text}'")
            cur.table[lid] = None if port == 255 else port
    if not out:
        raise TopologyError(f"{paths}: no 'Unicast lids ... of switch' table (is it dump_lfts or ibroute output?)")
    return out


def host_of(desc: str, guid: str) -> str:
    """Host name of an HCA: the first word of its node description, or ``H-<guid>`` when
    the description is empty or a vendor default (no host name set)."""
    word = desc.split()[0] if desc.split() else ""
    return word if word and not _VENDOR_DEFAULT.match(word) else f"H-{guid}"


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def ib_topology(ibnetdiscover: str | os.PathLike, lfts: str | os.PathLike | list,
                name: str | None = None) -> Topology:
    """Topology of a fabric: ``ibnetdiscover`` output and one or more LFT dump files."""
    nodes = parse_ibnetdiscover(ibnetdiscover)
    tables = parse_lfts(lfts)
    lft_files = [str(p) for p in ([lfts] if isinstance(lfts, (str, os.PathLike)) else lfts)]
    for n in nodes.values():  # every cable must be seen the same way from both ends
        for p in n.ports.values():
            peer = nodes.get(p.remote)
            back = peer.ports.get(p.remote_port) if peer else None
            if peer is not None and back is not None and (back.remote, back.remote_port) != (n.guid, p.port):
                raise TopologyError(f"{p.where}: port {p.port} of '{n.desc}' goes to {p.remote}[{p.remote_port}] "
                                    f"but that port goes to {back.remote}[{back.remote_port}] ({back.where})")
            if peer is None:
                raise TopologyError(f"{p.where}: port {p.port} of '{n.desc}' goes to node {p.remote}, "
                                    "which the dump does not list")

    # names: hosts by host name, HCAs by description, switches by description (+ GUID if shared)
    host = {g: host_of(n.desc, g) for g, n in nodes.items() if n.type == "Ca"}
    descs = [n.desc for n in nodes.values()] + list(set(host.values()))
    label = {g: (n.desc if n.desc and descs.count(n.desc) == 1 else f"{n.desc or n.type} {g}")
             for g, n in nodes.items()}  # unique: HCA ends of links, switch node ids
    sw_id = {g: label[g] for g, n in nodes.items() if n.type == "Switch"}
    node_of = {**host, **sw_id}  # guid -> topology node id

    # levels: BFS from the hosts over cables
    level = {g: 0 for g in host}
    todo = deque(host)
    while todo:
        g = todo.popleft()
        for p in nodes[g].ports.values():
            if p.remote not in level:
                level[p.remote] = level[g] + 1
                todo.append(p.remote)
    for g in sw_id:
        level.setdefault(g, 1)  # a switch with no host behind it

    hosts = sorted(set(host.values()), key=_natural)
    host_pos = {h: i for i, h in enumerate(hosts)}
    t = Topology(name or Path(ibnetdiscover).parent.name or Path(ibnetdiscover).stem, "INFINIBAND", {}, str(ibnetdiscover))
    for i, h in enumerate(hosts):
        t.add_node(Node(h, "host", 0, i))
    by_level: dict[int, list[str]] = {}
    for g in sw_id:
        by_level.setdefault(level[g], []).append(g)
    order = {g: (0, host_pos[h], 0) for g, h in host.items()}
    for lv in sorted(by_level):
        for pos, g in enumerate(sorted(by_level[lv], key=lambda g: _natural(sw_id[g]))):
            t.add_node(Node(sw_id[g], "switch", lv, pos))
            order[g] = (lv, pos, 0)

    # cables, each added once from its lower (then first-ordered) end, in port order
    port_link: dict[tuple[str, int], str] = {}  # (guid, out port) -> link sg_name
    ends = sorted(((order[g], _natural(label[g]), g, p) for g, n in nodes.items() for p in n.ports),
                  key=lambda e: (e[0], e[1], e[3]))
    for _, _, g, pn in ends:
        p = nodes[g].ports[pn]
        if (g, pn) in port_link:
            continue
        r, rp = p.remote, p.remote_port
        gbps = p.gbps or nodes[r].ports[rp].gbps
        up = "up" if level[r] > level[g] else "side"
        back = "down" if up == "up" else "side"
        for (a, ap, b, bp, kind) in ((g, pn, r, rp, up), (r, rp, g, pn, back)):
            sg = f"{label[a]}[{ap}] -> {label[b]}[{bp}]"
            t.add_link(node_of[a], node_of[b], bandwidth=gbps * 1e9 / 8, latency=0.0, kind=kind, sg_name=sg)
            port_link[(a, ap)] = sg

    # primary port and base LID of every host
    primary: dict[str, tuple[str, int]] = {}
    lids: dict[str, int] = {}
    for g in sorted(host, key=lambda g: (host_pos[host[g]], _natural(nodes[g].desc))):
        n = nodes[g]
        for pn in sorted(n.ports):
            lid = n.port_lids.get(pn, (0, 0))[0] or _remote_lid(nodes, n, pn)
            if host[g] not in primary and lid:
                primary[host[g]], lids[host[g]] = (g, pn), lid
    for h in hosts:
        if h not in primary:
            raise TopologyError(f"{ibnetdiscover}: host {h} has no connected HCA port with a LID")
    lft_of = {}
    for g in sw_id:
        if g not in tables:
            raise TopologyError(f"{nodes[g].where}: switch '{sw_id[g]}' (GUID {g}) has no forwarding "
                                f"table in {', '.join(lft_files)}")
        lft_of[g] = tables[g]
        for h, lid in lids.items():  # cheap eager check: every switch must know every host
            if lid not in tables[g].table:
                raise TopologyError(f"{tables[g].where}: the forwarding table of switch '{sw_id[g]}' "
                                    f"(GUID {g}) has no entry for LID {lid} (host {h})")

    def route(i: int, j: int) -> list[str]:
        if i == j:
            return []
        src, dst = hosts[i], hosts[j]
        g, pn = primary[src]
        dlid, target = lids[dst], primary[dst]
        out: list[str] = []
        for _ in range(len(sw_id) + 2):
            sg = port_link.get((g, pn))
            if sg is None:
                raise TopologyError(f"{lft_of[g].where}: switch '{sw_id[g]}' forwards LID {dlid} "
                                    f"({src} -> {dst}) to port {pn}, which has no cable")
            out.append(sg)
            p = nodes[g].ports[pn]
            g, arrive = p.remote, p.remote_port
            if nodes[g].type == "Ca":
                if (g, arrive) != target:
                    raise TopologyError(f"route {src} -> {dst} (LID {dlid}) ends at "
                                        f"'{nodes[g].desc}' port {arrive}: the LFTs are inconsistent")
                return out
            pn = lft_of[g].table.get(dlid)
            if not pn:
                what = "drops it (port 255)" if pn is None else "keeps it (port 0, the switch itself)"
                raise TopologyError(f"{lft_of[g].where}: switch '{sw_id[g]}' (GUID {g}) {what}: "
                                    f"LID {dlid}, {src} -> {dst}")
        raise TopologyError(f"route {src} -> {dst} (LID {dlid}) loops: {' | '.join(out)}")

    t.params = {"routing": "InfiniBand linear forwarding tables (as dumped)",
                "ibnetdiscover": str(ibnetdiscover), "lfts": lft_files,
                "guids": {label[g]: g for g in nodes},
                "hcas": {h: [label[g] for g in host if host[g] == h] for h in hosts},
                "lids": lids, "lmc": max((n.lmc for n in nodes.values()), default=0)}
    return t.seal(route)



def _remote_lid(nodes: dict[str, IBNode], n: IBNode, pn: int) -> int:
    """LID of an HCA port as the switch side's comment gives it (when the Ca section has none)."""
    p = n.ports[pn]
    back = nodes[p.remote].ports.get(p.remote_port)
    return back.remote_lid if back is not None else 0
