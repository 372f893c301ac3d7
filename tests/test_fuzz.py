"""The parsers that run inside applications (the rules file and COLLTUNE_FORCE,
native/intercept/rules.c), fuzzed with libFuzzer under AddressSanitizer,
LeakSanitizer and UndefinedBehaviorSanitizer (docs/fuzzing.md).

Builds the two harnesses of native/intercept/fuzz with `make -C native fuzz`,
replays every seed of the corpus (regression inputs included), then fuzzes each
parser for a bounded time from that corpus: the fuzzer must exit 0, leave no
crash/leak/timeout file, and have executed a non-trivial number of inputs."""
from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import CACHE, REPO

from colltune import mpi

FUZZ_DIR = os.path.join(REPO, "native", "intercept", "fuzz")
TARGETS = ("rules", "force")
SECONDS = 25                 # per target: about 50 s of fuzzing for the two
MIN_RUNS = 20_000            # ~12-30k runs/s on one idle core; a loaded one still clears this
PACKAGES = "clang-14 libclang-rt-14-dev"


def _toolchain_problem() -> str | None:
    clang = os.environ.get("CLANG", "clang-14")
    if not shutil.which(clang):
        return f"{clang} is not on PATH"
    if not glob.glob("/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a") \
            and clang == "clang-14":
        return "clang-14's libFuzzer runtime (libclang_rt.fuzzer) is missing"
    return None


@pytest.fixture(scope="module")
def fuzzers():
    problem = _toolchain_problem()
    if problem:
        pytest.fail(f"cannot fuzz the rules parsers: {problem}. Install the Debian packages "
                    f"{PACKAGES} (scripts/setup.sh, i.e. `make setup`, does: "
                    f"apt-get install -y {PACKAGES})", pytrace=False)
    impl = mpi.find("openmpi")
    out = os.path.join(os.path.abspath(CACHE), "fuzz")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # make is incremental; one build at a time
        cmd = ["make", "-s", "-C", os.path.join(REPO, "native"), "fuzz", f"MPICC={impl.cc}",
               f"OUT={out}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"$ {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    return {t: os.path.join(out, f"fuzz-{t}") for t in TARGETS}


def _corpus(target):
    files = sorted(glob.glob(os.path.join(FUZZ_DIR, "corpus", target, "*")))
    assert len(files) >= 20, f"seed corpus of {target} has only {len(files)} files"
    return files


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus_replays_clean(fuzzers, target, tmp_path):
    """Every seed, valid files and regression inputs alike, runs once without a
    sanitizer report or a broken invariant."""
    files = _corpus(target)
    proc = subprocess.run([fuzzers[target], f"-artifact_prefix={tmp_path}/", *files],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    executed = re.findall(r"^Executed (.+) in \d+ ms$", proc.stderr, re.M)
    assert sorted(executed) == files, proc.stderr[-2000:]
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("target", TARGETS)
def test_bounded_fuzz_run_finds_nothing(fuzzers, target, tmp_path):
    work, findings = tmp_path / "corpus", tmp_path / "findings"
    work.mkdir()
    findings.mkdir()
    cmd = [fuzzers[target], f"-max_total_time={SECONDS}", "-max_len=8192", "-timeout=10",
           "-print_final_stats=1", f"-dict={os.path.join(FUZZ_DIR, target + '.dict')}",
           f"-artifact_prefix={findings}/", str(work), os.path.join(FUZZ_DIR, "corpus", target)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 120, cwd=tmp_path)
    tail = proc.stderr[-6000:]
    seed = re.search(r"INFO: Seed: (\d+)", proc.stderr)
    where = f"(libFuzzer seed {seed.group(1) if seed else '?'}; rerun with -seed=N)\n{tail}"
    assert proc.returncode == 0, f"fuzz-{target} exited {proc.returncode} {where}"
    assert not os.listdir(findings), f"fuzz-{target} wrote {os.listdir(findings)} {where}"
    done = re.search(r"^Done (\d+) runs in (\d+) second", proc.stderr, re.M)
    assert done, f"no 'Done N runs' line {where}"
    runs = int(done.group(1))
    assert runs >= MIN_RUNS, f"fuzz-{target} executed only {runs} inputs in {done.group(2)} s {where}"
    cov = re.findall(r"cov: (\d+) ft: (\d+)", proc.stderr)
    print(f"fuzz-{target}: {runs} runs in {done.group(2)} s"
          + (f", cov {cov[-1][0]} ft {cov[-1][1]}" if cov else ""))
