"""Error paths through the interposer behave like the library's (issue 19).

1. Erroneous calls under MPI_ERRORS_RETURN (tests/data/interpose/errpaths.c,
   the shapes of MPICH's errors/coll tests: MPI_MAX on MPI_BYTE as in `rerr`,
   aliased buffers as in `noalias2` -- the root alone calling MPI_Reduce --,
   negative counts, null buffers and handles, invalid roots, ops not defined
   on the type): with colltune's rules sending every collective to `han` or
   to flat algorithms, every rank gets the same error class as without the
   interposer, nothing hangs, and correct collectives right after each case
   still give the right answer (nothing was left in flight). Cases the library
   itself crashes on are left out for that library.
2. Under MPI_ERRORS_ARE_FATAL the job ends as the library ends it.
3. A failure inside a running colltune algorithm (every local reduction of
   one rank failing, algotest -F) leaves no peer waiting and no message
   behind: every rank returns, the next call is right.
On SMPI, Open MPI and MPICH. Every launch has a timeout: a hang fails.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import CACHE, REPO

from colltune import mpi, platforms
from colltune.proc import run_group
from colltune.providers.colltune import libcolltune, link_args, preload_args
from colltune.subcommands.run import compile_app
from pathlib import Path

from test_algorithms_smpi import build, in_parallel

APP = os.path.join(REPO, "tests", "data", "interpose", "errpaths.c")
RULES = {
    "han": "colltune-rules 1\nbcast -> han\nreduce -> han\nallreduce -> han\nallgather -> han\n",
    "flat": "colltune-rules 1\nbcast -> binomial\nreduce -> binomial\n"
            "allreduce -> recursive_doubling\nallgather -> ring\n",
}
CASES = ("reduce_byte_max allreduce_byte_max allreduce_double_band reduce_op_null allreduce_op_null "
         "bcast_count_neg reduce_count_neg allreduce_count_neg allgather_count_neg bcast_null_buf "
         "allreduce_null_buf bcast_root_size reduce_root_neg bcast_type_null allreduce_type_null "
         "allgather_type_null bcast_type_uncommitted allreduce_alias reduce_alias_root allgather_alias "
         "bcast_comm_null allreduce_comm_null").split()
# what the library alone crashes or hangs on (checked without colltune)
LIBRARY_FAILS = {
    "mpich": {"reduce_count_neg", "allreduce_count_neg", "allreduce_type_null"},   # segfault/abort
    "openmpi": {"bcast_null_buf", "allreduce_null_buf"},                           # segfault
    "smpi": {"reduce_alias_root"},                   # the root alone: SMPI reports a deadlock
}


def launch(cmd, timeout, **kw):
    """Run a job in its own session: a hang kills every process of it (smpirun
    leaves its simulator running when only smpirun is killed)."""
    return run_group(cmd, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


class Launcher:
    def __init__(self, name, tmp, app=APP):
        self.name, self.tmp = name, tmp
        self.impl = mpi.find(name)
        lib = libcolltune(self.impl, CACHE)
        for mode, text in RULES.items():
            (tmp / f"{mode}.rules").write_text(text)
        if name == "smpi":
            app = compile_app(self.impl, app, CACHE, link_args(lib))
            plat = platforms.load("small")
            hosts = plat.write_hostfile(2, 2, tmp / "hosts")    # 2 nodes x 2: HAN has both levels
            self.argv = lambda n, mode: [self.impl.launcher, "-np", str(n), "-platform", plat.xml_path,
                                         "-hostfile", hosts, *plat.smpirun_cfg_args(),
                                         "--log=root.thres:critical", str(app)]
        else:
            app = compile_app(self.impl, app, CACHE, [])
            self.argv = lambda n, mode: [self.impl.launcher,
                                         *(preload_args(self.impl, lib) if mode != "none" else []),
                                         "-n", str(n), str(app)]

    def __call__(self, mode, n, args, timeout=90):
        env = {**self.impl.run_env(), "COLLTUNE_VNODE_SIZE": "1"}   # real MPI: one node per rank
        if mode != "none":
            env["COLLTUNE_RULES"] = str(self.tmp / f"{mode}.rules")
        return launch(self.argv(n, mode) + args, timeout, env=env, cwd=self.tmp)


@pytest.fixture(scope="module", params=["smpi", "openmpi", "mpich"])
def launcher(request, tmp_path_factory):
    return Launcher(request.param, tmp_path_factory.mktemp(f"errpaths-{request.param}"))


def nranks(launcher):
    return 4 if launcher.name == "smpi" else 2


def lines(proc):
    return [x for x in proc.stdout.splitlines() if re.match(r"^\w+:( (-|\d+))+$", x)]


def test_erroneous_calls_behave_like_the_library(launcher):
    cases = [c for c in CASES if c not in LIBRARY_FAILS[launcher.name]]
    base = launcher("none", nranks(launcher), cases)
    assert base.returncode == 0, base.stdout + base.stderr
    want = lines(base)
    assert len(want) == len(cases)
    # the library reports an error for (nearly) all of them: the test is not vacuous
    assert sum(" 0" not in x for x in want) >= len(cases) - 4, want
    assert f"errpaths: {len(cases)} cases, 0 wrong values after them" in base.stdout
    for mode in RULES:
        proc = launcher(mode, nranks(launcher), cases)
        assert proc.returncode == 0, f"{mode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
        assert lines(proc) == want, mode
        assert f"errpaths: {len(cases)} cases, 0 wrong values after them" in proc.stdout, mode


def test_the_root_alone_with_aliased_buffers_does_not_hang(launcher):
    """noalias2's shape: rank 0 alone calls MPI_Reduce(buf, buf, ...): the library
    returns an error without communicating; colltune must not start its
    algorithm (whose receives would match the peers' next collective)."""
    if "reduce_alias_root" in LIBRARY_FAILS[launcher.name]:
        pytest.skip(f"{launcher.name} itself does not survive this case")
    base = launcher("none", nranks(launcher), ["reduce_alias_root", "allreduce_alias"])
    for mode in RULES:
        proc = launcher(mode, nranks(launcher), ["reduce_alias_root", "allreduce_alias"])
        assert proc.returncode == 0 and lines(proc) == lines(base), proc.stdout + proc.stderr[-2000:]


def test_errors_are_fatal_as_in_the_library(launcher):
    """MPI_ERRORS_ARE_FATAL: the job ends with the library's own status and
    message (SMPI does not abort on this error: neither does colltune)."""
    base = launcher("none", 2, ["fatal", "allreduce_double_band"])
    proc = launcher("han", 2, ["fatal", "allreduce_double_band"])
    assert proc.returncode == base.returncode
    if launcher.name == "smpi":
        assert base.returncode == 0
        return
    assert base.returncode != 0
    msg = {"mpich": "Invalid MPI_Op", "openmpi": "MPI_ERR_OP"}[launcher.name]
    assert msg in base.stderr and msg in proc.stderr, proc.stderr[-2000:]


def test_same_signature_different_datatypes_agree(launcher):
    """MPI lets ranks describe the same bytes with different datatypes (MPI_INT x 5,
    a vector with holes x 1, contiguous(5, MPI_INT) x 1; all three on SMPI): bcast from every root and
    allgather still give every rank the data, with han and flat rules (a decision
    by datatype used to send some ranks to the library and hang; MPICH's coll/bcast
    with dtpools found it)."""
    mix = Launcher(launcher.name, launcher.tmp,
                   os.path.join(REPO, "tests", "data", "interpose", "mixtypes.c"))
    n = 5 if launcher.name == "smpi" else 2
    for mode in ("none", *RULES):
        proc = mix(mode, n, [])
        assert proc.returncode == 0, f"{mode}: {proc.stdout}{proc.stderr[-2000:]}"
        assert re.search(r"^mixtypes: \d+ checks, 0 failures$", proc.stdout, re.M), (mode, proc.stdout)


# ---- 3. faults inside a running algorithm ---------------------------------------
FAULT_ARGS = ["-F", "-m", "blocking", "-r", "few", "-c", "0,1,7,100"]


def fault_summary(out):
    m = re.search(r"^injected faults: (\d+) calls, error returned on the failing rank in (\d+)$", out, re.M)
    assert m, out[-2000:]
    fails = [x for x in out.splitlines() if x.startswith("FAIL ")]
    assert not fails, "\n".join(fails[:20])
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out[-2000:]
    return int(m[1]), int(m[2])


def test_fault_inside_algorithms_smpi(tmp_path):
    exe = build("smpicc", Path(CACHE) / "tests-native" / "smpi")
    plat = platforms.load("small")
    hosts = plat.write_hostfile(3, 3, tmp_path / "hosts")       # HAN: 3 nodes x 3

    def one(coll):                  # the two simulations at once (each uses one core)
        cmd = ["smpirun", "-np", "9", "-platform", plat.xml_path, "-hostfile", hosts,
               *plat.smpirun_cfg_args(), "--log=root.thres:critical", str(exe),
               *FAULT_ARGS, "-s", "9", "-a", coll]
        return launch(cmd, 300, cwd=tmp_path)
    colls = ("reduce", "allreduce")
    for coll, r in zip(colls, in_parallel(one, colls)):
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        run, reported = fault_summary(r.stdout)
        # the failing rank saw its error in many calls (not in those where it
        # reduces nothing: count 0, a leaf of a reduce tree, the library's module)
        assert run > 1000 and reported > run // 10, (coll, run, reported)


@pytest.mark.parametrize("name", ["openmpi", "mpich"])
def test_fault_inside_algorithms_real(name, tmp_path):
    impl = mpi.find(name)
    exe = build(impl.cc, Path(CACHE) / "tests-native" / name)
    env = {**impl.run_env(), "COLLTUNE_VNODE_SIZE": "1"}
    for coll in ("reduce", "allreduce"):
        cmd = [impl.launcher, "-n", "2", str(exe), *FAULT_ARGS, "-s", "2", "-a", coll]
        r = launch(cmd, 300, env=env)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        run, reported = fault_summary(r.stdout)
        assert run > 100 and reported > run // 10, (coll, run, reported)
