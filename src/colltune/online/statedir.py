"""A state dir: which state file, foreign and bad states, and `online update`
(re-derive from every samples file, add priors, load the samples into the store)."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import time

from ..errors import InputError
from . import prior
from .state import State, StateError, load, save
from .update import rederive, samples_files

STATE = "state.txt"


_said: set[str] = set()


def warn(msg: str) -> None:
    """Once per message and process (a command may re-derive the state twice)."""
    if msg not in _said:
        _said.add(msg)
        print(f"colltune online: warning: {msg}", file=sys.stderr)


def read_state(state_dir: str, fingerprint: str | None = None) -> State | None:
    """state.txt, or None when absent, unreadable or foreign (one warning; the file is
    renamed state.txt.bad-<time> or state.txt.foreign-<time> as C does, never overwritten)."""
    path = os.path.join(state_dir, STATE)
    if not os.path.exists(path):
        return None
    try:
        st = load(path)
        if not fingerprint or not st.fingerprint or st.fingerprint == fingerprint:
            return st
        kind, why = "foreign", (f"{path}: fingerprint {st.fingerprint}, this job's is {fingerprint} (another "
               f"platform, MPI library or catalogue)")
    except StateError as exc:
        kind, why = "bad", str(exc)
    bad = f"{path}.{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    os.replace(path, bad)
    warn(f"{why}: ignored, kept as {bad}")
    return None


@contextlib.contextmanager
def locked(state_dir: str):
    """flock(<dir>/.lock), as libcolltune takes it at MPI_Finalize around writing its
    samples file and merging state.txt (online_final.c): an update re-deriving the state
    meanwhile had overwritten a job's merge, or counted its run twice. A lock file of
    another user: locked through a read-only descriptor, as C does."""
    path = os.path.join(state_dir, ".lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                break
            except OSError as exc:          # a signal while waiting
                if exc.errno != errno.EINTR:
                    raise
        yield
    finally:
        os.close(fd)                        # releases the lock


def update_dir(state_dir: str, layouts: list[tuple[int, int]] = (), fingerprint: str | None = None,
               arms_of: dict | None = None, store=None, campaign: str | None = None) -> State:
    """Re-derive state.txt from every samples file of the current fingerprint (the newest
    samples file's unless given), add priors for `layouts` and for the prior blocks the
    old state had, write it atomically (under the state dir's lock, as jobs merge); with a
    store, load new samples as records."""
    if not os.path.isdir(state_dir):
        raise InputError(f"{state_dir}: no such state dir")
    with locked(state_dir):
        new, mine, fp = _rederive_dir(state_dir, layouts, fingerprint, arms_of)
    if store is not None:
        from .records import store_samples
        for s in mine:
            store_samples(store, s, campaign or f"online-{fp}", os.path.abspath(state_dir))
    return new


def _rederive_dir(state_dir, layouts, fingerprint, arms_of):
    runs = samples_files(state_dir)
    fp = fingerprint or (runs[-1].fingerprint if runs else None)
    old = read_state(state_dir, fp)
    fp = fp or (old.fingerprint if old else "")
    if not fp:      # C reads no state without one: writing a placeholder would only be set aside
        raise InputError(f"{state_dir}: no samples and no state yet, nothing to update (a run "
                         f"writes its samples at MPI_Finalize; did the job end before it?)")
    foreign = [s for s in runs if s.fingerprint != fp]
    if foreign:
        warn(f"{len(foreign)} samples file(s) of another fingerprint ignored "
             f"(e.g. {foreign[0].path}: {foreign[0].fingerprint}, the state's is {fp})")
    mine = [s for s in runs if s.fingerprint == fp]
    if old is not None and old.run_count > len(mine):
        warn(f"{state_dir}/{STATE} counts {old.run_count} runs but only {len(mine)} samples "
             f"files are left: kept as it is (priors only)")
        new = old
    else:
        new = rederive(mine, fp)
    prior_layouts = {(b.nodes, b.ppn) for b in (old.blocks.values() if old else ())
                     if b.source == "prior"} | set(layouts)
    arms = prior.arms_by_collective(new)
    for coll, ids in (arms_of or {}).items():
        arms.setdefault(coll, ids)
    if old is not None:
        for coll, ids in prior.arms_by_collective(old).items():
            arms.setdefault(coll, ids)
    models = prior.Models(new)
    prior.add_priors(new, sorted(prior_layouts), arms, models=models)
    prior.inform_untimed(new, models=models)
    save(new, os.path.join(state_dir, STATE))
    return new, mine, fp


def job_provenance(state_dir: str, fingerprint: str) -> dict:
    """What the newest run of this fingerprint says about where it ran (decision tables'
    provenance: backend, platform, MPI library)."""
    runs = [s for s in samples_files(state_dir) if s.fingerprint == fingerprint]
    job = runs[-1].data.get("job", {}) if runs else {}
    return {"backend": ("sim" if job.get("platform") else "local") if job else None,
            "platform": job.get("platform") or None, "mpi_library": job.get("library"),
            "mpi_version": "", "state_dir": os.path.abspath(state_dir)}
