"""A Slurm ``topology.conf`` / ``topology.yaml`` tree as a :class:`Topology`, routing modelled.

Slurm's topology/tree plugin describes switches and their children (switches or nodes)
with hostlist expressions (``node[01-16]``, ``s[0-2,4-8,12]``, ``rack[1-2]-n[1-4]``):

    SwitchName=s0 Switches=s[1-2]            # topology.conf (keys case-insensitive)
    SwitchName=s1 Nodes=node[01-08]

    - topology: fabric                        # topology.yaml (Slurm 23.11+), a list of
      cluster_default: true                   # topologies; each is tree, block or flat
      tree:
        switches:
          - switch: s0
            children: s[1-2]
          - switch: s1
            nodes: node[01-08]

From ``topology.yaml`` the tree topology named ``topology=`` is read, else the first
with ``cluster_default: true`` that is a tree, else the only tree. The YAML is read by a
small reader of the block-style subset these files use (mappings, sequences, plain or
quoted scalars, ``[a, b]`` lists, comments); anything else is an error naming the line.

The file says nothing about the routes the fabric takes, so routing is *modelled*, and
``topo.params["routing"]`` says so: a message goes up from its host to a lowest common
ancestor switch of the two hosts and down to the destination. Where several exist (a
switch listed under several parents), the ``(destination host index mod n)``-th of them
in name order is used (destination-based, like D-mod-k), and on the way the first parent
(up) or child (down) in name order that leads there. Each parent-child edge is two
directed links, ``up`` (child -> parent) and ``down``; their bandwidth is 0 (unknown:
Slurm's optional ``LinkSpeed`` is in arbitrary units, kept in ``params["link_speed"]``).
Switch levels: leaf switches 1, each switch one above its highest child.
"""
from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .topology import Node, Topology, TopologyError

__all__ = ["expand_hostlist", "parse_topology_conf", "parse_topology_yaml", "slurm_topology",
           "SwitchDef", "ROUTING"]

ROUTING = ("modelled (Slurm tree: up to the lowest common switch, the (destination index mod n)-th "
           "of several in name order; not the fabric's own routing)")


@dataclass
class SwitchDef:
    name: str
    where: str
    switches: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    link_speed: str = ""


