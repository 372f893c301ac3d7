"""SimGrid SMPI's message trace: the smpirun flags that record it, and a streaming reader.

SMPI (SimGrid 3.32) writes a Paje trace when tracing is on; with ``tracing/smpi/internals``
every message, including those posted inside the library's collectives, is a Paje link
(``PajeStartLink`` at the send, ``PajeEndLink`` at the matching receive) and with
``tracing/smpi/display-sizes`` the start carries the message size in bytes. See
docs/profile-files.md for what the reader relies on.
"""
from __future__ import annotations

import os

TRACE_NAME = "simgrid.trace"
# Decimals of the trace's timestamps: SMPI's clock at nanosecond resolution, so the sends
# can be split by the regions' MPI_Wtime intervals (the default, 6, is a microsecond).
TRACE_PRECISION = 9


def trace_path(out_dir: str | os.PathLike) -> str:
    return os.path.join(os.path.abspath(os.fspath(out_dir)), TRACE_NAME)


def smpirun_args(out_dir: str | os.PathLike) -> list[str]:
    """smpirun --cfg flags that make SimGrid 3.32 record every message with its size into
    <out_dir>/simgrid.trace (out_dir must exist: SimGrid aborts otherwise). ``tracing/smpi/group`` is left off: on cluster platforms
    SimGrid 3.32 aborts with it ('container with name ..._DOWN not found')."""
    return ["--cfg=tracing:yes", "--cfg=tracing/smpi:yes", "--cfg=tracing/smpi/internals:yes",
            "--cfg=tracing/smpi/display-sizes:yes", f"--cfg=tracing/precision:{TRACE_PRECISION}",
            f"--cfg=tracing/filename:{trace_path(out_dir)}"]
