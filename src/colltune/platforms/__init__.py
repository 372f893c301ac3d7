"""Simulated platforms for the SimGrid SMPI backend (stdlib only).

A platform is a SimGrid XML file (version 4.1, ``<cluster>`` elements) plus an optional
sidecar JSON of the same basename (name, description, nodes, cores_per_node, topology,
smpi_config, charge_rates, sources). Bundled: ``small``, ``fattree64x12``, ``dragonfly``
(see docs/platforms.md for every parameter and its source).

Host order: hosts are listed cluster by cluster in document order, and inside a cluster
in the order of its ``radical`` list ("0-63" gives node-0, node-1, ..., node-63: integer
order, not lexicographic). That is SimGrid's position of the host in the topology, and the
order used for block placement. ``leaf_of(host)`` is computed from that position:
FLAT -> "<cluster>/switch"; FAT_TREE -> "<cluster>/leaf-<pos // downlinks of level 1>";
DRAGONFLY -> "<cluster>/group-<pos // (chassis * routers * nodes per router)>";
TORUS -> "<cluster>"; plain ``<host>`` elements -> id of the enclosing zone.

Groups (for placement): ``groups()`` lists the leaf units in host order, each with its
hosts. Two launches placed on disjoint groups share no leaf switch (fat-tree) or
dragonfly group; ``hostfile_lines(nodes, ppn, hosts=...)`` places a launch on given hosts.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import units

__all__ = ["Platform", "PlatformError", "available", "load", "DATA_DIR"]

DATA_DIR = Path(__file__).resolve().parent / "data"
SIDECAR_KEYS = ("name", "description", "nodes", "cores_per_node", "topology", "smpi_config",
                "smpi_config_notes", "charge_rates", "sources")
# Sections of SimGrid's --cfg keys a sidecar may set (SimGrid 3.32, "Configuring SimGrid"):
# SMPI's own and the network model's (benchmarks/topology_twin.py turns
# network/crosstraffic off), the solver's precision.
CFG_SECTIONS = ("smpi", "network", "surf", "maxmin")
CHARGE_RATE_KEYS = ("host_speed_flops", "reduction_bytes_per_s", "memcpy_bytes_per_s",
                    "node_memcpy_bytes_per_s")
# The rates (bytes/s) colltune's algorithms are charged at for their reductions and copies
# on a platform whose sidecar gives none: the bundled platforms' (Haswell-EP STREAM
# estimates, data/small.json), the same defaults as native/algorithms/charge.c.
DEFAULT_CHARGE_RATES = {"reduction_bytes_per_s": 4e9, "memcpy_bytes_per_s": 8e9}
# the environment variables libcolltune reads them from (charge.c)
CHARGE_ENV = {"reduction_bytes_per_s": "COLLTUNE_REDUCE_RATE", "memcpy_bytes_per_s": "COLLTUNE_COPY_RATE"}
_RAD = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


class PlatformError(Exception):
    """A platform cannot be found, parsed or used as asked."""


def cfg_args(smpi_config: dict) -> list[str]:
    """smpirun's --cfg=key:value arguments of SMPI settings (a platform's smpi_config)."""
    return [f"--cfg={k}:{v}" for k, v in smpi_config.items()]


def names_a_platform(value: str) -> bool:
    """Does `value` name a simulated platform (a bundled name, or what load() reads as
    a path to an XML file)? (The netns backend's platform setting names a cluster.)"""
    return value in available() or value.endswith(".xml") or os.sep in value


def available() -> list[str]:
    """Names of the bundled platforms (XML files in the data folder), sorted."""
    return sorted(p.stem for p in DATA_DIR.glob("*.xml"))


@dataclass(frozen=True)
class Platform:
    name: str
    xml_path: str
    hosts: list[str]
    cores_per_node: int
    smpi_config: dict[str, str]
    charge_rates: dict
    provenance: dict
    topology: dict
    _leaves: dict = field(default_factory=dict, repr=False, compare=False)

    def __hash__(self) -> int:  # fields hold lists/dicts: hash by identity of the platform files
        return hash((self.name, self.xml_path, self.provenance.get("sha256")))

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    def hostfile_lines(self, nodes: int, ppn: int, hosts: list[str] | None = None) -> list[str]:
        """Block placement: ranks r*ppn .. r*ppn+ppn-1 on host r, for the first `nodes` hosts
        (or, given `hosts`, on those hosts in that order: a placed launch)."""
        for what, val, top in (("nodes", nodes, self.nodes), ("ppn", ppn, self.cores_per_node)):
            if isinstance(val, bool) or not isinstance(val, int):
                raise PlatformError(f"{what} must be an integer, got {val!r}")
            if val < 1:
                raise PlatformError(f"{what} must be >= 1, got {val}")
            if val > top:
                limit = "nodes" if what == "nodes" else "cores per node"
                raise PlatformError(f"platform '{self.name}' has {top} {limit}, {what}={val} does not fit")
        if hosts is None:
            return [h for h in self.hosts[:nodes] for _ in range(ppn)]
        unknown = [h for h in hosts if h not in self._leaves]
        if unknown:
            raise PlatformError(f"host '{unknown[0]}' is not in platform '{self.name}'")
        if len(hosts) != nodes or len(set(hosts)) != nodes:
            raise PlatformError(f"placement needs {nodes} distinct hosts, got {list(hosts)}")
        return [h for h in hosts for _ in range(ppn)]

    def write_hostfile(self, nodes: int, ppn: int, path: str | os.PathLike,
                       hosts: list[str] | None = None) -> str:
        """Write hostfile_lines(nodes, ppn, hosts), one host per rank; return the absolute path."""
        lines = self.hostfile_lines(nodes, ppn, hosts)
        path = os.path.abspath(os.fspath(path))
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def smpirun_cfg_args(self) -> list[str]:
        """The platform's --cfg=key:value arguments for smpirun (part of its provenance)."""
        return cfg_args(self.smpi_config)

    def leaf_of(self, host: str) -> str:
        """Leaf switch / dragonfly group / single switch the host hangs off (module docstring)."""
        try:
            return self._leaves[host]
        except KeyError:
            raise PlatformError(f"host '{host}' is not in platform '{self.name}'") from None

    def groups(self) -> dict[str, list[str]]:
        """Leaf units (leaf switch, dragonfly group, single switch, zone) -> their hosts,
        both in host order. The unit of topology-aware placement (colltune.placement)."""
        out: dict[str, list[str]] = {}
        for h in self.hosts:
            out.setdefault(self._leaves[h], []).append(h)
        return out

    def summary(self) -> dict[str, Any]:
        """What a campaign on this platform simulates (`colltune info`): the machine, the
        SMPI settings and the charge rates that go with every launch, and where each comes
        from (a platform without a sidecar: SMPI's defaults and colltune's default rates)."""
        sidecar = "sidecar_sha256" in self.provenance
        return {"name": self.name, "xml": self.xml_path, "sha256": self.provenance.get("sha256"),
                "sidecar": str(Path(self.xml_path).with_suffix(".json")) if sidecar else None,
                "nodes": self.nodes, "cores_per_node": self.cores_per_node,
                "topology": self.topology.get("kind"), "leaf_units": len(self.groups()),
                "smpirun_args": self.smpirun_cfg_args(), "charge_env": self.charge_env(),
                "charge_rates_from": ("the sidecar" if any(self.charge_rates.get(k) for k in CHARGE_ENV)
                                      else "colltune's defaults (DEFAULT_CHARGE_RATES)")}

    def charge_env(self, environ: dict | None = None) -> dict[str, str]:
        """COLLTUNE_REDUCE_RATE / COLLTUNE_COPY_RATE for a launch on this platform: the
        sidecar's charge_rates, else DEFAULT_CHARGE_RATES; a value already in `environ`
        (default os.environ: the user's or a benchmark's, e.g. 0 to charge nothing) wins.
        What a point was charged at is part of how it was measured (its run's settings)."""
        environ = os.environ if environ is None else environ
        out = {}
        for key, var in CHARGE_ENV.items():
            given = environ.get(var)
            out[var] = given if given else repr(float(self.charge_rates.get(key) or DEFAULT_CHARGE_RATES[key]))
        return out

    def flops_to_charge(self, kind: str, nbytes: float) -> float:
        """Flops to pass to smpi_execute_flops() to charge `nbytes` of `kind` work
        ('reduction' or 'memcpy') at this platform's documented rates."""
        key = {"reduction": "reduction_bytes_per_s", "memcpy": "memcpy_bytes_per_s"}.get(kind)
        rate, speed = self.charge_rates.get(key or ""), self.charge_rates.get("host_speed_flops")
        if key is None or not rate or not speed:
            raise PlatformError(f"platform '{self.name}' has no charge rate for '{kind}'")
        return float(nbytes) / float(rate) * float(speed)


def load(name_or_path: str | os.PathLike) -> Platform:
    """Load a bundled platform by name, or a user XML file (with its sidecar JSON if present)."""
    s = os.fspath(name_or_path)
    names = available()
    if s in names:
        xml = DATA_DIR / f"{s}.xml"
    elif os.path.isfile(s):
        xml = Path(s).resolve()
    elif names_a_platform(s):
        raise PlatformError(f"platform file '{s}' does not exist (bundled platforms: {', '.join(names)})")
    else:
        raise PlatformError(f"unknown platform '{s}'; available: {', '.join(names)} "
                            "(or give the path to a SimGrid platform XML file)")
    return _load_xml(xml)


def _load_xml(xml: Path) -> Platform:
    data = xml.read_bytes()
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise PlatformError(f"{xml}: malformed XML: {exc}") from None
    if root.tag != "platform":
        raise PlatformError(f"{xml}: root element is <{root.tag}>, expected <platform>")
    _check_units(root, xml)
    hosts, cores, leaves, clusters = _read_hosts(root, xml)
    sidecar_path = xml.with_suffix(".json")
    side: dict[str, Any] = {}
    if sidecar_path.is_file():
        try:
            side = json.loads(sidecar_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise PlatformError(f"{sidecar_path}: malformed JSON: {exc}") from None
        if not isinstance(side, dict):
            raise PlatformError(f"{sidecar_path}: expected a JSON object")
        for key, actual in (("nodes", len(hosts)), ("cores_per_node", cores)):
            if key in side and side[key] != actual:
                raise PlatformError(f"{sidecar_path}: {key}={side[key]!r} but {xml.name} describes {actual}")
    _check_sidecar(side, sidecar_path)
    cfg = side.get("smpi_config") or {}
    kind = clusters[0]["kind"] if len(clusters) == 1 else "MULTI"
    topology = dict(side.get("topology") or {})
    if topology.get("kind", kind) != kind:
        raise PlatformError(f"{sidecar_path}: topology kind {topology['kind']!r} but {xml.name} describes {kind}")
    # sidecar descriptions first, then what the XML says (authoritative for the numbers)
    topology.update(clusters[0] if len(clusters) == 1 else {})
    topology.update(kind=kind, clusters=clusters)
    provenance = dict(side)
    provenance.update({"xml_path": str(xml), "sha256": hashlib.sha256(data).hexdigest()})
    if side:
        provenance["sidecar_sha256"] = hashlib.sha256(sidecar_path.read_bytes()).hexdigest()
    return Platform(name=str(side.get("name") or xml.stem), xml_path=str(xml), hosts=hosts,
                    cores_per_node=cores, smpi_config={str(k): str(v) for k, v in cfg.items()},
                    charge_rates=dict(side.get("charge_rates") or {}), provenance=provenance,
                    topology=topology, _leaves=leaves)


# attribute -> what it holds (platforms.units): a value SimGrid cannot read makes every
# smpirun of the platform fail ("unknown unit"), so it is refused when the platform
# loads, not recorded as a crash of every algorithm measured on it
_UNIT_OF = {"bw": "bandwidth", "bandwidth": "bandwidth", "bb_bw": "bandwidth", "loopback_bw": "bandwidth",
            "limiter_link": "bandwidth", "lat": "time", "latency": "time", "bb_lat": "time",
            "loopback_lat": "time", "speed": "speed"}
_EXAMPLE = {"bandwidth": "25GBps or 100Gbps", "time": "1us or 150ns", "speed": "40Gf"}


def _check_units(root: ET.Element, xml: Path) -> None:
    parse = {"bandwidth": units.parse_bandwidth, "time": units.parse_time, "speed": units.parse_speed}
    for el in root.iter():
        for attr, kind in _UNIT_OF.items():
            text = el.get(attr)
            for value in (text.split(",") if kind == "speed" else [text]) if text is not None else ():
                try:                                      # speed: one value per pstate
                    parse[kind](value, f"{attr}={text!r}")
                except units.UnitError as exc:
                    ident = el.get("id") or el.get("prefix") or ""
                    raise PlatformError(f"{xml}: <{el.tag}{f' id={ident!r}' if ident else ''}> {exc}: "
                                        f"SimGrid reads a {kind} such as {_EXAMPLE[kind]}") from None


def _check_sidecar(side: dict, path: Path) -> None:
    """A sidecar's keys and the types of its settings: a misspelt key would otherwise
    leave SMPI's defaults (or the default charge rates) in force without a word."""
    unknown = sorted(set(side) - set(SIDECAR_KEYS))
    if unknown:
        raise PlatformError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; "
                            f"a platform sidecar has {', '.join(SIDECAR_KEYS)}")
    cfg = side.get("smpi_config") or {}
    if not isinstance(cfg, dict):
        raise PlatformError(f"{path}: smpi_config must be an object of --cfg settings")
    for k, v in cfg.items():
        section, _, name = k.partition("/")
        if not isinstance(v, str) or section not in CFG_SECTIONS or not name:
            raise PlatformError(f"{path}: smpi_config {k!r}: {v!r}: expected a SimGrid setting "
                                f"SECTION/NAME ({', '.join(s + '/' for s in CFG_SECTIONS)}) with a "
                                f"string value, as smpirun's --cfg=SECTION/NAME:VALUE takes it")
    rates = side.get("charge_rates") or {}
    if not isinstance(rates, dict):
        raise PlatformError(f"{path}: charge_rates must be an object")
    for k, v in rates.items():
        if k in ("how_to_charge", "sources"):
            continue
        if k not in CHARGE_RATE_KEYS:
            raise PlatformError(f"{path}: charge_rates: unknown key {k!r}; expected "
                                f"{', '.join(CHARGE_RATE_KEYS)} (and how_to_charge, sources)")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise PlatformError(f"{path}: charge_rates {k!r}: {v!r}: expected a positive number")


def _radicals(text: str, where: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        m = _RAD.match(part)
        if not m:
            raise PlatformError(f"{where}: bad radical piece '{part}' in '{text}' (use e.g. '0-63' or '0-3,8-11')")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if hi < lo:
            raise PlatformError(f"{where}: radical range '{part}' is decreasing")
        out.extend(range(lo, hi + 1))
    return out


def _ints(text: str, sep: str, where: str) -> list[int]:
    try:
        return [int(x) for x in text.split(sep)]
    except ValueError:
        raise PlatformError(f"{where}: cannot read integers from '{text}'") from None


def _cluster_leaves(c: ET.Element, names: list[str], where: str) -> dict:
    """Topology summary of one cluster, with its leaf function applied to every host."""
    cid, kind = c.get("id", "cluster"), (c.get("topology") or "FLAT").upper()
    params = c.get("topo_parameters", "")
    info: dict[str, Any] = {"id": cid, "kind": kind, "topo_parameters": params, "host_count": len(names)}
    for key in ("bw", "lat", "loopback_bw", "loopback_lat", "bb_bw", "bb_lat", "speed", "sharing_policy"):
        if c.get(key) is not None:
            info[key] = c.get(key)
    if kind == "FAT_TREE":
        parts = params.split(";")
        if len(parts) != 4:
            raise PlatformError(f"{where}: FAT_TREE topo_parameters '{params}' needs 4 ';'-separated fields")
        down = _ints(parts[1], ",", where)
        prod = 1
        for d in down:
            prod *= d
        if prod != len(names):
            raise PlatformError(f"{where}: FAT_TREE downlinks {down} give {prod} hosts, radical gives {len(names)}")
        size, label = down[0], "leaf"
    elif kind == "DRAGONFLY":
        try:
            (g, _), (ch, _), (r, _), (n,) = [_ints(p, ",", where) for p in params.split(";")]
        except ValueError:
            raise PlatformError(f"{where}: DRAGONFLY topo_parameters '{params}' must be "
                                "'groups,blue;chassis,black;routers,green;nodes'") from None
        if g * ch * r * n != len(names):
            raise PlatformError(f"{where}: DRAGONFLY gives {g * ch * r * n} hosts, radical gives {len(names)}")
        if g > r:
            raise PlatformError(f"{where}: DRAGONFLY needs groups ({g}) <= routers per chassis ({r})")
        size, label = ch * r * n, "group"
        info.update(groups=g, chassis_per_group=ch, routers_per_chassis=r, nodes_per_router=n)
    elif kind == "FLAT":
        size, label = len(names), "switch"
    else:  # TORUS and anything else: the whole cluster is one unit
        size, label = len(names), ""
    info.update(leaf_kind=label or "cluster", leaf_size=size, leaves=-(-len(names) // size))
    info["leaf_of"] = {h: (f"{cid}/{label}-{i // size}" if label in ("leaf", "group")
                           else f"{cid}/{label}" if label else cid) for i, h in enumerate(names)}
    return info


def _read_hosts(root: ET.Element, xml: Path):
    hosts: list[str] = []
    cores: list[int] = []
    leaves: dict[str, str] = {}
    clusters: list[dict] = []

    def walk(el: ET.Element, zone: str) -> None:
        for child in el:
            if child.tag == "cluster":
                cid = child.get("id", "?")
                where = f"{xml}: <cluster id='{cid}'>"
                for attr in ("prefix", "radical"):
                    if child.get(attr) is None:
                        raise PlatformError(f"{where} has no '{attr}' attribute")
                names = [f"{child.get('prefix')}{i}{child.get('suffix', '')}"
                         for i in _radicals(child.get("radical", ""), where)]
                cores.append(_core(child.get("core", "1"), where))
                info = _cluster_leaves(child, names, where)
                leaves.update(info.pop("leaf_of"))
                info["cores"] = cores[-1]
                clusters.append(info)
                hosts.extend(names)
            elif child.tag == "host":
                hid = child.get("id")
                if not hid:
                    raise PlatformError(f"{xml}: <host> without id")
                cores.append(_core(child.get("core", "1"), f"{xml}: <host id='{hid}'>"))
                hosts.append(hid)
                leaves[hid] = zone
                if not clusters or clusters[-1].get("id") != zone or clusters[-1]["kind"] != "HOSTS":
                    clusters.append({"id": zone, "kind": "HOSTS", "host_count": 0, "leaf_kind": "zone"})
                clusters[-1]["host_count"] += 1
            elif child.tag in ("zone", "AS"):
                walk(child, child.get("id", zone))

    walk(root, root.get("id", "platform"))
    if not hosts:
        raise PlatformError(f"{xml}: no <cluster> (or <host>) element found")
    seen: set[str] = set()
    dup = sorted({h for h in hosts if h in seen or seen.add(h)})
    if dup:
        raise PlatformError(f"{xml}: duplicate host names: {', '.join(dup[:5])}")
    return hosts, min(cores), leaves, clusters


def _core(text: str, where: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise PlatformError(f"{where}: core='{text}' is not an integer") from None
    if n < 1:
        raise PlatformError(f"{where}: core='{text}' must be >= 1")
    return n
