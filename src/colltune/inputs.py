"""Reading input files so that every failure names the file and line (FILE:LINE: what)."""
from __future__ import annotations

import json
from typing import Any

from .errors import InputError


def read_text(path: str, error: type[Exception] = InputError, cannot: str = "cannot read") -> str:
    """The file's text (latin-1: every byte maps), or ``error``: ``PATH:0: <cannot>: why``
    when it cannot be read, ``PATH:LINE: not a text line (byte 0x00)`` at its first NUL
    (the C parsers stop at a NUL: the readers refuse what they would misread)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise error(f"{path}:0: {cannot}: {exc.strerror}") from None
    if b"\0" in data:
        line = data[:data.index(b"\0")].count(b"\n") + 1
        raise error(f"{path}:{line}: not a text line (byte 0x00)")
    return data.decode("latin-1")


def read_json(path: str, cannot: str = "{path}:0: cannot read: {why}") -> Any:
    """The file's JSON value, or InputError: ``PATH:LINE: not valid JSON: what``, or
    ``cannot`` (formatted with path and why) when it cannot be read."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except OSError as exc:
        raise InputError(cannot.format(path=path, why=exc.strerror)) from None
