"""Topology-aware placement: platform groups, the greedy schedule and the real
allocator never let two concurrent launches share a leaf switch / dragonfly group;
placed smpirun launches run on the hosts they were given (recorded in the store)."""
from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest

from colltune import config, platforms
from colltune.backends.base import Launch
from colltune.placement import GroupAllocator, greedy_schedule, makespan, shared_groups
from colltune.store import Store
from colltune.tuners.active import tune_active

from conftest import CACHE


def test_platform_groups():
    ft = platforms.load("fattree64x12").groups()
    assert list(ft) == [f"fattree64x12/leaf-{i}" for i in range(4)]
    assert all(len(h) == 16 for h in ft.values()) and ft["fattree64x12/leaf-1"][0] == "node-16"
    df = platforms.load("dragonfly").groups()
    assert [len(h) for h in df.values()] == [384, 384, 384]
    assert list(platforms.load("small").groups().values()) == [[f"node-{i}" for i in range(8)]]


def test_hostfile_on_given_hosts(tmp_path):
    p = platforms.load("fattree64x12")
    lines = p.hostfile_lines(2, 3, ["node-20", "node-17"])
    assert lines == ["node-20"] * 3 + ["node-17"] * 3
    with pytest.raises(platforms.PlatformError, match="node-99"):
        p.hostfile_lines(1, 1, ["node-99"])
    with pytest.raises(platforms.PlatformError, match="distinct"):
        p.hostfile_lines(2, 1, ["node-1", "node-1"])


@pytest.mark.parametrize("name", ["fattree64x12", "dragonfly", "small"])
def test_greedy_schedule_never_shares_a_group(name):
    groups = platforms.load(name).groups()
    total = sum(map(len, groups.values()))
    rng = random.Random(5)
    tasks = [(i, rng.choice([1, 2, 7, 16, 17, 40, 400, total]), rng.uniform(0, 3)) for i in range(60)]
    tasks = [(i, min(n, total), d) for i, n, d in tasks]
    sched = greedy_schedule(tasks, groups)
    assert sorted(h.task for h in sched) == list(range(60))
    assert shared_groups(sched) == []
    nodes = {t[0]: t[1] for t in tasks}
    for h in sched:
        size = nodes[h.task]
        assert len(h.hosts) == size and all(x in sum((groups[g] for g in h.groups), []) for x in h.hosts)
        # as few groups as give enough hosts
        assert len(h.groups) == 1 or sum(len(groups[g]) for g in h.groups[:-1]) < size
    seq = sum(t[2] for t in tasks)
    assert makespan(sched) <= seq + 1e-12
    if len(groups) > 1:
        assert makespan(sched) < seq


def test_allocator_threads_never_share_a_group():
    groups = platforms.load("fattree64x12").groups()
    alloc = GroupAllocator(groups)
    rng = random.Random(2)
    sizes = [rng.choice([3, 16, 20, 40]) for _ in range(24)]

    def work(n):
        with alloc.hold(n) as held:
            assert len(held.hosts) == n
            time.sleep(0.01)
    threads = [threading.Thread(target=work, args=(n,)) for n in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(alloc.log) == 24 and shared_groups(alloc.log) == []
    # it did run launches side by side
    assert any(a.start < b.end and b.start < a.end for a in alloc.log for b in alloc.log if a is not b)


def test_placed_launch_runs_on_its_hosts_with_the_same_time(tmp_path):
    """A 4-node bcast on leaf 1 of the fat-tree takes exactly the time it takes on
    leaf 0 (symmetric topology): why a point's key does not include its hosts."""
    from colltune.backends.sim import SimBackend
    settings = config.load({"cache_dir": CACHE, "platform": "fattree64x12", "min_reps": 2}, environ={})
    b = SimBackend(settings, "fattree64x12")
    b.prepare()
    prov = b.provider()
    args = ["--coll", "bcast", "--sizes", "64,65536", "--warmup", "1", "--min-reps", "2",
            "--max-reps", "2", "--rse", "0.02", "--check", "none"]
    times = {}
    for leaf in (0, 1):
        hosts = [f"node-{16 * leaf + i}" for i in (0, 1, 2, 3)]
        res = b.run(Launch(4, 2, args, prov.force(prov.lookup("bcast", "binomial_tree")), 120, hosts),
                    str(tmp_path / str(leaf)))
        assert res.clean
        with open(tmp_path / str(leaf) / "hostfile") as fh:
            assert fh.read().split() == [h for h in hosts for _ in range(2)]
        times[leaf] = [r["ttc_median_s"] for r in res.records]
    assert times[0] == times[1] and all(t > 0 for t in times[0])


def test_active_collection_on_the_fat_tree_uses_disjoint_leaves(tmp_path):
    settings = config.load({"cache_dir": CACHE, "platform": "fattree64x12", "min_reps": 2,
                            "check": "none", "active_batch": 3, "active_initial_points": 3,
                            "active_max_points": 6, "jobs": 2}, environ={})
    from colltune.backends.sim import SimBackend
    b = SimBackend(settings, "fattree64x12")
    b.prepare()
    with Store(str(tmp_path / "s.sqlite")) as store:
        out = tune_active(b, store, settings, ["bcast"], [(2, 1), (24, 1)], [8, 512],
                          algorithms=["binomial_tree", "flattree"], campaign="ft")
        runs = store.query_runs("ft")
    assert out.real_holds and shared_groups(out.real_holds) == []
    assert shared_groups(out.schedule) == []
    assert any(len(h.groups) == 2 for h in out.real_holds)          # 24 nodes span two leaves
    assert 0 < out.makespan_s < out.sequential_s
    leaf = platforms.load("fattree64x12")
    for r in runs:
        placed = json.loads(r["settings_json"])["placement"]
        assert len(placed["hosts"]) == r["nodes"]
        assert {leaf.leaf_of(h) for h in placed["hosts"]} <= set(placed["groups"])
        assert os.path.basename(r["command"].split(" -hostfile ")[1].split()[0]) == "hostfile"
