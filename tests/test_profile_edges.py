"""Traffic profiles at the edges an analyst's review found wrong, on the real libraries:
a non-blocking collective in flight across a blocking one (Open MPI's monitoring window),
calls no counter wraps (MPI_Alltoallw, large-count collectives), a persistent send created
while counting is paused, a region name cut inside a UTF-8 character, and the job id of a
run launched by hand with no launcher id (MPICH's hydra)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from colltune.profile.counts import ProfileError, load_profile

from conftest import have_mpi, run_cli

def monitored_profile(tmp_path, source: str):
    """The program run on 2 ranks of Open MPI under --profile, with its monitoring on."""
    src = tmp_path / "prog.c"
    src.write_text(source)
    out = tmp_path / "prof"
    run_cli("run", "--backend", "local", "--mpi", "openmpi", "-n", "2", "--profile", str(out),
            "--", str(src), timeout=300)
    prof = load_profile(out)
    assert str(prof.meta.get("monitoring", "")).startswith("on"), prof.meta
    return prof


# a 1 MiB MPI_Iallreduce left in flight across 20 barriers, then a bcast
INFLIGHT = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int n = 1 << 18;
    int *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    char c[1000] = {0};
    MPI_Request q;
    MPI_Init(&argc, &argv);
    MPI_Iallreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
    for (int i = 0; i < 20; i++) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Bcast(c, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
def test_a_non_blocking_collective_in_flight_is_not_counted_as_the_blocking_one(tmp_path):
    """The pml's counters over the barriers' windows held the in-flight MPI_Iallreduce's
    traffic: 'barrier (monitoring)' showed the ring allreduce's megabytes. Those windows
    are now left out and said so; the bcast after the wait is measured as before."""
    prof = monitored_profile(tmp_path, INFLIGHT)
    assert prof.pairs("run", "barrier").total == (0, 0)
    assert prof.visibility("run", "barrier") == "not visible"
    assert prof.library[("run", "barrier")]["calls"] == 40          # 20 calls x 2 ranks
    assert any("40 barrier call(s) on 2 rank(s) ran while a non-blocking collective" in n
               for n in prof.notes), prof.notes
    assert prof.visibility("run", "bcast") == "monitoring"
    assert prof.pairs("run", "bcast").total[0] >= 1000


# the MPI_Iallreduce completes in a Waitall of 100 requests, at index 80
LATE_INDEX = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int n = 1 << 16;
    int *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    char c[1000] = {0};
    MPI_Request q[100];
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 100; i++) q[i] = MPI_REQUEST_NULL;
    MPI_Iallreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[80]);
    MPI_Waitall(100, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 20; i++) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(c, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.skipif(not have_mpi("openmpi"), reason="Open MPI not installed (make setup)")
def test_a_non_blocking_collective_completed_late_in_a_long_array_is_no_longer_in_flight(tmp_path):
    """Completion calls looked at the first 64 requests of their array only: an
    MPI_Iallreduce completed at index 80 of a Waitall stayed in flight to the end, and
    every later blocking collective was left out as uncounted."""
    prof = monitored_profile(tmp_path, LATE_INDEX)
    assert prof.visibility("run", "barrier") == "monitoring", prof.notes
    assert prof.visibility("run", "bcast") == "monitoring", prof.notes
    assert prof.pairs("run", "bcast").total[0] >= 1000
    assert not any("ran while a non-blocking collective" in n for n in prof.notes), prof.notes


# rank 0: a persistent send created while paused and started 3 times after resuming; a
# region whose 63rd byte is the first of a two-byte character; an Alltoallw
EDGES = r"""
#include <mpi.h>
#include <string.h>
int main(int argc, char **argv)
{
    char name[80], buf[1000] = {0};
    int rank, size;
    MPI_Request q;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Pcontrol(0);
    if (rank == 0) MPI_Send_init(buf, 1000, MPI_CHAR, 1, 5, MPI_COMM_WORLD, &q);
    if (rank == 1) MPI_Recv_init(buf, 1000, MPI_CHAR, 0, 5, MPI_COMM_WORLD, &q);
    MPI_Pcontrol(1);
    memset(name, 'a', 62);
    strcpy(name + 62, "\xc3\xa9 and more");
    MPI_Pcontrol(100, name);
    for (int i = 0; i < 3; i++) {
        if (rank < 2) { MPI_Start(&q); MPI_Wait(&q, MPI_STATUS_IGNORE); }
    }
    MPI_Pcontrol(-100, name);
    if (rank < 2) MPI_Request_free(&q);
    int counts[64], displs[64];
    MPI_Datatype types[64];
    for (int i = 0; i < size; i++) counts[i] = 10, displs[i] = 10 * i, types[i] = MPI_CHAR;
    MPI_Alltoallw(buf, counts, displs, types, buf + 500, counts, displs, types, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.parametrize("lib", ["openmpi", "mpich"])
def test_paused_persistent_send_utf8_region_and_alltoallw(tmp_path, lib):
    """A persistent send created during MPI_Pcontrol(0) was never counted (0 B, 'exact');
    a region name cut inside 'é' made the rank files unreadable ('utf-8' codec can't
    decode, no file named); MPI_Alltoallw vanished from the profile."""
    if not have_mpi(lib):
        pytest.skip(f"{lib} not installed")
    src = tmp_path / "edges.c"
    src.write_text(EDGES)
    out = tmp_path / "prof"
    proc = run_cli("run", "--backend", "local", "--mpi", lib, "-n", "2", "--profile", str(out),
                   "--", str(src), timeout=300)
    assert "not open" not in proc.stderr, proc.stderr       # closed by its full name
    prof = load_profile(out)
    region = "a" * 62
    assert region in prof.regions(), prof.regions()
    assert prof.pairs(region, "p2p").total == (3000, 3)
    assert any("MPI_Alltoallw call(s) on 2 rank(s)" in n for n in prof.notes), prof.notes


def test_a_rank_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    out = tmp_path / "prof"
    run_cli("run", "--platform", "small", "--profile", str(out), "-n", "2", "--",
            str(_write(tmp_path / "hello.c", BCAST)), timeout=300)
    path = out / "rank-1.json"
    text = path.read_bytes()
    path.write_bytes(text.replace(b'"host": "', b'"host": "\xc3', 1))
    with pytest.raises(ProfileError) as exc:
        load_profile(out)
    assert f"{path}:" in str(exc.value) and "not UTF-8 (byte 0xc3" in str(exc.value)


BCAST = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    char c[100] = {0};
    MPI_Init(&argc, &argv);
    MPI_Bcast(c, 100, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed (make setup)")
def test_runs_launched_by_hand_with_hydra_have_their_own_job_ids(tmp_path):
    """MPICH's mpiexec sets no PMIx or Slurm id: every rank file of two such runs had the
    empty job id, so a stale rank file of an earlier run was merged silently. Rank 0 now
    draws one id for the run."""
    from colltune import mpi
    from colltune.providers.colltune import libcolltune
    impl = mpi.find("mpich")
    lib = libcolltune(impl, str(tmp_path / "cache"))
    app = tmp_path / "bcast"
    subprocess.run([impl.cc, str(_write(tmp_path / "bcast.c", BCAST)), "-o", str(app)],
                   check=True, env=impl.run_env())
    env = {k: v for k, v in impl.run_env().items() if not k.startswith(("PMIX_", "SLURM_"))}
    env.pop("COLLTUNE_PROFILE_JOB", None)
    for name in ("one", "two"):
        subprocess.run([impl.launcher, "-genv", "LD_PRELOAD", str(lib), "-genv", "COLLTUNE_PROFILE",
                        str(tmp_path / name), "-n", "2", str(app)], check=True, env=env, timeout=120)
    one = load_profile(tmp_path / "one")
    assert one.meta["job"].startswith("drawn:"), one.meta
    assert load_profile(tmp_path / "two").meta["job"] != one.meta["job"]
    shutil.copy(tmp_path / "two" / "rank-1.json", tmp_path / "one" / "rank-1.json")
    with pytest.raises(ProfileError) as exc:
        load_profile(tmp_path / "one")
    assert "files of 2 runs (" in str(exc.value)
    assert os.path.exists(tmp_path / "one" / "job.json")


@pytest.mark.skipif(not have_mpi("mpich"), reason="MPICH not installed (make setup)")
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare for a private mount")
def test_a_profile_folder_that_is_not_shared_is_said(tmp_path):
    """On a cluster, COLLTUNE_PROFILE=/tmp/... is a folder on each host: every host kept its
    own ranks' files and the reader could only say ranks were missing. Rank 1 here sees
    its own empty folder (a private tmpfs over it, as another host's /tmp) and says so."""
    from colltune import mpi
    from colltune.providers.colltune import libcolltune
    impl = mpi.find("mpich")
    lib = libcolltune(impl, str(tmp_path / "cache"))
    app = tmp_path / "bcast"
    subprocess.run([impl.cc, str(_write(tmp_path / "bcast.c", BCAST)), "-o", str(app)],
                   check=True, env=impl.run_env())
    prof = tmp_path / "prof"
    prof.mkdir()
    local = f'mount -t tmpfs none "{prof}" && exec "{app}"'
    proc = subprocess.run([impl.launcher, "-genv", "LD_PRELOAD", str(lib), "-genv", "COLLTUNE_PROFILE",
                           str(prof), "-n", "1", str(app), ":", "-n", "1", "unshare", "-m", "sh", "-c",
                           local], capture_output=True, text=True, env=impl.run_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"COLLTUNE_PROFILE={prof}: rank 1 (host " in proc.stderr, proc.stderr
    assert "does not see the files rank 0 writes there" in proc.stderr
    assert (prof / "rank-0.json").exists() and not (prof / "rank-1.json").exists()
    assert not list(prof.glob(".colltune-shared-*"))          # the marker is removed
