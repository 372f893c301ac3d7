"""Every predefined datatype x predefined operation through every colltune
reduction (native/tests/typematrix.c): the 1-byte integers, MPI_C_BOOL,
long double, the complex types, the MINLOC/MAXLOC pair types and the
Fortran-named types the library defines, x MPI_SUM ... MPI_MAXLOC (plus
MPI_REPLACE and MPI_NO_OP), counts 0, 1, 7 and 1031 (several segments of the
1000-byte probes), in place or not, communicators of several sizes, every
reduce and allreduce algorithm with its defaults and each probe value (HAN's
modules included). The expectation is the library's own answer on the same
inputs; a pair the library rejects must give the library's error class from
colltune too, having run the library. On SMPI (6 ranks on 3 hosts, HAN with
both levels, sub-communicators of 1..3) and on Open MPI and MPICH (2 ranks as
2 virtual nodes, and as one node of 2)."""
from __future__ import annotations

import re
import subprocess

import pytest

from pathlib import Path

from conftest import CACHE

from colltune import mpi, platforms
from test_error_paths import launch
from test_algorithms_smpi import NATIVE

COUNTS = "0,1,7,1031"


def build(mpicc, name):
    """Built once per MPI into the build cache (make rebuilds what changed)."""
    out = Path(CACHE) / "tests-native" / name
    r = subprocess.run(["make", "-s", "-C", str(NATIVE), "typematrix", f"MPICC={mpicc}", f"OUT={out}"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stdout + r.stderr
    return out / "colltune-typematrix"


def check(out):
    fails = [x for x in out.splitlines() if x.startswith("FAIL ")]
    assert not fails, "\n".join(fails[:40])
    m = re.search(r"^types: (\d+), ops: (\d+)$", out, re.M)
    assert m and int(m[1]) >= 40 and int(m[2]) >= 13, out[-2000:]
    m = re.search(r"accepted by the library (\d+), run by colltune (\d+), declined to the library (\d+)", out)
    assert m, out[-2000:]
    accepted, ours, declined = map(int, m.groups())
    # colltune really runs most pairs itself (a matrix that declines
    # everything would pass trivially) and declines only a minority
    assert ours > 0.8 * accepted and declined < 0.2 * accepted, m[0]
    m = re.search(r"^(\d+) passed, 0 failed$", out, re.M)
    assert m and int(m[1]) > 100000, out[-2000:]


def test_type_matrix_smpi(tmp_path):
    exe = build("smpicc", "smpi")
    plat = platforms.load("small")
    hosts = plat.write_hostfile(3, 2, tmp_path / "hosts")
    cmd = ["smpirun", "-np", "6", "-platform", plat.xml_path, "-hostfile", hosts, *plat.smpirun_cfg_args(),
           "--log=root.thres:critical", str(exe), "-s", "3", "-c", COUNTS]
    r = launch(cmd, 600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    check(r.stdout)


@pytest.mark.parametrize("name", ["openmpi", "mpich"])
@pytest.mark.parametrize("vnode", ["1", "2"])
def test_type_matrix_real(name, vnode, tmp_path):
    impl = mpi.find(name)
    exe = build(impl.cc, name)
    env = {**impl.run_env(), "COLLTUNE_VNODE_SIZE": vnode}
    r = launch([impl.launcher, "-n", "2", str(exe), "-c", COUNTS], 300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    check(r.stdout)