def _natural(s: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def expand_hostlist(expr: str, where: str) -> list[str]:
    """Slurm hostlist expression -> names: ``a,b[1-3,7],r[1-2]-n[01-02]``."""
    parts, depth, cur = [], 0, ""
    for ch in expr.strip():
        depth += (ch == "[") - (ch == "]")
        if depth < 0 or depth > 1:
            raise TopologyError(f"{where}: unbalanced or nested brackets in hostlist '{expr}'")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise TopologyError(f"{where}: unclosed '[' in hostlist '{expr}'")
    parts.append(cur)
    out: list[str] = []
    for part in parts:
        part = part.strip()
        if not part:
            raise TopologyError(f"{where}: empty name in hostlist '{expr}'")
        pieces = re.split(r"\[([^\]]*)\]", part)
        choices = []
        for k, piece in enumerate(pieces):
            if k % 2 == 0:
                choices.append([piece])
                continue
            vals = []
            for rng in piece.split(","):
                m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", rng)
                if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                    raise TopologyError(f"{where}: bad range '{rng}' in hostlist '{expr}'")
                lo, hi = m.group(1), m.group(2) or m.group(1)
                vals += [str(v).zfill(len(lo)) for v in range(int(lo), int(hi) + 1)]
            choices.append(vals)
        out += ["".join(c) for c in itertools.product(*choices)]
    return out


def parse_topology_conf(path: str | os.PathLike) -> dict[str, SwitchDef]:
    """Switches of a ``topology.conf`` (topology/tree), in file order."""
    out: dict[str, SwitchDef] = {}
    for no, line in enumerate(_lines(path), 1):
        where = f"{path}:{no}"
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        kv = {}
        for tok in text.split():
            k, eq, v = tok.partition("=")
            if not eq or not v:
                raise TopologyError(f"{where}: expected Key=Value, got '{tok}' in '{text}'")
            kv[k.lower()] = v
        if "blockname" in kv:
            raise TopologyError(f"{where}: a topology/block file ('{text}'): only trees have switches")
        unknown = set(kv) - {"switchname", "switches", "nodes", "linkspeed"}
        if "switchname" not in kv or unknown:
            raise TopologyError(f"{where}: expected SwitchName= with Switches=, Nodes=, LinkSpeed= "
                                f"(unknown: {', '.join(sorted(unknown)) or 'none'}): '{text}'")
        if re.search(r"[\[\],]", kv["switchname"]):
            raise TopologyError(f"{where}: SwitchName takes one name, not a list: '{kv['switchname']}'")
        _add_switch(out, SwitchDef(kv["switchname"], where,
                                   expand_hostlist(kv["switches"], where) if "switches" in kv else [],
                                   expand_hostlist(kv["nodes"], where) if "nodes" in kv else [],
                                   kv.get("linkspeed", "")))
    if not out:
        raise TopologyError(f"{path}: no SwitchName= line (is it a Slurm topology.conf?)")
    return out


def _add_switch(out: dict[str, SwitchDef], sw: SwitchDef) -> None:
    if sw.name in out:
        raise TopologyError(f"{sw.where}: switch '{sw.name}' defined twice (first at {out[sw.name].where})")
    out[sw.name] = sw


def _lines(path: str | os.PathLike) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError as exc:
        raise TopologyError(f"{path}: {exc}") from None


# ---- a reader of the block-style YAML subset of topology.yaml, with line numbers ----

class YMap(dict):
    line = 0


class YList(list):
    line = 0


def _scalar(text: str, where: str):
    t = text.strip()
    if t[:1] in "'\"":
        if len(t) < 2 or t[-1] != t[0]:
            raise TopologyError(f"{where}: unterminated quoted string: {t}")
        return t[1:-1]
    if t.startswith("["):
        if not t.endswith("]"):
            raise TopologyError(f"{where}: unterminated flow list: {t}")
        return [_scalar(x, where) for x in t[1:-1].split(",") if x.strip()]
    if t[:1] in "{&*!|>%@`":
        raise TopologyError(f"{where}: YAML construct not supported here: {t}")
    return {"true": True, "false": False}.get(t.lower(), t)


def read_yaml(path: str | os.PathLike):
    lines = []  # [indent, text, line number]
    for no, raw in enumerate(_lines(path), 1):
        text = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not text.strip() or text.strip() in ("---", "..."):
            continue
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise TopologyError(f"{path}:{no}: tab in indentation")
        lines.append([len(text) - len(text.lstrip()), text.strip(), no])
    if not lines:
        raise TopologyError(f"{path}: empty YAML file")

    def block(i: int, indent: int):
        where = f"{path}:{lines[i][2]}"
        if lines[i][1] == "-" or lines[i][1].startswith("- "):
            seq = YList()
            seq.line = lines[i][2]
            while i < len(lines) and lines[i][0] == indent and (lines[i][1] == "-" or lines[i][1].startswith("- ")):
                rest = lines[i][1][1:].lstrip()
                if rest:  # the item starts on this line: read it as a block at its own column
                    lines[i] = [indent + len(lines[i][1]) - len(rest), rest, lines[i][2]]
                    val, i = block(i, lines[i][0])
                elif i + 1 < len(lines) and lines[i + 1][0] > indent:
                    val, i = block(i + 1, lines[i + 1][0])
                else:
                    val, i = None, i + 1
                seq.append(val)
            return seq, i
        m = re.match(r"^([^:'\"\[\]{}]+?):(?:\s+(.*))?$", lines[i][1])
        if not m:
            return _scalar(lines[i][1], where), i + 1
        mp = YMap()
        mp.line = lines[i][2]
        while i < len(lines) and lines[i][0] == indent:
            where = f"{path}:{lines[i][2]}"
            m = re.match(r"^([^:'\"\[\]{}]+?):(?:\s+(.*))?$", lines[i][1])
            if not m:
                raise TopologyError(f"{where}: expected 'key: value', got '{lines[i][1]}'")
            key, rest = m.group(1).strip(), m.group(2)
            if key in mp:
                raise TopologyError(f"{where}: key '{key}' given twice")
            if rest:
                mp[key], i = _scalar(rest, where), i + 1
            elif i + 1 < len(lines) and (lines[i + 1][0] > indent or
                                         (lines[i + 1][0] == indent and lines[i + 1][1].startswith("-"))):
                mp[key], i = block(i + 1, lines[i + 1][0])
            else:
                mp[key], i = None, i + 1
        return mp, i

    val, i = block(0, lines[0][0])
    if i < len(lines):
        raise TopologyError(f"{path}:{lines[i][2]}: unexpected indentation: '{lines[i][1]}'")
    return val


def parse_topology_yaml(path: str | os.PathLike,
                        topology: str | None = None) -> tuple[str, dict[str, SwitchDef]]:
    """Name and switches of the chosen tree topology of a ``topology.yaml`` (see module docstring)."""
    doc = read_yaml(path)
    if not isinstance(doc, list) or not all(isinstance(t, dict) for t in doc):
        raise TopologyError(f"{path}:{getattr(doc, 'line', 1)}: expected a list of topologies "
                            "('- topology: NAME' items)")
    for t in doc:
        if "topology" not in t:
            raise TopologyError(f"{path}:{t.line}: a topology without 'topology: NAME'")
    trees = [t for t in doc if isinstance(t.get("tree"), dict)]
    if topology is not None:
        chosen = [t for t in doc if t["topology"] == topology]
        if not chosen or "tree" not in chosen[0]:
            raise TopologyError(f"{path}: no tree topology named '{topology}' (trees: "
                                f"{', '.join(t['topology'] for t in trees) or 'none'})")
    else:
        chosen = [t for t in trees if t.get("cluster_default") is True] or trees
        if not chosen:
            raise TopologyError(f"{path}: no tree topology (block and flat topologies have no switches)")
        if len(chosen) > 1 and chosen is trees:
            raise TopologyError(f"{path}: several tree topologies and none is cluster_default: "
                                f"choose one of {', '.join(t['topology'] for t in trees)}")
    tree = chosen[0].get("tree")
    switches = tree.get("switches") if isinstance(tree, dict) else None
    if not isinstance(switches, list) or not switches:
        raise TopologyError(f"{path}:{getattr(tree, 'line', chosen[0].line)}: tree needs a "
                            "non-empty 'switches' list")
    out: dict[str, SwitchDef] = {}
    for sw in switches:
        where = f"{path}:{getattr(sw, 'line', switches.line)}"
        if not isinstance(sw, dict) or "switch" not in sw or set(sw) - {"switch", "children", "nodes", "link_speed"}:
            raise TopologyError(f"{where}: expected 'switch: NAME' with children:, nodes:, link_speed: "
                                f"(got {dict(sw) if isinstance(sw, dict) else sw!r})")

        def names(key: str) -> list[str]:
            v = sw.get(key)
            v = ",".join(map(str, v)) if isinstance(v, list) else v
            return expand_hostlist(str(v), where) if v not in (None, "") else []
        _add_switch(out, SwitchDef(str(sw["switch"]), where, names("children"), names("nodes"),
                                   str(sw.get("link_speed") or "")))
    return str(chosen[0]["topology"]), out


def slurm_topology(path: str | os.PathLike, *, topology: str | None = None,
                   name: str | None = None) -> Topology:
    """Topology of a Slurm ``topology.conf`` or ``topology.yaml`` (by suffix: .yaml/.yml)."""
    p = Path(path)
    yaml = p.suffix.lower() in (".yaml", ".yml")
    chosen, sws = parse_topology_yaml(p, topology) if yaml else ("", parse_topology_conf(p))
    hosts = sorted({n for s in sws.values() for n in s.nodes}, key=_natural)
    for s in sws.values():
        for c in s.switches:
            if c not in sws:
                raise TopologyError(f"{s.where}: switch '{s.name}' lists switch '{c}', which is never defined")
        for c in s.switches + s.nodes:
            if (s.switches + s.nodes).count(c) > 1:
                raise TopologyError(f"{s.where}: switch '{s.name}' lists '{c}' twice")
        if s.name in hosts:
            raise TopologyError(f"{s.where}: '{s.name}' is both a switch and a node")
    if not hosts:
        raise TopologyError(f"{path}: no Nodes= in any switch")
    level: dict[str, int] = {h: 0 for h in hosts}

    def lv(s: str, seen: tuple) -> int:
        if s in seen:
            raise TopologyError(f"{sws[s].where}: switch cycle {' -> '.join(seen + (s,))}")
        if s not in level:
            sw = sws[s]
            level[s] = 1 + max([0] + [lv(c, seen + (s,)) for c in sw.switches])
        return level[s]
    for s in sws:
        lv(s, ())
    parents: dict[str, list[str]] = {x: [] for x in level}
    for s in sws.values():
        for c in s.switches + s.nodes:
            parents[c].append(s.name)
    anc: dict[str, set[str]] = {}

    def ancestors(x: str) -> set[str]:
        if x not in anc:
            anc[x] = set(parents[x]).union(*[ancestors(p) for p in parents[x]])
        return anc[x]
    # two hosts share a switch iff they share a root switch: compare root sets, not host pairs
    roots_of: dict[frozenset, str] = {}
    for h in hosts:
        roots_of.setdefault(frozenset(r for r in ancestors(h) if not parents[r]), h)
    for (ra, a), (rb, b) in itertools.combinations(roots_of.items(), 2):
        if not ra & rb:
            raise TopologyError(f"{path}: nodes '{a}' and '{b}' have no common switch (separate trees "
                                f"under {', '.join(sorted(ra))} and {', '.join(sorted(rb))})")

    t = Topology(name or (f"{p.name}:{chosen}" if yaml else p.name), "SLURM_TREE", {}, str(p))
    for i, h in enumerate(hosts):
        t.add_node(Node(h, "host", 0, i))
    ordered = sorted(sws, key=lambda s: (level[s], _natural(s)))
    pos: dict[int, int] = {}
    for s in ordered:
        t.add_node(Node(s, "switch", level[s], pos.setdefault(level[s], 0)))
        pos[level[s]] += 1
    for s in ordered:
        for c in sws[s].switches + sws[s].nodes:
            t.add_link(c, s, bandwidth=0.0, latency=0.0, kind="up", sg_name=f"{c} -> {s}")
            t.add_link(s, c, bandwidth=0.0, latency=0.0, kind="down", sg_name=f"{s} -> {c}")
    children = {s: sorted(sws[s].switches + sws[s].nodes, key=_natural) for s in sws}
    for x in parents:
        parents[x].sort(key=_natural)

    def route(i: int, j: int) -> list[str]:
        if i == j:
            return []
        a, b = hosts[i], hosts[j]
        common = ancestors(a) & ancestors(b)
        low = min(level[s] for s in common)  # common is never empty: checked above
        tops = sorted((s for s in common if level[s] == low), key=_natural)
        top = tops[j % len(tops)]
        out, cur = [], a
        while cur != top:
            nxt = next(p for p in parents[cur] if p == top or top in ancestors(p))
            out.append(f"{cur} -> {nxt}")
            cur = nxt
        while cur != b:
            nxt = next(c for c in children[cur] if c == b or c in ancestors(b))
            out.append(f"{cur} -> {nxt}")
            cur = nxt
        return out

    t.params = {"routing": ROUTING, "format": "topology.yaml" if yaml else "topology.conf",
                "link_speed": {s: sws[s].link_speed for s in sws if sws[s].link_speed}}
    if yaml:
        t.params["topology"] = chosen
    return t.seal(route)
