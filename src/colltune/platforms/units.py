"""SimGrid's units of a platform's values (its XML parser's tables): bandwidths
('12.5GBps', '100Gbps', '1MiBps'), times ('0.2us'; 'm' is a minute) and speeds
('40Gf'). A bare number takes the default unit. Read by the platform loader, which
refuses a value SimGrid would reject (every smpirun of the platform would fail), and
by the profile's topology, which needs the numbers."""
from __future__ import annotations

import re
from typing import Iterable

_NUM = re.compile(r"^\s*[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


class UnitError(ValueError):
    """A value SimGrid cannot read: no number, or a unit it does not know."""


def _unit_table(units: Iterable[tuple[str, float, int]]) -> dict[str, float]:
    """unit -> factor, with the SI (base 10) or IEC (base 2) prefixes of each unit."""
    out: dict[str, float] = {}
    for unit, value, base in units:
        mult, prefixes = ((1024.0, ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"]) if base == 2 else
                          (1000.0, ["k", "M", "G", "T", "P", "E", "Z", "Y"]))
        out.setdefault(unit, value)
        v = value
        for p in prefixes:
            v *= mult
            out.setdefault(p + unit, v)
    return out


BANDWIDTH = _unit_table([("bps", 0.125, 2), ("bps", 0.125, 10), ("Bps", 1.0, 2), ("Bps", 1.0, 10)])
TIME = {"w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3,
        "us": 1e-6, "ns": 1e-9, "ps": 1e-12}
SPEED = {**_unit_table([("f", 1.0, 10)]),
         **{p + "flops": 1000.0 ** i for i, p in enumerate(
             ("", "kilo", "mega", "giga", "tera", "peta", "exa", "zetta", "yotta"))}}


def parse(text: str, units: dict[str, float], default: str, what: str) -> float:
    m = _NUM.match(text)
    if not m:
        raise UnitError(f"{what}: cannot read a number from '{text}'")
    unit = text[m.end():] or default
    if unit not in units:
        raise UnitError(f"{what}: unknown unit '{unit}' in '{text}'")
    return float(m.group(0)) * units[unit]


def parse_bandwidth(text: str, what: str = "bandwidth") -> float:
    """-> bytes/s (bare numbers are Bps)."""
    return parse(text, BANDWIDTH, "Bps", what)


def parse_time(text: str, what: str = "time") -> float:
    """-> seconds (bare numbers are s)."""
    return parse(text, TIME, "s", what)


def parse_speed(text: str, what: str = "speed") -> float:
    """-> flop/s (bare numbers are f)."""
    return parse(text, SPEED, "f", what)
