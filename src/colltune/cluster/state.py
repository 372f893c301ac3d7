"""The state of an emulated cluster: what `up` created, in one small JSON file.

``/run/colltune/cluster-<name>.json`` (the directory is ``$COLLTUNE_RUN_DIR`` if
set) lists every object `up` made: bridge, per host its network namespace,
persisted UTS namespace file, veth, address, /etc/netns files; and the
ssh stand-in script. It is written *before* the objects are created and updated
as they are, so `down` can remove what a partial `up` left. /run is a tmpfs: a
reboot forgets the state together with the namespaces it describes.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field

from ..errors import BackendError

FORMAT, VERSION = "colltune.cluster", 1
DEFAULT_NAME = "ct"
RUN_DIR_ENV = "COLLTUNE_RUN_DIR"
DEFAULT_RUN_DIR = "/run/colltune"
# Bridge and veth names derive from the cluster name; Linux limits interface
# names to 15 characters ("<name>-br", "<name>-v<i>" with up to 3 digits).
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,8}$")


class ClusterError(BackendError):
    """The emulated cluster cannot be created, found or used (says why and what to do)."""


@dataclass
class Host:
    name: str          # host name (UTS namespace) = network namespace name
    ip: str
    veth: str          # the bridge side of the host's eth0
    uts: str           # bind-mounted nsfs file of the host's UTS namespace
    iface: str = "eth0"


@dataclass
class Cluster:
    name: str
    subnet: str
    bridge: str
    bridge_ip: str
    state_dir: str
    agent: str                                   # ssh stand-in (see agent.py)
    hosts: list[Host] = field(default_factory=list)
    bandwidth: str | None = None
    latency: str | None = None
    delay_pid: int | None = None                 # the delay line's process (see delay.py)
    created: float = field(default_factory=time.time)
    complete: bool = False                       # False while `up` runs or after it failed

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if name in (h.name, h.ip):
                return h
        raise ClusterError(f"cluster {self.name!r} has no host {name!r}; hosts: "
                           f"{', '.join(h.name for h in self.hosts)}")

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict, where: str) -> "Cluster":
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ClusterError(f"{where}: not a {FORMAT} version {VERSION} state file")
        data = {k: v for k, v in data.items() if k not in ("format", "version")}
        try:
            data["hosts"] = [Host(**h) for h in data.get("hosts", [])]
            return cls(**data)
        except TypeError as exc:
            raise ClusterError(f"{where}: malformed cluster state: {exc}") from None


def run_dir() -> str:
    return os.environ.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR


def state_path(name: str) -> str:
    return os.path.join(run_dir(), f"cluster-{name}.json")


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise ClusterError(f"cluster name {name!r}: use 1-9 lower-case letters/digits starting "
                           f"with a letter (interface names derive from it)")
    return name


def save(cluster: Cluster) -> None:
    os.makedirs(run_dir(), exist_ok=True)
    path = state_path(cluster.name)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(cluster.to_json(), fh, indent=1)
    os.replace(tmp, path)


def load(name: str) -> Cluster | None:
    """The recorded cluster, or None if there is no state file."""
    path = state_path(check_name(name))
    try:
        with open(path) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise ClusterError(f"{path}: not valid JSON (line {exc.lineno}): {exc.msg}; "
                           f"`colltune cluster down --name {name}` removes it") from None
    return Cluster.from_json(data, path)


def names() -> list[str]:
    """Clusters with a state file."""
    try:
        entries = os.listdir(run_dir())
    except FileNotFoundError:
        return []
    return sorted(e[len("cluster-"):-len(".json")] for e in entries
                  if e.startswith("cluster-") and e.endswith(".json"))


def forget(name: str) -> None:
    try:
        os.remove(state_path(name))
    except FileNotFoundError:
        pass
