"""Legal programs whose ranks pass different arguments must not split the ranks between
colltune's path and the library's (a review of online mode; the same holds for rules and
COLLTUNE_FORCE). Every launch has a timeout: a hang fails.

1. MPI_BOTTOM on some ranks only (tests/data/online/bottom.c): a bcast root sending
   MPI_BOTTOM with an absolute-address hindexed type while the others receive n x MPI_INT,
   an allgather with MPI_BOTTOM on one rank's send side and another's receive side. On
   Open MPI and MPICH MPI_BOTTOM is a null pointer, which ct_check_args had taken for an
   error on that rank alone: it called the library, its peers ran colltune's algorithm,
   the job hung (online mode and COLLTUNE_FORCE alike). SMPI too (its MPI_BOTTOM is not
   null; bcast only: SMPI's own allgather gets MPI_BOTTOM wrong, without colltune too).
2. Ranks at different thread levels (tests/data/online/thr.c: rank 0 MPI_THREAD_MULTIPLE,
   the others SINGLE): online mode's set-up returned on rank 0 alone between two of its
   allreduces, and the guard stayed on everywhere but there: MPI_Init (resp. the guard's
   deciding allreduce) hung. The thread level is now agreed: off on every rank, one warning.
   Open MPI only: MPICH 5.0.2 itself (no colltune) hangs when its ranks ask for different
   thread levels.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import CACHE, REPO, have_mpi

from colltune import mpi, platforms
from colltune.proc import run_group
from colltune.providers.colltune import libcolltune, link_args, preload_args
from colltune.subcommands.run import compile_app

DATA = os.path.join(REPO, "tests", "data", "online")
MODES = {
    "online": {"COLLTUNE_ONLINE_BUDGET": "6"},            # COLLTUNE_ONLINE set per test
    "force": {"COLLTUNE_FORCE": "bcast:binomial;allgather:ring"},
    "force-han": {"COLLTUNE_FORCE": "bcast:han;allgather:han", "COLLTUNE_VNODE_SIZE": "2"},
}


class Launcher:
    def __init__(self, name: str, tmp, program: str):
        self.name, self.tmp = name, tmp
        self.impl = mpi.find(name)
        lib = libcolltune(self.impl, CACHE)
        src = os.path.join(DATA, program)
        if name == "smpi":
            app = compile_app(self.impl, src, CACHE, link_args(lib))
            plat = platforms.load("small")
            hosts = plat.write_hostfile(2, 2, tmp / "hosts")
            self.argv = lambda n: [self.impl.launcher, "-np", str(n), "-platform", plat.xml_path,
                                   "-hostfile", hosts, *plat.smpirun_cfg_args(),
                                   "--log=root.thres:critical", str(app)]
        else:
            app = compile_app(self.impl, src, CACHE, [])
            extra = ["--oversubscribe"] if name == "openmpi" else []
            self.argv = lambda n: [self.impl.launcher, *extra, *preload_args(self.impl, lib),
                                   "-n", str(n), str(app)]

    def __call__(self, n: int, env: dict, args=(), timeout: float = 60):
        try:
            return run_group(self.argv(n) + list(args), timeout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=self.tmp,
                             env={**self.impl.run_env(), **env})
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{self.name} {env}: hung (killed after {timeout} s)\n"
                        f"{(exc.stdout or '')[-1000:]}\n{(exc.stderr or '')[-2000:]}")


def installed(names):
    return [pytest.param(n, marks=pytest.mark.skipif(not have_mpi(n), reason=f"{n} not installed"))
            for n in names]


@pytest.mark.parametrize("name", installed(["openmpi", "mpich", "smpi"]))
def test_mpi_bottom_on_some_ranks_only_does_not_hang(name, tmp_path):
    run = Launcher(name, tmp_path, "bottom.c")
    args = ["20", "bcast"] if name == "smpi" else []     # SMPI's own allgather: MPI_BOTTOM wrong
    base = run(4, {}, args)
    assert base.returncode == 0 and "bottom: 0 wrong elements" in base.stdout, base.stdout + base.stderr
    for mode, env in MODES.items():
        if mode == "online":
            env = {**env, "COLLTUNE_ONLINE": str(tmp_path / "state"),
                   "COLLTUNE_ONLINE_LOG": str(tmp_path / "log")}
        proc = run(4, env, args)
        assert proc.returncode == 0, f"{mode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
        assert "bottom: 0 wrong elements" in proc.stdout, f"{mode}:\n{proc.stdout}\n{proc.stderr[-2000:]}"
        assert "warning" not in proc.stderr, f"{mode}:\n{proc.stderr[-2000:]}"
    # online mode decided the calls (every rank logged the same arms: checked by
    # test_online_native for random arms; here that it ran colltune's arms at all)
    arms = {line.split()[-1] for f in (tmp_path / "log").iterdir() for line in f.read_text().splitlines()}
    assert arms - {"library"}, arms


@pytest.mark.parametrize("what", ["online", "guard"])
@pytest.mark.parametrize("name", installed(["openmpi"]))      # MPICH 5.0.2 hangs on thr.c by itself
def test_ranks_at_different_thread_levels_do_not_hang(name, what, tmp_path):
    run = Launcher(name, tmp_path, "thr.c")
    rules = tmp_path / "r.rules"
    rules.write_text("colltune-rules 1\nallreduce -> recursive_doubling\n")
    cases = {
        # online mode: the set-up's fingerprint allreduce had been left by rank 0 alone
        "online": ({"COLLTUNE_ONLINE": str(tmp_path / "state")},
                   "COLLTUNE_ONLINE: not under MPI_THREAD_MULTIPLE (on some rank"),
        # the guard (rules kept under MPI_THREAD_MULTIPLE by COLLTUNE_SERIAL_COLLECTIVES):
        # rank 0 ran the rules' algorithm, the others alternated it with the library
        "guard": ({"COLLTUNE_RULES": str(rules), "COLLTUNE_GUARD": "2",
                   "COLLTUNE_SERIAL_COLLECTIVES": "1"},
                  "COLLTUNE_GUARD ignored: its counters are not thread-safe (MPI_THREAD_MULTIPLE on some rank)"),
    }
    env, warning = cases[what]
    proc = run(2, env, timeout=60)
    assert proc.returncode == 0, f"{what}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    m = re.search(r"thr: levels (\d+)\.\.(\d+), (\d+) wrong", proc.stdout)
    assert m and m[1] != m[2] and m[3] == "0", f"{what}:\n{proc.stdout}\n{proc.stderr[-2000:]}"
    assert proc.stderr.count(warning) == 1, f"{what}:\n{proc.stderr[-2000:]}"
    assert not (tmp_path / "state" / "state.txt").exists()      # online mode was off everywhere
