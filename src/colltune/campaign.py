"""Run benchmark plans through a backend into the results store.

Guarantees: a point already in the store is not measured again (resume); one
failing launch (abort, hang, wrong data) is recorded and the campaign goes on —
after a crash the remaining points of that launch are relaunched, so one bad
message size does not hide the others; results of a launch are written as soon
as it ends, so killing the campaign loses at most the launches in flight.

With a ``placer`` (colltune.placement.GroupAllocator) every launch first takes whole
groups of hosts (leaf switches / dragonfly groups) that no running launch holds and
runs on their hosts; the hosts and groups are recorded with the launch.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .backends.base import Backend, Launch, LaunchResult, allow_launches, stop_launches
from .plan import BenchSpec, check_bytes_per_rank
from .providers.base import UNKNOWN_WHEN_ABSENT
from .progress import Progress
from .store import CRASHED, ERROR, OK, TIMEOUT, WRONG, Store

_RECORD_FIELDS = ("participants", "msg_size", "bytes", "count", "dtype", "root", "delay_us",
                  "delayed_rank", "tcalc_us", "warmup", "reps", "late_starts", "ttc_median_s",
                  "ttc_mean_s", "ttc_min_s", "ttc_max_s", "ttc_stddev_s", "rse_median",
                  "rank_max_mean_s", "rank_mean_mean_s", "pure_median_s", "overlap_pct",
                  "valid", "check_error")


# After this many consecutive launches time out without finishing a single point,
# the rest of a job's points are recorded as timeouts instead of being launched.
MAX_STALLED_LAUNCHES = 2
NOT_ATTEMPTED = "not attempted"     # check_error of a point given up on without its launch


def launched(row: dict) -> bool:
    """Whether a stored point's launch ran (not given up on after consecutive timeouts)."""
    return not str(row.get("check_error") or "").startswith(NOT_ATTEMPTED)


@dataclass
class Job:
    spec: BenchSpec
    check: str
    keys: dict[tuple, str]                  # point identity -> store key
    # keys of stored points measured again (they lacked the check or the time this
    # run asks for): the new point supersedes the stored one (Store.add_run)
    replace: frozenset[str] = frozenset()


@dataclass
class CampaignSummary:
    launches: int = 0
    skipped_points: int = 0
    # of skipped_points: stored failures by status (re-measured with --retry-failed)
    skipped_failures: dict[str, int] = field(default_factory=dict)
    remeasured: int = 0                     # stored points lacking the check (or time) asked for
    measured_otherwise: int = 0             # stored points measured in another way (reuse_labels)
    other_settings: dict = field(default_factory=dict)  # points measured again, by setting that differed
    past_deadline: int = 0                  # jobs not started: Campaign.deadline had passed
    past_deadline_colls: set = field(default_factory=set)    # their collectives
    measured: dict[str, int] = field(default_factory=dict)
    # launches SIGKILLed (the kernel's OOM killer) beside others, relaunched alone
    relaunched_alone: int = 0
    wall_s: float = 0.0

    def add(self, status: str) -> None:
        self.measured[status] = self.measured.get(status, 0) + 1


def _ident(point: dict[str, Any]) -> tuple:
    return (int(point["participants"]), int(point["msg_size"]),
            point.get("delay_us"), point.get("tcalc_us"))


class LaunchGate:
    """Launches run side by side (setting ``jobs``), except one that must run alone: a
    launch the kernel killed (SIGKILL: the OOM killer picks the largest process, which
    may be the victim of the others' memory) is relaunched with nothing beside it.
    ``slot.overlapped`` says whether another launch ran during one's life."""

    @dataclass
    class Slot:
        overlapped: bool = False

    def __init__(self, stopping):
        self._cv = threading.Condition()
        self._active: list[LaunchGate.Slot] = []
        self._alone_waiting = 0         # launches waiting to run alone go first
        self._alone_running = False
        self._stopping = stopping

    def _must_wait(self, alone: bool) -> bool:
        if self._stopping():
            return False
        return bool(self._active) if alone else bool(self._alone_waiting or self._alone_running)

    @contextmanager
    def enter(self, alone: bool = False):
        slot = self.Slot()
        with self._cv:
            self._alone_waiting += alone
            while self._must_wait(alone):
                self._cv.wait(0.5)
            self._alone_waiting -= alone
            self._alone_running = alone
            for other in self._active:
                other.overlapped = slot.overlapped = True
            self._active.append(slot)
        try:
            yield slot
        finally:
            with self._cv:
                self._active.remove(slot)
                self._alone_running = self._alone_running and not alone
                self._cv.notify_all()


