"""benchmarks/best_of_both.py end to end on the `small` platform (its plan: 2x2 trained,
3x1 held out; bcast at two sizes and one held-out size): tune --provider both, deploy,
evaluate the deployment side by side with the selectors, report. Its evaluation had
broken unseen (the deployment's backend lacked the provider methods a campaign reads)
until a real run reached it. A second run measures nothing again; a deployed point
carries the interposer's build, and one of another build is measured again."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys

from conftest import REPO

from colltune import native


def bob(tmp_path, collectives: str = "bcast"):
    cmd = [sys.executable, "benchmarks/best_of_both.py", "--platform", "small", "--collectives",
           collectives, "--train-sizes", "8,1000", "--heldout-sizes", "100", "--jobs", "1",
           "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def evaluation_launches(out: str) -> int:
    return int(re.search(r"evaluation: (\d+) launches", out)[1])


def test_best_of_both_pipeline_on_small(tmp_path):
    out = bob(tmp_path)
    assert re.search(r"^all points\s+6\s+6\s+\d+\.\d+x", out, re.M), out
    assert re.search(r"^\(c\) held-out layouts\s+3\s+3", out, re.M), out
    # the targets line restates the summary's geomean and judges it (no point >= 8 MiB here)
    gm = re.search(r"^all points\s+6\s+6\s+(\d+\.\d+)x", out, re.M)[1]
    t = re.search(r"^targets \(issue 18\): all points vs ompi (\d+\.\d+)x \(>= 2\.0x: (met|NOT met)\)", out, re.M)
    assert t and t[1] == gm and (t[2] == "met") == (float(gm) >= 2.0), out
    assert "within 1.25x LBnet: 0 of 0 points (none measured)" in out, out
    assert evaluation_launches(out) == 6              # 2 layouts x (deployment + 2 selectors)
    assert (tmp_path / "small.colltune.rules").exists() and (tmp_path / "small.table.json").exists()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    rows = db.execute("SELECT m.point_id, m.labels_json FROM measurements m JOIN runs r USING (run_id) "
                      "WHERE r.provider = 'deployment'").fetchall()
    assert len(rows) == 6 and all(json.loads(x)["interposer_build"] == native.sources_hash()
                                  for _, x in rows), rows
    assert evaluation_launches(bob(tmp_path)) == 0    # resumed: every point reused
    labels = json.loads(rows[0][1])
    db.execute("UPDATE measurements SET labels_json = ? WHERE point_id = ?",
               (json.dumps({**labels, "interposer_build": "another"}), rows[0][0]))
    db.commit()
    db.close()
    assert evaluation_launches(bob(tmp_path)) == 1    # that point, with this build
    # a run over another collective keeps bcast's entries and rules (it had written a
    # table and rules file of allreduce alone)
    rules_before = (tmp_path / "small.colltune.rules").read_text()
    out = bob(tmp_path, "allreduce")
    assert evaluation_launches(out) == 6              # allreduce's only
    table = json.loads((tmp_path / "small.table.json").read_text())
    assert {e["collective"] for e in table["entries"]} == {"bcast", "allreduce"}
    rules = (tmp_path / "small.colltune.rules").read_text()
    bcast = lambda text: [ln for ln in text.splitlines() if ln.startswith("bcast ")]  # noqa: E731
    assert bcast(rules) and bcast(rules) == bcast(rules_before)
    assert any(ln.startswith("allreduce ") for ln in rules.splitlines())
