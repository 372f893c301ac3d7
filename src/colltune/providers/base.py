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


def with_presets(plain: list[Algorithm], presets: dict[str, tuple[str, ...]]) -> list[Algorithm]:
    """plain, then each algorithm again with each of its presets' parameters ("k=v,k=v")."""
    from ..exporters.colltune_rules import split_label
    return plain + [Algorithm(a.provider, a.collective, a.name, a.kind,
                              tuple(sorted(split_label(f"{a.name}[{p}]")[1].items())),
                              a.description)
                    for a in plain for p in presets.get(a.name, ())]


@dataclass
class LaunchMods:
    """How a launch is changed to force an algorithm."""
    launcher_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # run this program instead of the backend's bench (same arguments), e.g. the
    # bench linked with colltune's interposer; None: the backend's own bench
    program: str | None = None


# labels that points stored before they were recorded lack (Provider.reuse_labels)
UNKNOWN_WHEN_ABSENT = frozenset({"build"})


class Provider:
    name = "?"
    description = ""
    backends: tuple[str, ...] = ()
    # Selectors a tuning campaign compares against unless told otherwise.
    default_baselines: tuple[str, ...] = ()
    # Can a rules file give each message size its own algorithm of this library?
    # (SMPI configures one algorithm per collective for a whole run: no.)
    per_size_rules = True
    # colltune's own algorithms, when the provider offers them beside others (--provider
    # both: the task model tuner then measures its HAN choice against the other arms)
    colltune_part: "Provider | None" = None
    # Built on top of the backend's library provider (colltune, both): made with
    # (backend, library). A library's own provider is made from its MPI implementation.
    on_library = False

    def arms(self, collective: str) -> list[Algorithm]:
        """What a tuner may put in a decision table for collective (default: the
        algorithms). A composite provider adds the library's default decision and
        leaves out what its backend cannot deploy per size."""
        return self.algorithms(collective)

    def arm_label(self, algorithm: Algorithm) -> str:
        """A name unique among the arms (a composite prefixes the provider: two
        providers may both have a `ring`)."""
        return algorithm.label

    def deployment(self) -> dict:
        """What the decision table's provenance says about its arms."""
        return {"provider": self.name}

    def collectives(self) -> list[str]:
        raise NotImplementedError

    def algorithms(self, collective: str) -> list[Algorithm]:
        raise NotImplementedError

    def selectors(self, collective: str) -> list[Algorithm]:
        raise NotImplementedError

    def key_fields(self, algorithm: Algorithm) -> dict[str, str]:
        """What, beyond the point itself, makes a measurement of this algorithm another one
        (part of its store key); {} for most."""
        return {}

    def reuse_labels(self, algorithm: Algorithm) -> dict[str, str | None]:
        """Labels a stored point of this algorithm must carry to be reused, beyond its key:
        how it ran that the key does not say (colltune's build, the library default it ran
        under). None: the label must be absent. A label of UNKNOWN_WHEN_ABSENT that a stored
        point lacks (stored before it was recorded) does not count against it."""
        return {}

    def force(self, algorithm: Algorithm) -> LaunchMods:
        raise NotImplementedError

    def decision_mods(self, selector: str) -> LaunchMods:
        """How a launch runs the library's whole selection as `selector` (the default
        decision a deployment runs with), where that is a launch option; none by default."""
        return LaunchMods()

    def parameters(self, collective: str, name: str) -> dict:
        """{param: {default, min, max, unit, help}} an algorithm takes (none by default)."""
        return {}

    def lookup(self, collective: str, name: str) -> Algorithm:
        """An algorithm or selector by name; a label with parameters (Algorithm.label's
        form, e.g. pipeline[segsize=16384]) gives that algorithm with them, each checked
        against parameters()."""
        from ..errors import ConfigError
        from ..exporters.colltune_rules import split_label
        base, params = split_label(name)
        for a in self.algorithms(collective) + self.selectors(collective):
            if a.name == base and not a.params:
                break
        else:
            algs = ", ".join(dict.fromkeys(a.name for a in self.algorithms(collective)))
            sels = ", ".join(dict.fromkeys(s.name for s in self.selectors(collective)))
            raise ConfigError(f"{self.name} has no {collective} algorithm {base!r}; known: {algs}"
                              + (f" (library selectors: {sels})" if sels else ""))
        if not params or a.provider != self.name:
            return a
        known_params = self.parameters(collective, base)
        for k, v in params.items():
            if k not in known_params:
                raise ConfigError(f"{self.name} {collective} {base} has no parameter {k!r}; "
                                  f"it has {', '.join(known_params) or 'none'}")
            if not known_params[k]["min"] <= v <= known_params[k]["max"]:
                raise ConfigError(f"{self.name} {collective} {base}: {k}={v} outside "
                                  f"[{known_params[k]['min']}, {known_params[k]['max']}]")
        return Algorithm(self.name, collective, base, a.kind, tuple(sorted(params.items())),
                         a.description)
