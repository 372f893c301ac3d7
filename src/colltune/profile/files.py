"""Versioned output files of a traffic profile: traffic.json and three CSVs.

    paths = write_traffic(prof, topo, out_dir)     # topo None: no link loads

traffic.json (schema "colltune-traffic/1") holds everything; rank_matrix.csv, node_matrix.csv
and links.csv are its tables in long form. Field by field: docs/profile-files.md. A change
that removes or renames a field, or changes a meaning, bumps the version.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Any

import numpy as np

from .counts import TrafficProfile
from .loads import link_loads
from .topology import Topology

SCHEMA = "colltune-traffic/1"
ALL = "all"          # the kind column's value for every kind together


def _units(prof: TrafficProfile):
    """(region, kind) pairs written: each region with every kind together (ALL) and apart."""
    for region in prof.regions():
        yield region, ALL
        for kind in prof.kinds(region):
            yield region, kind


def _placed(prof: TrafficProfile, topo: Topology | None, notes: list[str]):
    """Host matrix restricted to hosts the topology knows (others reported, skipped)."""
    def matrix(region, kind):
        B, M, hosts = prof.host_matrix(region, None if kind == ALL else kind)
        if topo is None:
            return B, M, hosts
        known = set(topo.hosts)
        keep = [i for i, h in enumerate(hosts) if h in known]
        return B[np.ix_(keep, keep)], M[np.ix_(keep, keep)], [hosts[i] for i in keep]
    if topo is not None:
        known = set(topo.hosts)
        absent = sorted({h for h in prof.hosts if h and h not in known})
        if absent:
            notes.append(f"{len(absent)} host(s) of the profile are not in the topology "
                         f"'{getattr(topo, 'name', '')}' and are left out of the link loads: "
                         + ", ".join(absent[:10]) + (" ..." if len(absent) > 10 else ""))
    return matrix


def traffic_document(prof: TrafficProfile, topo: Topology | None = None) -> dict[str, Any]:
    """The traffic.json document (a dict ready for json.dump)."""
    notes = list(prof.notes)
    host_matrix = _placed(prof, topo, notes)
    regions: dict[str, Any] = {}
    for region, kind in _units(prof):
        c = prof.pairs(region, None if kind == ALL else kind)
        B, M, hosts = host_matrix(region, kind)
        ii, jj = np.nonzero(B | M)
        unit: dict[str, Any] = {
            "visibility": prof.visibility(region, None if kind == ALL else kind),
            "bytes": int(c.bytes.sum()), "messages": int(c.messages.sum()),
            "sources": prof.sources(region, None if kind == ALL else kind),
            "ranks": [[int(s), int(d), int(b), int(m)]
                      for s, d, b, m in zip(c.src, c.dst, c.bytes, c.messages)],
            "nodes": {"hosts": hosts, "pairs": [[int(i), int(j), int(B[i, j]), int(M[i, j])]
                                                for i, j in zip(ii, jj)]},
        }
        calls = prof.library.get((region, kind))
        if calls:
            unit["library_calls"] = calls["calls"]
        if topo is not None:
            ld = link_loads(topo, B, M, hosts=hosts)
            top = ld.most_loaded()
            unit["links"] = [{"id": r["id"], "src": r["src"], "dst": r["dst"], "kind": r["kind"],
                              "direction": _direction(r), "sg_name": r["sg_name"],
                              "bytes": int(r["bytes"]), "messages": int(r["messages"])}
                             for r in ld.rows()]
            unit["hop_bytes"] = int(ld.hop_bytes)
            unit["most_loaded"] = None if top is None else {
                "id": top[0].id, "bytes": int(top[1]), "messages": int(top[2])}
        regions.setdefault(region, {})[kind] = unit
    return {"schema": SCHEMA, "meta": prof.meta, "size": prof.size, "hosts": prof.hosts,
            "missing": prof.missing, "notes": notes,
            "topology": None if topo is None else getattr(topo, "name", ""),
            "regions": prof.regions(), "kinds": prof.kinds(), "traffic": regions}


def _direction(row: dict) -> str:
    return f"{row['src']} -> {row['dst']}" if row["directed"] else "both"


def write_traffic(prof: TrafficProfile, topo: Topology | None, out_dir: str | os.PathLike) -> list[str]:
    """Write traffic.json, rank_matrix.csv, node_matrix.csv and (with a topology) links.csv
    into out_dir; returns their paths."""
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    doc = traffic_document(prof, topo)
    paths = [os.path.join(out_dir, "traffic.json")]
    _atomic(paths[0], lambda f: json.dump(doc, f, indent=1))
    rank_rows, node_rows, link_rows = [], [], []
    for region, kinds in doc["traffic"].items():
        for kind, u in kinds.items():
            vis = u["visibility"]
            rank_rows += [[region, kind, s, d, b, m, vis] for s, d, b, m in u["ranks"]]
            hosts = u["nodes"]["hosts"]
            node_rows += [[region, kind, hosts[i], hosts[j], b, m, vis] for i, j, b, m in u["nodes"]["pairs"]]
            link_rows += [[region, kind, r["id"], r["src"], r["dst"], r["kind"], r["direction"],
                           r["sg_name"], r["bytes"], r["messages"], vis] for r in u.get("links", [])]
    head = ["schema", SCHEMA]
    tables = [("rank_matrix.csv", ["region", "kind", "sender", "receiver", "bytes", "messages", "visibility"], rank_rows),
              ("node_matrix.csv", ["region", "kind", "sender_host", "receiver_host", "bytes", "messages", "visibility"], node_rows)]
    if topo is not None:
        tables.append(("links.csv", ["region", "kind", "link", "from", "to", "link_kind", "direction",
                                     "sg_name", "bytes", "messages", "visibility"], link_rows))
    for name, cols, rows in tables:
        path = os.path.join(out_dir, name)
        def dump(f, cols=cols, rows=rows):
            w = csv.writer(f, lineterminator="\n")
            w.writerow([f"# {head[0]}: {head[1]}"])
            w.writerow(cols)
            w.writerows(rows)
        _atomic(path, dump)
        paths.append(path)
    return paths


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of one of these CSVs as dicts (the '# schema' line checked and skipped)."""
    with open(path, encoding="utf-8", newline="") as f:
        first = f.readline().strip()
        if first != f"# schema: {SCHEMA}":
            raise ValueError(f"{path}:1: expected '# schema: {SCHEMA}', got '{first[:60]}'")
        return list(csv.DictReader(f))


def _atomic(path: str, write) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)
    os.replace(tmp, path)
