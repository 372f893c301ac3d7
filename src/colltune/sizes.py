"""Parsing of size and count lists given on the command line.

Grammar (comma-separated items):
  N        one value; sizes accept suffixes K, M, G (powers of 1024): 4K = 4096
  A..B     geometric: A, 2A, 4A, ... up to B (B included when reached)  "8..4M"
  A-B      every integer from A to B                                    "1-17"
Duplicates are removed and the result sorted.
"""
from __future__ import annotations

import re

from .errors import InputError

_SUFFIX = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
_VALUE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_value(text: str, what: str = "value") -> int:
    m = _VALUE.match(text)
    if not m:
        raise InputError(f"bad {what} {text!r}: expected an integer with optional K/M/G suffix")
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


def parse_list(spec: str, what: str = "size", minimum: int = 0) -> list[int]:
    if spec is None or not str(spec).strip():
        raise InputError(f"empty {what} list")
    out: set[int] = set()
    for item in str(spec).split(","):
        item = item.strip()
        if not item or item.startswith("..") or item.endswith(".."):
            raise InputError(f"bad {what} list {spec!r}: empty item or open range {item!r}")
        if ".." in item:
            lo_s, hi_s = item.split("..", 1)
            lo, hi = parse_value(lo_s, what), parse_value(hi_s, what)
            if lo <= 0 or hi < lo:
                raise InputError(f"bad {what} range {item!r}: need 0 < A <= B in A..B")
            v = lo
            while v <= hi:
                out.add(v)
                v *= 2
        elif re.match(r"^\d+\s*-\s*\d+$", item):
            lo_s, hi_s = item.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise InputError(f"bad {what} range {item!r}: B < A in A-B")
            out.update(range(lo, hi + 1))
        else:
            out.add(parse_value(item, what))
    bad = [v for v in out if v < minimum]
    if bad:
        raise InputError(f"{what} {min(bad)} is below the minimum {minimum}")
    return sorted(out)


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
