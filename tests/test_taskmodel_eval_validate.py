"""benchmarks/taskmodel_eval.py validate(): a predicted best whose whole call failed is
recorded as a failure (it crashed on None / float), no MPI involved."""
from __future__ import annotations

import importlib.util
import math
import os

from colltune.errors import BackendError

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load():
    spec = importlib.util.spec_from_file_location("taskmodel_eval", os.path.join(BENCH, "taskmodel_eval.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake(te, monkeypatch, fails):
    """Predicted time: by configuration order; measured: the reverse; whole calls of
    the configurations in `fails` raise a BackendError (a crash)."""
    order = {te.label(c): i for i, c in enumerate(te.configurations("bcast", "han"))}

    def predict(costs, coll, n, p, conf, m):
        return 1e-3 * (1 + order[te.label(conf)])

    def whole(costs, coll, n, p, conf, m):
        i = order[te.label(conf)]
        if i in fails:
            raise BackendError("crashed: exit code 139")
        return {"completion_s": 1e-3 * (len(order) - i), "bench_s": 1e-3}
    monkeypatch.setattr(te, "predict_config", predict)
    monkeypatch.setattr(te, "measure_whole", whole)
    return len(order)


def test_a_failed_predicted_best_is_recorded_not_a_crash(monkeypatch, capsys):
    te = _load()
    _fake(te, monkeypatch, fails={0})          # configuration 0 is the predicted best
    failures = []
    out = te.validate(None, ["bcast"], 4, 2, 4194304, failures)
    v = out["bcast"]
    assert v["best_match"] is False and v["predicted_best_failed"] is True
    assert math.isnan(v["slowdown"])
    assert any("predicted best" in f and "failed" in f for f in failures)
    assert "FAILED as a whole call" in capsys.readouterr().out


def test_every_whole_call_failed(monkeypatch, capsys):
    te = _load()
    n = _fake(te, monkeypatch, fails=set(range(99)))
    failures = []
    v = te.validate(None, ["bcast"], 4, 2, 4194304, failures)["bcast"]
    assert v["best_match"] is False and math.isnan(v["slowdown"]) and len(v["rows"]) == n
    assert "no configuration's whole call succeeded" in capsys.readouterr().out


def test_a_working_predicted_best_is_scored_as_before(monkeypatch):
    te = _load()
    n = _fake(te, monkeypatch, fails={3})
    v = te.validate(None, ["bcast"], 4, 2, 4194304, [])["bcast"]
    # predicted best = configuration 0, measured best = the last one
    assert v["best_match"] is False and v["predicted_best_failed"] is False
    assert v["slowdown"] == n / 1
