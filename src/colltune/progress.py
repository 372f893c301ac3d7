"""A dependency-free progress bar: redrawn in place on a terminal, a line per
10 % otherwise (CI logs stay short)."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 30):
        self.total, self.enabled, self.width = total, enabled and total > 0, width
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_decile = -1

    def step(self, what: str = "", counts: dict | None = None) -> None:
        self.done += 1
        if not self.enabled:
            return
        frac = self.done / self.total
        elapsed = time.monotonic() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        fill = int(self.width * frac)
        tally = " ".join(f"{k}={v}" for k, v in sorted((counts or {}).items()))
        line = (f"[{'#' * fill}{'.' * (self.width - fill)}] {self.done}/{self.total} jobs "
                f"{elapsed:5.0f}s elapsed, ~{eta:.0f}s left  {tally}  {what}")
        if self.tty:
            self.stream.write("\r" + line[:160].ljust(160))
        elif int(frac * 10) != self._last_decile or self.done == self.total:
            self._last_decile = int(frac * 10)
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