class Campaign:
    def __init__(self, name: str, backend: Backend, store: Store, settings,
                 show_progress: bool = True, retry_failed: bool | frozenset[str] = False,
                 placer=None):
        """retry_failed: measure stored failures again, all (True) or those whose status is
        in the set (e.g. {"crashed"}: killed for memory while something ran beside it)."""
        self.name, self.backend, self.store, self.settings = name, backend, store, settings
        self.placer = placer
        self.show_progress, self.retry_failed = show_progress, retry_failed
        self.provenance = backend.provenance()
        # how the backend measures beyond the key (Backend.run_settings): recorded in each
        # run's settings; a stored point measured otherwise is measured again
        settings_only = ("smpi_config", *backend.run_settings)
        self.run_settings = {k: self.provenance.get(k) for k in settings_only}
        self.context = {k: v for k, v in self.provenance.items() if k not in settings_only}
        self._lock = threading.Lock()       # guards the summary and the store across workers
        self._stopping = False              # interrupted: launches that end are not stored
        self._gate = LaunchGate(lambda: self._stopping)
        # store keys of points this campaign skipped as already measured (by any campaign):
        # Results.from_store(store, name, also_keys=...) gives the campaign's whole space
        self.reused_keys: set[str] = set()
        # store keys of every point planned (measured now or before): what the campaign's
        # results are when its name already holds points of another plan (e.g. measured
        # with MPI_SUM before a --reduction-op charged-sum run, or before a key change)
        self.planned_keys: set[str] = set()
        # time.monotonic() after which no launch starts (a tuning budget): what was not
        # launched by then is left unmeasured, not stored (CampaignSummary.past_deadline)
        self.deadline: float | None = None
        self.context["bench"] = {k: settings.values[k]
                                 for k in ("warmup", "min_reps", "max_reps", "rse", "reduction_op")}

    # -- planning -------------------------------------------------------
    def jobs(self, specs: list[BenchSpec], summary: CampaignSummary) -> list[Job]:
        budget = self.settings.check_memory_mb * 2 ** 20
        jobs = []
        for spec in specs:
            provider = self.backend.provider()
            keys = {_ident(p): k for p, k in zip(spec.points(), self.keys_of(spec))}
            self.planned_keys |= set(keys.values())
            stored = self.store.statuses(keys.values())
            # a point measured with another build of colltune's algorithms is measured again
            other = self.store.mismatched_keys(stored, provider.reuse_labels(spec.algorithm),
                                               UNKNOWN_WHEN_ABSENT)
            summary.measured_otherwise += len(other)
            # ... and one measured with other settings of the backend (Backend.run_settings)
            elsewise = self.store.keys_run_otherwise(set(stored) - other, {
                k: self.run_settings[k] for k in self.backend.run_settings})
            for k in elsewise.values():
                summary.other_settings[k] = summary.other_settings.get(k, 0) + 1
            other |= set(elsewise)
            stored = {k: st for k, st in stored.items() if k not in other}
            done = set(stored)
            failed = {k for k, st in stored.items() if st != OK}
            again = failed if self.retry_failed is True else \
                {k for k in failed if stored[k] in (self.retry_failed or ())}
            self.store.forget(again)
            done -= again
            for k in failed - again:
                summary.skipped_failures[stored[k]] = summary.skipped_failures.get(stored[k], 0) + 1
            # the sizes whose result data this run checks (the others are timed unchecked)
            check = self.settings.check
            checked_sizes = {m for m in spec.sizes if check != "none" and spec.nprocs *
                             check_bytes_per_rank(spec.collective, m, spec.nprocs) <= budget}
            # a stored point is reused only if it has what this run asks for: a run that
            # checks never takes an unchecked point (--check none) as checked, a run that
            # times never takes a checked-only one (--check only) as timed
            lacking = self.store.lacking_keys(
                done, need_time=check != "only",
                need_check={k for i, k in keys.items() if i[1] in checked_sizes})
            done -= lacking
            summary.remeasured += len(lacking)
            lacking |= other
            summary.skipped_points += len(done)
            self.reused_keys |= done
            self.store.add_campaign_keys(self.name, done)      # its results include them
            todo_sizes = sorted({i[1] for i, k in keys.items() if k not in done})
            if not todo_sizes:
                continue
            groups = [(check, [m for m in todo_sizes if m in checked_sizes]),
                      ("none", [m for m in todo_sizes if m not in checked_sizes])]
            for mode, sizes in groups:
                if sizes:
                    jobs.append(Job(spec.with_sizes(sizes), mode,
                                    {i: k for i, k in keys.items() if i[1] in sizes and k not in done},
                                    frozenset(lacking)))
        return jobs

    # -- execution ------------------------------------------------------
    def run(self, specs: list[BenchSpec]) -> CampaignSummary:
        summary = CampaignSummary()
        start = time.monotonic()
        self.backend.provider()          # probe once here, not concurrently in the workers
        jobs = self.jobs(specs, summary)
        allow_launches()
        progress = Progress(len(jobs), enabled=self.show_progress)
        workroot = tempfile.mkdtemp(prefix="colltune-")
        pool = ThreadPoolExecutor(max_workers=self.settings.jobs)
        try:
            futures = {pool.submit(self._execute, job, os.path.join(workroot, str(i)), summary): job
                       for i, job in enumerate(jobs)}
            for fut in as_completed(futures):
                job = futures[fut]
                fut.result()
                with self._lock:
                    counts = dict(summary.measured)
                progress.step(f"{job.spec.collective} {job.spec.algorithm.label} "
                              f"{job.spec.nodes}x{job.spec.ppn}", counts)
        except BaseException:
            # Ctrl-C (or a worker's error): queued jobs never start, launches in flight
            # are killed and not stored (an interrupted launch is no measurement)
            self._stopping = True
            pool.shutdown(wait=False, cancel_futures=True)
            stop_launches()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            allow_launches()        # every worker has ended: launches outside a campaign may run
            progress.close()
            shutil.rmtree(workroot, ignore_errors=True)
        summary.wall_s = time.monotonic() - start
        return summary

    def _execute(self, job: Job, workdir: str, summary: CampaignSummary) -> None:
        """Run a job, storing each launch as it ends; after a crash or hang,
        relaunch what was not reached."""
        spec = job.spec
        stalled = 0      # consecutive launches that timed out before finishing any point
        alone = False    # the next launch runs with no other beside it (LaunchGate)
        while not self._stopping:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                with self._lock:
                    summary.past_deadline += 1
                    summary.past_deadline_colls.add(spec.collective)
                return
            launch = Launch(spec.nodes, spec.ppn, spec.bench_args(self.settings, job.check),
                            self.backend.provider().force(spec.algorithm), self.settings.timeout)
            with self._gate.enter(alone) as slot:
                result, placed = self._launch(launch, workdir, spec)
            if self._stopping:
                return
            points, unreached = self._classify(spec, job, result)
            if slot.overlapped and _sigkilled(result) and not alone:
                # killed beside other launches, perhaps for their memory: the point it was
                # at is not recorded as crashed but measured again, alone
                culprit = [_ident(p) for p in points if p["status"] == CRASHED]
                points = [p for p in points if p["status"] != CRASHED]
                unreached, alone = culprit + unreached, bool(culprit)
                with self._lock:
                    summary.relaunched_alone += alone
            else:
                alone = False
            stalled = stalled + 1 if result.timed_out and not result.records else 0
            if unreached and stalled >= MAX_STALLED_LAUNCHES:
                # Too slow (or hung) at every point tried: do not pay a timeout per size.
                points += [self._not_attempted(ident, job, stalled) for ident in unreached]
                unreached = []
            with self._lock:
                self._write(job, result, points, placed)
                summary.launches += 1
                for p in points:
                    summary.add(p["status"])
            if not unreached:
                return
            spec = spec.with_sizes(sorted({i[1] for i in unreached}))

    def _launch(self, launch: Launch, workdir: str, spec: BenchSpec):
        if self.placer is None:
            return self.backend.run(launch, workdir), None
        with self.placer.hold(launch.nodes, task=spec) as held:
            launch.hosts = list(held.hosts)
            result = self.backend.run(launch, workdir)
        return result, {"groups": list(held.groups), "hosts": list(held.hosts)}

    def keys_of(self, spec: BenchSpec) -> list[str]:
        """The store keys of a spec's points, in its order (the provider may add to them:
        Provider.key_fields)."""
        context = {**self.context, **self.backend.provider().key_fields(spec.algorithm)}
        return [spec.key_of(p, context) for p in spec.points()]

    def measured(self, spec: BenchSpec) -> list[dict]:
        """The stored measurement rows of a spec's points, in the spec's order; points are
        found by key, whichever campaign measured them; unmeasured ones are left out."""
        keys = self.keys_of(spec)
        rows: dict[str, dict] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = (f"SELECT * FROM measurements WHERE key IN ({','.join('?' * len(chunk))}) "
                 "ORDER BY point_id")
            with self._lock:
                rows.update((r["key"], dict(r)) for r in self.store.db.execute(q, chunk))
        return [rows[k] for k in keys if k in rows]

    @staticmethod
    def _not_attempted(ident: tuple, job: Job, stalled: int) -> dict:
        return {**_missing(ident, TIMEOUT, f"{NOT_ATTEMPTED}: {stalled} consecutive launches of "
                                           f"this algorithm timed out before finishing a point"),
                "key": job.keys.get(ident)}

    def _classify(self, spec: BenchSpec, job: Job, result: LaunchResult):
        got = {_ident(r): r for r in result.records}
        expected = [_ident(p) for p in spec.points()]
        points, unreached = [], []
        culprit_found = False
        for ident in expected:
            rec = got.get(ident)
            if rec is not None:
                p = {k: rec.get(k) for k in _RECORD_FIELDS}
                p["labels_json"] = json.dumps(rec["labels"]) if rec.get("labels") else None
                if rec.get("valid") is False:
                    p["status"] = WRONG
                elif rec.get("ttc_median_s") is None and job.check != "only":
                    p["status"], p["check_error"] = ERROR, "no time reported"
                else:
                    p["status"] = OK
            elif result.clean:
                p = _missing(ident, ERROR, "bench finished without measuring this point")
            elif not culprit_found:
                culprit_found = True
                p = _missing(ident, TIMEOUT if result.timed_out else CRASHED, _failure_text(result))
            else:
                unreached.append(ident)
                continue
            p["key"] = job.keys.get(ident)
            points.append(p)
        if not culprit_found and not result.clean and not unreached and points:
            # Crashed after its last point (e.g. in MPI_Finalize): keep the data, say so.
            for p in points:
                if p["status"] == OK:
                    p["check_error"] = "launch ended abnormally after this point: " + _failure_text(result)[:200]
        return points, unreached

    def _write(self, job: Job, result: LaunchResult, points: list[dict],
               placed: dict | None = None) -> None:
        spec, hdr = job.spec, result.header or {}
        status = "ok" if result.clean else ("timeout" if result.timed_out else "crashed")
        prov = self.provenance
        run = {
            "campaign": self.name, "started": result.ended_at - result.wall_s, "finished": result.ended_at,
            "status": status, "backend": prov["backend"], "platform": prov.get("platform"),
            "platform_sha256": prov.get("platform_sha256"), "provider": spec.algorithm.provider,
            "mpi_library": prov.get("mpi_library"), "mpi_version": prov.get("mpi_version"),
            "library_version": hdr.get("mpi_library"), "collective": spec.collective,
            "algorithm": spec.algorithm.label, "algorithm_kind": spec.algorithm.kind,
            "nodes": spec.nodes, "ppn": spec.ppn, "nprocs": spec.nprocs, "scenario": spec.scenario,
            "settings_json": json.dumps({"check": job.check, **self.context["bench"],
                                         **self.run_settings,
                                         **({"placement": placed} if placed else {})}),
            "colltune_version": __version__, "exit_code": result.exit_code,
            "error": None if result.clean else _failure_text(result),
            "wall_s": result.wall_s, "command": " ".join(result.command),
        }
        self.store.add_run(run, [p for p in points if p.get("key")], job.replace)


