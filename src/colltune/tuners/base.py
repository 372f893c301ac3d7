"""The tuner interface and the space it searches."""
from __future__ import annotations

from dataclasses import dataclass

from ..decision import DecisionTable
from ..plan import BenchSpec
from ..providers.base import ALGORITHM, Algorithm, Provider
from ..results import Results


@dataclass(frozen=True)
class TuningSpace:
    collectives: tuple[str, ...]
    layouts: tuple[tuple[int, int], ...]          # (nodes, ppn)
    sizes: tuple[int, ...]                        # bytes per rank
    algorithms: tuple[str, ...] | None = None     # restrict candidates (None = all)
    root: int = 0


def within(provider: Provider, collective: str, names, pool: list[Algorithm]) -> list[Algorithm]:
    """pool (the provider's arms or algorithms) within --algorithms names: the selectors
    always; an algorithm by its name (with its presets) or by its label
    (``ring[segsize=8192]``, or a composite's ``colltune:ring[segsize=8192]``). A label
    with parameters that is no preset is looked up (its parameters checked) and added
    where its algorithm is in the pool."""
    if not names:
        return list(pool)
    out = [a for a in pool if a.kind != ALGORITHM or a.name in names or a.label in names
           or provider.arm_label(a) in names]
    from ..errors import ConfigError
    for name in names:
        if "[" not in name or any(name in (a.label, provider.arm_label(a)) for a in pool):
            continue
        try:
            alg = provider.lookup(collective, name)
        except ConfigError:
            continue          # another collective's (run_tuning checks every name)
        if any((a.provider, a.name) == (alg.provider, alg.name) and not a.params for a in pool):
            out.append(alg)
    return list(dict.fromkeys(out))


class Tuner:
    name = "?"
    summary = ""    # one line for `colltune tune --help` (its strategy list)

    def __init__(self, provider: Provider, space: TuningSpace, baselines: list[str]):
        self.provider, self.space, self.baselines = provider, space, list(baselines)

    def plan(self) -> list[BenchSpec]:
        raise NotImplementedError

    def run(self, campaign):
        """Measure what the tuner needs; a tuner that learns as it goes overrides this."""
        return campaign.run(self.plan())

    def decide(self, results: Results, provenance: dict) -> DecisionTable:
        raise NotImplementedError
