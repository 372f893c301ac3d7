"""Topology-aware placement of concurrent benchmark launches.

The unit of placement is a *group*: a leaf switch of a fat-tree, a dragonfly group,
the one switch of a flat cluster (``Platform.groups()``, exposed by a backend as
``host_groups()``). A launch holds whole groups — as few as give it enough hosts —
and two launches that run at the same time never hold the same group, so their
traffic never meets in a leaf switch or inside a dragonfly group.

Two users of the same greedy rule (``_pick``):
- ``GroupAllocator`` gates real launches: a worker blocks until groups are free,
  runs its launch on the first hosts of those groups, releases them; every hold is
  logged (groups, hosts, real start/end) so a run can be checked afterwards.
- ``greedy_schedule`` lays out launches of known duration (simulated benchmark
  seconds) on the groups: its makespan versus the sum of durations is the modelled
  gain of parallel collection on that machine. On SMPI each smpirun simulates only
  its own traffic, so this is a schedule computed from simulated durations, not a
  joint simulation of concurrent launches.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from .errors import ColltuneError


@dataclass(frozen=True)
class Hold:
    """One launch's place and time (real seconds for the allocator, simulated for
    a schedule)."""
    task: object
    groups: tuple[str, ...]
    hosts: tuple[str, ...]
    start: float
    end: float


def groups_of(backend) -> dict[str, list[str]] | None:
    """The backend's placement groups, or None if it cannot place launches."""
    fn = getattr(backend, "host_groups", None)
    return fn() if fn else None


def _pick(groups: dict[str, list[str]], free: set[str], nodes: int) -> tuple[str, ...] | None:
    """Fewest free groups with >= nodes hosts: the smallest single group that fits,
    else the first run of consecutive free groups (in host order) that does."""
    singles = [g for g in groups if g in free and len(groups[g]) >= nodes]
    if singles:
        return (min(singles, key=lambda g: len(groups[g])),)
    names = list(groups)
    for i in range(len(names)):
        run, have = [], 0
        for g in names[i:]:
            if g not in free:
                break
            run.append(g)
            have += len(groups[g])
            if have >= nodes:
                return tuple(run)
    return None


def _hosts(groups: dict[str, list[str]], chosen: tuple[str, ...], nodes: int) -> tuple[str, ...]:
    return tuple(h for g in chosen for h in groups[g])[:nodes]


def _check_fits(groups: dict[str, list[str]], nodes: int) -> None:
    total = sum(len(h) for h in groups.values())
    if nodes < 1 or nodes > total:
        raise ColltuneError(f"cannot place a launch of {nodes} nodes on {total} hosts "
                            f"in {len(groups)} groups")


class GroupAllocator:
    def __init__(self, groups: dict[str, list[str]]):
        if not groups:
            raise ColltuneError("placement needs at least one group of hosts")
        self.groups = {g: list(h) for g, h in groups.items()}
        self._free = set(self.groups)
        self._cond = threading.Condition()
        self.log: list[Hold] = []

    @contextmanager
    def hold(self, nodes: int, task: object = None) -> Iterator[Hold]:
        """Block until enough whole groups are free, yield the placement, release."""
        _check_fits(self.groups, nodes)
        with self._cond:
            while (chosen := _pick(self.groups, self._free, nodes)) is None:
                self._cond.wait()
            self._free -= set(chosen)
        start = time.time()
        held = Hold(task, chosen, _hosts(self.groups, chosen, nodes), start, start)
        try:
            yield held
        finally:
            with self._cond:
                self.log.append(Hold(task, chosen, held.hosts, start, time.time()))
                self._free |= set(chosen)
                self._cond.notify_all()


def greedy_schedule(tasks: list[tuple[object, int, float]],
                    groups: dict[str, list[str]]) -> list[Hold]:
    """List scheduling of (task, nodes, duration) on disjoint groups, longest first:
    whenever groups free up, start every waiting task that fits, in that order."""
    for _, nodes, _ in tasks:
        _check_fits(groups, nodes)
    waiting = sorted(tasks, key=lambda t: -t[2])
    free, running, out, now = set(groups), [], [], 0.0
    while waiting or running:
        for t in list(waiting):
            chosen = _pick(groups, free, t[1])
            if chosen is not None:
                free -= set(chosen)
                h = Hold(t[0], chosen, _hosts(groups, chosen, t[1]), now, now + t[2])
                running.append(h)
                out.append(h)
                waiting.remove(t)
        now = min(h.end for h in running)
        for h in [h for h in running if h.end <= now]:
            running.remove(h)
            free |= set(h.groups)
    return out


def makespan(holds: list[Hold]) -> float:
    return max((h.end for h in holds), default=0.0) - min((h.start for h in holds), default=0.0)


def shared_groups(holds: list[Hold]) -> list[tuple[Hold, Hold, set[str]]]:
    """Pairs of holds that overlap in time and share a group (should be none)."""
    bad = []
    for i, a in enumerate(holds):
        for b in holds[i + 1:]:
            common = set(a.groups) & set(b.groups)
            if common and a.start < b.end and b.start < a.end:
                bad.append((a, b, common))
    return bad