def _sigkilled(result: LaunchResult) -> bool:
    """Killed by SIGKILL, not by its timeout."""
    import signal
    return not result.timed_out and _signal_of(result.exit_code) == signal.SIGKILL


def _missing(ident: tuple, status: str, why: str) -> dict:
    """A point the launch did not measure, recorded with its status and reason."""
    return {"participants": ident[0], "msg_size": ident[1], "delay_us": ident[2],
            "tcalc_us": ident[3], "status": status, "check_error": why}


def _failure_text(result: LaunchResult) -> str:
    why = (f"timed out after {result.wall_s:.0f} s" if result.timed_out
           else f"exit code {result.exit_code}{_signal_name(result.exit_code)}")
    # the program's own words (colltune-bench names a bad option) first, then the
    # launcher's last ones, less SimGrid's "please report a bug" banner
    lines = [ln for ln in result.output_tail.strip().splitlines() if ln.strip()
             and not any(b in ln for b in _BANNER) and not ln.lstrip().startswith("->")
             and "[smpi_coll/INFO] Switch to algorithm" not in ln
             and "Current backtrace" not in ln]
    own = [ln for ln in lines if ln.lstrip().startswith(("colltune-bench:", "colltune:"))][:3]
    # SimGrid's reason (an uncaught exception, a failed assertion, a deadlock): its message
    own += [ln.split("CRITICAL] ", 1)[1] for ln in lines if "CRITICAL] " in ln][:2]
    lines = own + [ln for ln in lines[-6:] if ln not in own]
    return why + (": " + " | ".join(lines) if lines else "")


_BANNER = ("If you think you've found a bug in SimGrid", "Minimal Working Example",
           "of the fault captured with gdb", "If it does not help, this may have one of the "
           "following causes", "a bug in SimGrid", "a bug in your application",
           "a bug in the SimGrid bindings")


def _signal_of(code: int | None) -> int:
    """The signal that killed a process, from its exit code: -N, or 128+N from a shell;
    0 for none."""
    return -code if code is not None and code < 0 else code - 128 if code and 128 < code < 160 else 0


def _signal_name(code: int | None) -> str:
    """' (SIGSEGV)' for a process killed by a signal."""
    import signal
    n = _signal_of(code)
    try:
        return f" ({signal.Signals(n).name})" if n else ""
    except ValueError:
        return ""
