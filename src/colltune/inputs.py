"""Reading input files so that every failure names the file and line (FILE:LINE: what)."""
from __future__ import annotations

import json
import os
import stat
from typing import Any

from .errors import InputError

# Rules, placement and configuration files are small text; the interposer refuses a
# rules file past the same size (intercept.c RULES_MAX_BYTES)
MAX_TEXT_BYTES = 16 << 20


def read_text(path: str, error: type[Exception] = InputError, cannot: str = "cannot read") -> str:
    """The file's text (latin-1: every byte maps), or ``error``: ``PATH:0: <cannot>: why``
    when it cannot be read, ``PATH:LINE: not a text line (byte 0x00)`` at its first NUL
    (the C parsers stop at a NUL: the readers refuse what they would misread)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):            # a FIFO would block, a device never end
            raise error(f"{path}:0: not a regular file (a text file is expected)")
        if st.st_size > MAX_TEXT_BYTES:
            raise error(f"{path}:0: {st.st_size} bytes, more than the {MAX_TEXT_BYTES >> 20} MiB "
                        f"an input file of colltune may have")
        with open(path, "rb") as fh:
            data = fh.read(MAX_TEXT_BYTES + 1)
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
