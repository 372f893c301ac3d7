"""The native bench's own end-to-end self-test (every collective x scenario under SMPI)."""
from __future__ import annotations

import os
import subprocess

from conftest import REPO


def test_bench_selftest_under_smpi():
    proc = subprocess.run(["make", "-s", "-C", os.path.join(REPO, "native"), "bench-selftest"],
                          capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    last = [ln for ln in proc.stdout.splitlines() if "passed" in ln][-1]
    assert last.strip().endswith(", 0 failed") and not last.startswith("0 passed"), tail
