"""`colltune online update` takes the state dir's lock (a review: it re-derived and wrote
state.txt without <dir>/.lock, which libcolltune holds at MPI_Finalize while it writes its
samples file and merges state.txt: a job finishing during an update had its merge
overwritten, or counted twice)."""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

from conftest import CACHE

from colltune.online import update


def _samples_dir(tmp_path):
    d = tmp_path / "state"
    (d / "samples").mkdir(parents=True)
    doc = {"schema": update.SAMPLES_SCHEMA, "fingerprint": "fp1", "run_id": "r001",
           "job": {"size": 4, "library": "SMPI test", "platform": "small", "started": "2026-01-01T00:00:00",
                   "argv0": "app", "budget": 20, "max_samplers": 4, "seed": 0},
           "blocks": [{"collective": "allreduce", "nodes": 2, "ppn": 2, "bytes_lo": 0, "bytes_hi": 16,
                       "calls": 4, "sampled": 4, "arms": [
                           {"arm": "library", "p": 0.5, "n": 2, "mean": 1e-5, "m2": 0.0, "min": 1e-5},
                           {"arm": "ring", "p": 0.5, "n": 2, "mean": 2e-5, "m2": 0.0, "min": 2e-5}]}],
           "records": []}
    (d / "samples" / "r001.json").write_text(json.dumps(doc))
    return d


def test_online_update_waits_for_the_state_lock(tmp_path):
    d = _samples_dir(tmp_path)
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)                  # a job merging its run
    env = {**os.environ, "COLLTUNE_CACHE_DIR": CACHE, "COLLTUNE_STORE": str(tmp_path / "s.sqlite")}
    proc = subprocess.Popen([sys.executable, "-m", "colltune.cli", "online", "update", str(d)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()
        assert not (d / "state.txt").exists()
    finally:
        os.close(fd)                                # the job is done
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    text = (d / "state.txt").read_text()
    assert "block allreduce nodes=2 ppn=2 bytes=0..16 calls=4 runs=1" in text
