"""Shared fixtures: the real SMPI backend on the small bundled platform."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(REPO, ".colltune-cache")


def run_cli(*args: str, env: dict | None = None, timeout: float = 600, check: bool = True):
    """Run the real `colltune` entry point in a subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("COLLTUNE_CACHE_DIR", CACHE)
    proc = subprocess.run([sys.executable, "-m", "colltune.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"colltune {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def have_mpi(name: str) -> bool:
    """Is this MPI implementation installed (colltune's discovery finds it)?"""
    from colltune import mpi
    try:
        mpi.find(name)
        return True
    except mpi.MPINotFound:
        return False


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A private store and output folder for one test."""
    monkeypatch.setenv("COLLTUNE_STORE", str(tmp_path / "store.sqlite"))
    monkeypatch.setenv("COLLTUNE_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("COLLTUNE_CACHE_DIR", CACHE)
    return tmp_path


@pytest.fixture(scope="session")
def settings():
    from colltune import config
    return config.load({"cache_dir": CACHE, "platform": "small"}, environ={})


@pytest.fixture(scope="session")
def sim_backend(settings):
    from colltune.backends.sim import SimBackend
    b = SimBackend(settings, "small")
    b.prepare()
    return b


@contextlib.contextmanager
def emulated_cluster(hosts: int, name: str, subnet: str, **kw):
    """An emulated cluster (colltune cluster up) for the duration of the block."""
    from colltune import cluster
    c = cluster.up(hosts, name, subnet, **kw)
    try:
        yield c
    finally:
        cluster.down(name)
