"""The provider interface."""
from __future__ import annotations

from dataclasses import dataclass, field

# The collectives colltune benchmarks, in display order.
COLLECTIVES = ("bcast", "reduce", "allreduce", "allgather", "gather", "scatter",
               "alltoall", "reduce_scatter_block", "barrier")

ALGORITHM, SELECTOR = "algorithm", "selector"


@dataclass(frozen=True)
class Algorithm:
    provider: str
    collective: str
    name: str
    kind: str = ALGORITHM          # ALGORITHM, or SELECTOR (a library's decision logic)
    params: tuple = ()             # (key, value) pairs, hashable
    description: str = ""

    @property
    def label(self) -> str:
        if not self.params:
            return self.name
        return self.name + "[" + ",".join(f"{k}={v}" for k, v in self.params) + "]"


@dataclass
class LaunchMods:
    """How a launch is changed to force an algorithm."""
    launcher_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # run this program instead of the backend's bench (same arguments), e.g. the
    # bench linked with colltune's interposer; None: the backend's own bench
    program: str | None = None


class Provider:
    name = "?"
    description = ""
    backends: tuple[str, ...] = ()
    # Selectors a tuning campaign compares against unless told otherwise.
    default_baselines: tuple[str, ...] = ()

    def collectives(self) -> list[str]:
        raise NotImplementedError

    def algorithms(self, collective: str) -> list[Algorithm]:
        raise NotImplementedError

    def selectors(self, collective: str) -> list[Algorithm]:
        raise NotImplementedError

    def force(self, algorithm: Algorithm) -> LaunchMods:
        raise NotImplementedError

    def lookup(self, collective: str, name: str) -> Algorithm:
        for a in self.algorithms(collective) + self.selectors(collective):
            if a.name == name:
                return a
        known = ", ".join(a.name for a in self.algorithms(collective) + self.selectors(collective))
        from ..errors import ConfigError
        raise ConfigError(f"{self.name} has no {collective} algorithm {name!r}; known: {known}")
