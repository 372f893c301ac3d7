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


def test_catalogue_with_a_duplicate_id_is_refused(tmp_path):
    """Ids select sub-algorithms (iaalg, iralg) and ct_find_id returns the first: a
    developer's second algorithm with an existing id had been listed twice, silently. A
    copy of the sources whose table lists one algorithm twice is refused by the listing,
    naming both and the rule."""
    import shutil

    from colltune import mpi
    src = tmp_path / "native"
    shutil.copytree(os.path.join(REPO, "native"), src,
                    ignore=shutil.ignore_patterns("build", "*.o", "*.d"))
    cat = src / "algorithms" / "catalog.c"
    text = cat.read_text()
    assert "&ct_reduce_multileader,\n" in text
    cat.write_text(text.replace("&ct_reduce_multileader,\n", "&ct_reduce_multileader, &ct_reduce_multileader,\n"))
    impl = mpi.find("mpich")
    proc = subprocess.run(["make", "-s", "-C", str(src), "algorithms-list", f"MPICC={impl.cc}",
                           f"OUT={tmp_path / 'out'}", "LAUNCH="], capture_output=True, text=True,
                          timeout=600, env=impl.run_env())
    assert proc.returncode != 0
    assert "reduce algorithms 'multileader' and 'multileader' share id 6: ids and names are unique " \
        "per collective" in proc.stderr, proc.stderr[-2000:]
