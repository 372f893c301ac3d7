"""The tuner interface and the space it searches."""
from __future__ import annotations

from dataclasses import dataclass

from ..decision import DecisionTable
from ..plan import BenchSpec
from ..providers.base import Provider
from ..results import Results


@dataclass(frozen=True)
class TuningSpace:
    collectives: tuple[str, ...]
    layouts: tuple[tuple[int, int], ...]          # (nodes, ppn)
    sizes: tuple[int, ...]                        # bytes per rank
    algorithms: tuple[str, ...] | None = None     # restrict candidates (None = all)
    root: int = 0


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
