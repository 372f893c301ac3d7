"""libcolltune's online mode (COLLTUNE_ONLINE, docs/online-native.md) on real runs of
native/tests/onlinecheck.c: split communicators used by some groups only, data-dependent
counts and numbers of calls, a non-commutative op and the program's own srand()/rand().
With the compiled presets' uniform probabilities every call draws a random arm; every
rank's logged choices must be identical per communicator and every result correct, on
SMPI (2x3 and 3x3 hosts of `small`), Open MPI and MPICH. Then the state directory: what
a run writes, and bad states, two jobs at once, an unwritable folder, a killed job."""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess

import pytest

from conftest import CACHE, REPO, have_mpi

from colltune import mpi, platforms
from colltune.providers.colltune import libcolltune, link_args, preload_args
from colltune.subcommands.run import compile_app

APP = os.path.join(REPO, "native", "tests", "onlinecheck.c")
BUDGET = 20
ARM_LINE = re.compile(r"arm (\S+) p=(\S+) n=(\d+)(?: mean=(\S+) m2=(\S+))?$")


class Job:
    """onlinecheck launched with one MPI under online mode."""

    def __init__(self, name: str, tmp):
        self.impl, self.tmp = mpi.find(name), tmp
        lib = libcolltune(self.impl, CACHE)
        if name == "smpi":
            self.app = compile_app(self.impl, APP, CACHE, link_args(lib))
            self.plat = platforms.load("small")
        else:
            self.app = compile_app(self.impl, APP, CACHE, [])
            self.pre = preload_args(self.impl, lib)

    def argv(self, layout, *args):
        if self.impl.name == "smpi":
            nodes, ppn = layout
            hosts = self.plat.write_hostfile(nodes, ppn, self.tmp / f"hosts-{nodes}x{ppn}")
            return [self.impl.launcher, "-np", str(nodes * ppn), "-platform", self.plat.xml_path,
                    "-hostfile", hosts, *self.plat.smpirun_cfg_args(), "--log=root.thres:critical",
                    str(self.app), *args]
        extra = ["--oversubscribe"] if self.impl.name == "openmpi" else []
        return [self.impl.launcher, *extra, *self.pre, "-n", str(layout), str(self.app), *args]

    def env(self, state, log=None, budget=BUDGET, **extra):
        env = {**self.impl.run_env(), "COLLTUNE_ONLINE": str(state), "COLLTUNE_ONLINE_BUDGET": str(budget),
               **extra}
        if log:
            env["COLLTUNE_ONLINE_LOG"] = str(log)
        return env

    def start(self, layout, state, *args, log=None, budget=BUDGET, **extra):
        return subprocess.Popen(self.argv(layout, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env(state, log, budget, **extra), cwd=self.tmp)

    def __call__(self, layout, state, *args, log=None, budget=BUDGET, **extra):
        proc = self.start(layout, state, *args, log=log, budget=budget, **extra)
        out, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def ok(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"onlinecheck ok: [1-9]\d* calls, 0 failures", proc.stdout), proc.stdout + proc.stderr
    return True


def warnings(proc):
    return [x for x in proc.stderr.splitlines() if x.startswith("colltune: warning")]


def parse_state(path) -> dict:
    """state.txt -> {"fingerprint", "runs", "blocks": {(coll, nodes, ppn, bytes): {arm: (p, n, mean)}}}"""
    lines = [x.split("#")[0].strip() for x in path.read_text().splitlines()]
    lines = [x for x in lines if x]
    assert lines[0] == "colltune-online-state 1"
    st = {"blocks": {}}
    cur = None
    for x in lines[1:]:
        if x.startswith("fingerprint "):
            st["fingerprint"] = x.split()[1]
        elif x.startswith("run-count "):
            st["runs"] = int(x.split()[1])
        elif x.startswith("block "):
            _, coll, nodes, ppn, rng, *_counts_src = x.split()
            cur = st["blocks"][(coll, int(nodes[6:]), int(ppn[4:]), rng[6:])] = {}
        else:
            m = ARM_LINE.match(x)
            assert m and cur is not None, x
            cur[m[1]] = (float(m[2]), int(m[3]), float(m[4] or 0))
    return st


def check_logs(log, nranks):
    """Every communicator's choice sequence is the same on all its ranks; returns them."""
    seqs = collections.defaultdict(dict)              # key -> rank -> [(coll, cls, idx, arm)]
    for r in range(nranks):
        for line in (log / f"choices-{r}.txt").read_text().splitlines():
            key, coll, cls, idx, arm = line.split()
            seqs[key].setdefault(r, []).append((coll, int(cls), int(idx), arm))
    for key, by_rank in seqs.items():
        first = next(iter(by_rank.values()))
        for r, seq in by_rank.items():
            assert seq == first, f"communicator {key}: rank {r} differs from rank {min(by_rank)}"
        nxt = collections.Counter()
        for coll, cls, idx, _ in first:                # call indices count up per block
            assert idx == nxt[coll, cls], (key, coll, cls, idx)
            nxt[coll, cls] += 1
    members = sorted(len(v) for v in seqs.values())
    # world, two halves and two thirds (onlinecheck's splits)
    assert len(seqs) == 5 and members[-1] == nranks and sum(members[:-1]) == 2 * nranks, members
    return seqs


def check_budget(seqs):
    """After BUDGET sampled calls of a block, the block runs one arm (or keeps drawing)."""
    exploited = 0
    for seq in (next(iter(v.values())) for v in seqs.values()):
        by_block = collections.defaultdict(list)
        for coll, cls, idx, arm in seq:
            by_block[coll, cls].append(arm)
        for arms in by_block.values():
            if len(arms) > BUDGET + 3 and len(set(arms[BUDGET:])) == 1:
                exploited += 1
    assert exploited > 0


def check_state_dir(state, runs=1):
    (sample,) = list((state / "samples").iterdir()) if runs == 1 else [None]
    st = parse_state(state / "state.txt")
    assert st["runs"] == runs and st["blocks"]
    for arms in st["blocks"].values():
        assert abs(sum(p for p, _, _ in arms.values()) - 1) < 1e-6
        assert all(mean > 0 for _, n, mean in arms.values() if n)
    if sample:
        doc = json.loads(sample.read_text())
        assert doc["schema"] == "colltune-online-samples/1" and doc["fingerprint"] == st["fingerprint"]
        assert doc["job"]["budget"] == BUDGET
        for b in doc["blocks"]:
            # outliers (rare calls 5x their arm's median: real noise here) are not learnt
            assert sum(a["n"] + a["outliers"] for a in b["arms"]) == b["sampled"] <= b["calls"]
            assert b["outlier_s"] >= 0 and (b["outlier_s"] > 0) == any(a["outliers"] for a in b["arms"])
            # calls that built per-communicator state: their arms learnt them amortised
            assert 0 <= b["setup_calls"] <= b["sampled"] and b["setup_s"] >= 0
            assert all(a["mean"] > 0 and a["min"] <= a["mean"] for a in b["arms"] if a["n"])
        assert len(doc["records"]) == sum(b["sampled"] for b in doc["blocks"])
        assert all(r[6] > 0 for r in doc["records"])
    return st


@pytest.fixture(scope="module")
def smpi(tmp_path_factory):
    return Job("smpi", tmp_path_factory.mktemp("smpi"))


@pytest.mark.parametrize("layout", [(2, 3), (3, 3)])
def test_sim_same_choices_on_every_rank_and_correct_results(smpi, tmp_path, layout):
    state, log = tmp_path / "state", tmp_path / "log"
    proc = smpi(layout, state, "12", log=log)
    assert ok(proc) and not warnings(proc)
    seqs = check_logs(log, layout[0] * layout[1])
    check_budget(seqs)
    arms = collections.defaultdict(set)
    for v in seqs.values():
        for coll, _, _, arm in next(iter(v.values())):
            arms[coll].add(arm)
    assert all(len(a) >= 4 for a in arms.values()), arms     # random choices, not one arm
    st = check_state_dir(state)
    world = layout if layout == (2, 3) else (3, 3)
    assert any(k[1:3] == world for k in st["blocks"])


@pytest.mark.parametrize("name", ["openmpi", "mpich"])
def test_real_mpi_same_choices_and_correct_results(tmp_path, name):
    if not have_mpi(name):
        pytest.skip(f"{name} not installed (make setup)")
    job = Job(name, tmp_path)
    state, log = tmp_path / "state", tmp_path / "log"
    proc = job(4, state, "30", log=log)
    assert ok(proc) and not warnings(proc)
    check_budget(check_logs(log, 4))
    check_state_dir(state)
    (sample,) = (state / "samples").iterdir()
    world = [b for b in json.loads(sample.read_text())["blocks"] if b["ppn"] == 4]   # world only
    assert world and all(b["sampled"] == min(b["calls"], BUDGET) for b in world)


def test_sim_state_drives_the_draw_and_the_best_arm(smpi, tmp_path):
    """A state giving allreduce p = 1 to ring (which declines the non-commutative op: then the
    library), and allgather measured with bruck fastest, at budget 0: the world communicator's
    calls run exactly that."""
    state, log = tmp_path / "state", tmp_path / "log"
    fp = parse_state(good_state(smpi, tmp_path)[0] / "state.txt")["fingerprint"]
    lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 1"]
    for rng in ("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576"):
        lines += [f"block allreduce nodes=2 ppn=3 bytes={rng} calls=0 source=prior",
                  "arm library p=0", "arm ring p=1",
                  f"block allgather nodes=2 ppn=3 bytes={rng} calls=9 source=measured",
                  "arm library p=0.5 n=5 mean=2e-06 m2=0", "arm bruck p=0.5 n=5 mean=1e-06 m2=0"]
    (state / "state.txt").write_text("\n".join(lines) + "\n")
    assert ok(smpi((2, 3), state, "8", log=log, budget=0))
    world = [k for k, v in check_logs(log, 6).items() if len(v) == 6]
    seq = [x for x in (log / "choices-0.txt").read_text().splitlines() if x.startswith(world[0])]
    ran = {(x.split()[1], x.split()[4]) for x in seq}
    assert {a for c, a in ran if c == "allgather"} == {"bruck"}
    assert {a for c, a in ran if c == "allreduce"} == {"ring", "library"}



def test_sim_no_choice_before_the_library_is_measured(smpi, tmp_path):
    """bruck measured fastest (n = 5) but the library never: at budget 0 the block does
    not exploit bruck, it runs the library (ct_online_choice; Python's Block.best agrees)."""
    state, log = tmp_path / "state", tmp_path / "log"
    fp = parse_state(good_state(smpi, tmp_path)[0] / "state.txt")["fingerprint"]
    lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 1"]
    for rng in ("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576"):
        lines += [f"block allgather nodes=2 ppn=3 bytes={rng} calls=9 source=measured",
                  "arm library p=0.1 n=0", "arm bruck p=0.9 n=5 mean=1e-06 m2=0"]
    (state / "state.txt").write_text("\n".join(lines) + "\n")
    assert ok(smpi((2, 3), state, "8", log=log, budget=0))
    world = [k for k, v in check_logs(log, 6).items() if len(v) == 6]
    seq = [x for x in (log / "choices-0.txt").read_text().splitlines() if x.startswith(world[0])]
    assert {x.split()[4] for x in seq if x.split()[1] == "allgather"} == {"library"}

def test_sim_conservative_draws_lean_on_the_choice(smpi, tmp_path):
    """COLLTUNE_ONLINE_RISK: a run's expected exploration may cost that share of its
    collective time. ring (25x the choice bruck) makes drawing from p cost far more than
    5 %: with risk 0 every draw of the measured blocks is bruck; with a risk no
    exploration can exceed, the draws follow p (library and ring too). 40 iterations:
    enough draws that each arm shows whatever sizes onlinecheck's rand() gives (SMPI's
    ranks share libc's rand state, so any change of timing reorders the program's sizes;
    at 8 a run had drawn no library call)."""
    fp = parse_state(good_state(smpi, tmp_path)[0] / "state.txt")["fingerprint"]
    lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 2"]
    for rng in ("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576"):
        lines += [f"block allgather nodes=2 ppn=3 bytes={rng} calls=18 runs=2 source=measured",
                  "arm library p=0.3 n=5 mean=2e-06 m2=0", "arm bruck p=0.4 n=5 mean=1e-06 m2=0",
                  "arm ring p=0.3 n=5 mean=2.5e-05 m2=0"]
    seen = {}
    for risk in ("0", "100000"):
        state, log = tmp_path / f"state-{risk}", tmp_path / f"log-{risk}"
        state.mkdir()
        (state / "state.txt").write_text("\n".join(lines) + "\n")
        assert ok(smpi((2, 3), state, "40", log=log, budget=8, COLLTUNE_ONLINE_RISK=risk))
        world = [k for k, v in check_logs(log, 6).items() if len(v) == 6]
        seq = [x for x in (log / "choices-0.txt").read_text().splitlines() if x.startswith(world[0])]
        seen[risk] = {x.split()[4] for x in seq if x.split()[1] == "allgather"}
    assert seen["0"] == {"bruck"}
    assert seen["100000"] == {"bruck", "library", "ring"}


def test_sim_a_setup_the_block_cannot_afford_is_not_explored(smpi, tmp_path):
    """The library is the choice and bruck nearly as fast: drawing from p costs little, so
    at the default risk the draws follow p. A block whose calls built communicator state
    costing far more than its share of the risk (setups= setup_s= in state.txt, per
    (nodes, ppn)) draws no colltune arm: every draw is the library's."""
    fp = parse_state(good_state(smpi, tmp_path)[0] / "state.txt")["fingerprint"]
    seen = {}
    for setup in ("", " setups=2 setup_s=0.002"):
        lines = ["colltune-online-state 1", f"fingerprint {fp}", "run-count 2"]
        for i, rng in enumerate(("0..16", "17..256", "257..4096", "4097..65536", "65537..1048576")):
            lines += [f"block allgather nodes=2 ppn=3 bytes={rng} calls=18 runs=2 source=measured"
                      + (setup if i == 0 else ""),       # one block's setup serves the shape
                      "arm library p=0.5 n=5 mean=2e-06 m2=0", "arm bruck p=0.5 n=5 mean=2.02e-06 m2=0"]
        state, log = tmp_path / f"state{len(setup)}", tmp_path / f"log{len(setup)}"
        state.mkdir()
        (state / "state.txt").write_text("\n".join(lines) + "\n")
        assert ok(smpi((2, 3), state, "8", log=log, budget=8))
        world = [k for k, v in check_logs(log, 6).items() if len(v) == 6]
        seq = [x for x in (log / "choices-0.txt").read_text().splitlines() if x.startswith(world[0])]
        seen[setup] = {x.split()[4] for x in seq if x.split()[1] == "allgather"}
        assert parse_state(state / "state.txt")["runs"] == 3
        if setup:                                       # the setup statistics survive the merge
            assert re.search(r"bytes=0\.\.16 .* setups=2 setup_s=0\.002\n", (state / "state.txt").read_text())
    assert seen[""] == {"bruck", "library"}
    assert seen[" setups=2 setup_s=0.002"] == {"library"}


def good_state(smpi, tmp_path):
    state = tmp_path / "state"
    assert ok(smpi((2, 3), state, "4"))
    return state, (state / "state.txt").read_text()


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign"])
def test_sim_bad_state_one_warning_file_kept(smpi, tmp_path, damage):
    state, text = good_state(smpi, tmp_path)
    if damage == "corrupt":
        bad = text.replace("run-count 1", "run-count 1\nblock allreduce nodes=x")
    elif damage == "truncated":
        second = text.index("\nblock ", text.index("\nblock ") + 1)
        bad = text[:second + len("\nblock allreduce nodes=")]
    else:
        bad = re.sub(r"fingerprint \S+", "fingerprint 0123456789abcdef", text)
    (state / "state.txt").write_text(bad)
    proc = smpi((2, 3), state, "4")
    assert ok(proc)
    (w,) = warnings(proc)
    assert str(state / "state.txt") in w and ("fingerprint 0123456789abcdef" in w) == (damage == "foreign")
    kept = [p for p in state.iterdir() if p.name.startswith("state.txt.")]
    assert len(kept) == 1 and kept[0].read_text() == bad
    assert kept[0].name.startswith("state.txt." + ("foreign" if damage == "foreign" else "bad"))
    st = parse_state(state / "state.txt")                      # a new state from this run
    assert st["runs"] == 1 and len(list((state / "samples").iterdir())) == 2


def test_sim_unreadable_state_one_warning(smpi, tmp_path):
    """A state.txt that exists but cannot be opened (another user's 0600 file; here a
    symlink loop, which root cannot read either) is said once; it had been silent, the
    run drawing from the default arms. The run's own state then replaces it."""
    state, _ = good_state(smpi, tmp_path)
    (state / "state.txt").unlink()
    os.symlink("state.txt", state / "state.txt")
    proc = smpi((2, 3), state, "4")
    assert ok(proc)
    (w,) = warnings(proc)
    assert f"{state / 'state.txt'}: cannot read: Too many levels of symbolic links; this run draws " \
        "from the default arms" in w, w
    assert not os.path.islink(state / "state.txt") and parse_state(state / "state.txt")["runs"] == 1


def test_state_files_are_as_readable_as_a_plain_file(tmp_path):
    """save() made state.txt 0600 (mkstemp): another user's job sharing the folder could
    not read it. It now has a plain file's mode, 0666 less the umask."""
    from colltune.online import state
    state.save(state.State(fingerprint="0123456789abcdef"), str(tmp_path / "state.txt"))
    assert (tmp_path / "state.txt").stat().st_mode & 0o777 == 0o666 & ~state._UMASK
    assert state._UMASK & 0o044 or (tmp_path / "state.txt").stat().st_mode & 0o044 == 0o044


def test_sim_two_jobs_finishing_together_merge(smpi, tmp_path):
    state = tmp_path / "state"
    jobs = [smpi.start((2, 3), state, "6") for _ in range(2)]
    for j in jobs:
        out, err = j.communicate(timeout=120)
        assert j.returncode == 0 and "0 failures" in out, err
    samples = [json.loads(p.read_text()) for p in (state / "samples").iterdir()]
    assert len(samples) == 2 and samples[0]["run_id"] != samples[1]["run_id"]
    st = check_state_dir(state, runs=2)
    n = collections.Counter()
    for doc in samples:
        for b in doc["blocks"]:
            lo, hi = b["bytes_lo"], b["bytes_hi"]
            for a in b["arms"]:
                n[b["collective"], b["nodes"], b["ppn"], f"{lo}..{'' if hi is None else hi}", a["arm"]] += a["n"]
    for (coll, nodes, ppn, rng), arms in st["blocks"].items():
        for arm, (_, count, _) in arms.items():
            assert count == n[coll, nodes, ppn, rng, arm], (coll, nodes, ppn, rng, arm)


def test_sim_unwritable_state_dir_one_warning(smpi, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = smpi((2, 3), blocker / "state", "4")
    assert ok(proc)
    (w,) = warnings(proc)
    assert f"{blocker / 'state'}: cannot create it: Not a directory" in w


def test_sim_killed_job_leaves_state_intact(smpi, tmp_path):
    state, text = good_state(smpi, tmp_path)
    proc = smpi((2, 3), state, "8", "crash")
    assert proc.returncode != 0
    assert (state / "state.txt").read_text() == text
    assert len(list((state / "samples").iterdir())) == 1
    assert not [p for p in state.iterdir() if ".tmp" in p.name]


def test_rules_tool_lists_the_presets(smpi, tmp_path):
    from colltune.providers.colltune import rules_tool_command
    cmd = rules_tool_command(smpi.impl, CACHE, str(tmp_path)) + ["online-arms"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120,
                                    cwd=tmp_path).stdout)
    assert doc["format"] == "colltune.online-arms" and len(doc["fingerprint"]) == 16
    assert doc["size_class_upper_edges"] == [16, 256, 4096, 65536, 1048576]
    for coll in ("bcast", "reduce", "allreduce", "allgather"):
        assert doc["arms"][coll][0] == "library" and sum(a.startswith("han") for a in doc["arms"][coll]) == 2
