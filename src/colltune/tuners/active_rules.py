"""Rules from a model (ACCLAiM's rule generation).

The model is asked for the best algorithm at every power-of-two size A of a layout.
Where the choice changes between A and the next power of two C, it is asked again
at the non-power-of-two midpoint B (geometric: the middle of the interval on the
log2-size axis the model learns on).

`rules_from_choices` is ACCLAiM's rule: three rules come out — sizes up to A take
A's choice, sizes strictly between take B's, sizes from C on take C's — so the
whole interval (A, C) takes one answer, and half of it the answer of the far power
of two when the change lies near the middle (setting active_rules = "midpoint").

`bisect_choices` + `rules_from_samples` (the default, active_rules = "bisect") keep
asking: at the midpoint of whichever half (A, B) or (B, C) still has different
answers at its ends, until the change is located to the byte, so the table gives
the model's own choice at every size. Consecutive rules with the same choice are
merged (pruned) in both. docs/active.md shows the measurement.
"""
from __future__ import annotations

import math
from typing import Callable

from ..decision import Rule, boundary
from .active_model import is_pow2


def midpoint(a: int, c: int) -> int:
    """Non-power-of-two size between a and c (a < c, c > a + 1), near sqrt(a*c)."""
    if c - a < 2:
        raise ValueError(f"no size strictly between {a} and {c}")
    b = min(max(int(round(math.sqrt(max(a, 1) * c))), a + 1), c - 1)
    if is_pow2(b):
        b = b + 1 if b + 1 < c else b - 1
    return b


def rules_from_choices(sizes: list[int], choose: Callable[[list[int]], list[str]],
                       provider: str, measured: set[int] | None = None) -> tuple[Rule, ...]:
    """Rules of one layout. `sizes`: the increasing sizes (powers of two) the model is
    queried at; `choose(sizes) -> algorithm per size` asks the model; `measured`:
    the sizes measured at this layout (each rule lists those it covers)."""
    if not sizes:
        raise ValueError("no sizes to generate rules from")
    sizes = sorted(set(sizes))
    picks = choose(sizes)
    rules: list[tuple[int, str]] = [(0, picks[0])]
    between = [(a, c) for a, c, pa, pc in zip(sizes, sizes[1:], picks, picks[1:])
               if pa != pc and c - a >= 2]
    mids = choose([midpoint(a, c) for a, c in between]) if between else []
    mid_of = {a: m for (a, _), m in zip(between, mids)}
    for a, c, pc in zip(sizes, sizes[1:], picks[1:]):
        if a in mid_of:
            rules.append((a + 1, mid_of[a]))
        rules.append((c, pc))
    pruned: list[tuple[int, str]] = []
    for start, alg in rules:
        if not pruned or pruned[-1][1] != alg:
            pruned.append((start, alg))
    ends = [s for s, _ in pruned[1:]] + [math.inf]
    measured = measured or set()
    return tuple(Rule(start, alg, provider, {}, None,
                      tuple(m for m in sorted(measured) if start <= m < end))
                 for (start, alg), end in zip(pruned, ends))


def bisect_choices(layouts: list[tuple[int, int]], sizes: list[int],
                   best: Callable[[list[tuple[int, int, int]]], list[str]],
                   depth: int | None = None) -> dict[tuple[int, int], list[tuple[int, str]]]:
    """The model's choices at `sizes` of every layout, and where they change between
    neighbouring sizes A < C: the model is asked at the midpoint B (as above), then
    at the midpoint of every bracket whose two ends it answers differently for
    (bisection), until the bracket is two consecutive sizes (depth None: the change
    is located to the byte) or for `depth` levels. `best(points) -> algorithm per
    point` asks the model for many points at once (one call per level).
    Returns layout -> sorted (size, choice) samples."""
    sizes = sorted(set(sizes))
    pts = [(n, p, m) for n, p in layouts for m in sizes]
    samples: dict[tuple[int, int], dict[int, str]] = {lay: {} for lay in layouts}
    for (n, p, m), alg in zip(pts, best(pts)):
        samples[(n, p)][m] = alg
    brackets = [((n, p), a, c) for n, p in layouts for a, c in zip(sizes, sizes[1:])
                if samples[(n, p)][a] != samples[(n, p)][c]]
    level = 0
    while depth is None or level < depth:
        level += 1
        brackets = [(lay, a, c) for lay, a, c in brackets if c - a >= 2]
        if not brackets:
            break
        # the geometric middle (between powers of two it is never one itself)
        mids = [min(max(int(round(math.sqrt(max(a, 1) * c))), a + 1), c - 1) for _, a, c in brackets]
        answers = best([(*lay, b) for (lay, _, _), b in zip(brackets, mids)])
        nxt = []
        for (lay, a, c), b, alg in zip(brackets, mids, answers):
            samples[lay][b] = alg
            if alg != samples[lay][a]:
                nxt.append((lay, a, b))
            if alg != samples[lay][c]:
                nxt.append((lay, b, c))
        brackets = nxt
    return {lay: sorted(s.items()) for lay, s in samples.items()}


def rules_from_samples(samples: list[tuple[int, str]], provider: str,
                       measured: set[int] | None = None) -> tuple[Rule, ...]:
    """Rules from the model's choices at increasing sizes: where two neighbouring
    samples differ, the rule changes at their geometric midpoint (decision.boundary:
    the middle on the log2-size axis the model learns on); same-choice neighbours
    are merged."""
    if not samples:
        raise ValueError("no sizes to generate rules from")
    pruned: list[tuple[int, str]] = []
    prev = None
    for size, alg in sorted(samples):
        if not pruned:
            pruned.append((0, alg))
        elif pruned[-1][1] != alg:
            pruned.append((boundary(prev, size), alg))
        prev = size
    ends = [s for s, _ in pruned[1:]] + [math.inf]
    measured = measured or set()
    return tuple(Rule(start, alg, provider, {}, None,
                      tuple(m for m in sorted(measured) if start <= m < end))
                 for (start, alg), end in zip(pruned, ends))
