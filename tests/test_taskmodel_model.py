"""Unit tests of the task cost model (no simulation)."""
from __future__ import annotations

import pytest

from colltune.taskmodel.model import depth, pipeline_tasks, predict, segments
from colltune.taskmodel.search import configurations


def test_pipeline_tasks_bcast_and_allreduce():
    assert pipeline_tasks("bcast", 1) == ["ib(0)", "sb(0)"]
    assert pipeline_tasks("bcast", 3) == ["ib(0)", "ib(1)+sb(0)", "ib(2)+sb(1)", "sb(2)"]
    assert pipeline_tasks("allreduce", 1) == ["sr(0)", "ir(0)", "ib(0)", "sb(0)"]
    # u = 2 < 4 stages: the middle tasks are composites that never occur for u >= 4
    assert pipeline_tasks("allreduce", 2) == ["sr(0)", "sr(1)+ir(0)", "ir(1)+ib(0)",
                                              "ib(1)+sb(0)", "sb(1)"]
    t = pipeline_tasks("allreduce", 6)
    assert len(t) == 9 and t[3] == "sr(3)+ir(2)+ib(1)+sb(0)" and t[-1] == "sb(5)"
    with pytest.raises(ValueError, match="no task pipeline"):
        predict("reduce", 3, pipe=[[1.0]])


def test_flat_allreduce_has_no_ib_stage():
    flat = {"imod": 2, "iaalg": 3}
    assert depth("allreduce", flat) == 3 and depth("allreduce", {"imod": 1}) == 4
    assert pipeline_tasks("allreduce", 3, flat) == ["sr(0)", "sr(1)+ir(0)", "sr(2)+ir(1)+sb(0)",
                                                    "ir(2)+sb(1)", "sb(2)"]
    # depth 3: fill 2, steady from the 3rd task, drain 2; u=2 needs a short pipeline
    pipe = _pipe([1.0, 2.0], [5.0, 5.0, 5.0], [3.0, 1.0])
    assert predict("allreduce", 6, pipe=pipe, params=flat) == 1 + 2 + 4 * 5 + 3 + 1
    with pytest.raises(ValueError, match="needs the 4 tasks"):
        predict("allreduce", 2, pipe=pipe, params=flat)
    assert pipeline_tasks("bcast", 2, flat) == ["ib(0)", "ib(1)+sb(0)", "sb(1)"]   # bcast: no imod=2


def test_spaces():
    assert configurations("allreduce", "han") == configurations("allreduce")
    flat = [c for c in configurations("allreduce", "han+flat") if c["imod"] == 2]
    assert len(flat) == 8 and all("ibalg" not in c and c["iaalg"] in (2, 3) for c in flat)
    assert len(configurations("allreduce", "han+flat")) == 12 + 8
    assert configurations("bcast", "han+flat") == configurations("bcast")
    assert all("iaalg" not in c for c in configurations("allreduce", "han"))
    nb = configurations("bcast", "han+nb")     # smod=3 adds 2 fs x 3 imod/ibalg variants
    assert len(nb) == 12 + 6 and {c["smod"] for c in nb} == {0, 1, 3}
    assert [c for c in nb if c["smod"] != 3] == configurations("bcast")
    with pytest.raises(ValueError, match="taskmodel space 'x'"):
        configurations("bcast", "x")


def test_segments():
    assert segments(100, 0) == 1 and segments(100, 100) == 1 and segments(101, 100) == 2
    assert segments(3 * 1024 * 1024 + 5, 1 << 20) == 4


def _pipe(fill, steady, drain):
    return [[c] for c in fill + steady + drain]


def test_predict_bcast_steady_extension():
    # ib(0)=5, steady sbib costs 4, 3, 3, 3, drain sb=1
    pipe = _pipe([5.0], [4.0, 3.0, 3.0, 3.0], [1.0])
    assert predict("bcast", 2, pipe=pipe) == 5 + 4 + 1
    assert predict("bcast", 3, pipe=pipe) == 5 + 4 + 3 + 1
    assert predict("bcast", 10, pipe=pipe) == 5 + 4 + 3 * 8 + 1
    # still converging at the end of the pipeline: the rate is the last two's mean
    pipe = _pipe([5.0], [4.0, 4.0, 3.0, 2.0], [1.0])
    assert predict("bcast", 10, pipe=pipe) == pytest.approx(5 + 4 + 4 + 3 + 2 + 5 * 2.5 + 1)


def test_predict_allreduce_full_formula():
    # sr, irsr, ibirsr, 3 steady sbibirsr (constant 2), sbibir, sbib, sb
    pipe = _pipe([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [4.0, 5.0, 6.0])
    u = 10
    assert predict("allreduce", u, pipe=pipe) == 1 + 2 + 3 + (u - 3) * 2 + 4 + 5 + 6


def test_predict_truncated_sums_need_exact_short_pipeline():
    with pytest.raises(ValueError, match="u=2 < 4"):
        predict("allreduce", 2, pipe=_pipe([1, 1, 1], [1], [1, 1, 1]))
    short = [[1.0], [2.0], [3.0], [4.0], [5.0]]     # the 5 tasks of a 2-segment allreduce
    assert predict("allreduce", 2, short=short) == 15
    assert predict("bcast", 1, short=[[7.0], [2.0]]) == 9


def test_max_over_nodes_of_sums():
    # node 0 slow in the first task, node 1 in the last: max of sums, not sum of maxes
    short = [[3.0, 1.0], [1.0, 3.0]]
    assert predict("bcast", 1, short=short) == 4.0


def test_configurations_dedupe_and_allreduce_trees():
    b = configurations("bcast")
    assert len(b) == len({tuple(sorted(c.items())) for c in b})
    assert all(c["ibalg"] == 1 for c in b if c["imod"] == 0)
    a = configurations("allreduce")
    assert all(c["iralg"] == c["ibalg"] for c in a)


def test_unknown_space_is_a_clear_error(tmp_path):
    """On the command line (argparse names the value and the choices) and through
    the tuner's Python entry point."""
    import subprocess
    import sys
    from colltune.errors import ColltuneError
    from colltune.tuners import TUNERS
    r = subprocess.run([sys.executable, "-m", "colltune.cli", "tune", "--strategy", "taskmodel",
                        "--han-space", "han+tree"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 2 and "'han+tree'" in r.stderr and "han+flat" in r.stderr, r.stderr
    tuner = TUNERS.get("taskmodel")(None, None, [])
    with pytest.raises(ColltuneError, match="--han-space 'han\\+tree'"):
        tuner.attach(None, None, None, space="han+tree")


def test_alternating_steady_costs_extrapolate_at_their_mean():
    """Two ranks whose steady costs alternate in opposite phase (a chain's
    forwarding running into the next task): the maximum over ranks is flat,
    so the steady part is 'stable' at once, but a rank's rate is the mean of
    two tasks, not the last task's cost (which charged one phase every time)."""
    fill, drain = [[1.0, 1.0]], [[1.0, 1.0]]
    steady = [[2.0, 4.0], [4.0, 2.0], [2.0, 4.0], [4.0, 2.0]]
    pipe = fill + steady + drain                      # bcast: depth 2
    assert predict("bcast", 11, pipe=pipe) == pytest.approx(1 + 2 + 4 + 8 * 3.0 + 1)
    flat = fill + [[3.0, 3.0]] * 4 + drain            # flat costs: unchanged behaviour
    assert predict("bcast", 11, pipe=flat) == pytest.approx(1 + 10 * 3.0 + 1)
