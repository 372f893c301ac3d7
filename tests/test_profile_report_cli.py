"""`colltune profile` report / whatif / show / export on a profile directory written in the
rank-file format of libcolltune (docs/profile-files.md), and what-if placement numbers
checked by hand."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from colltune.profile import load_topology
from colltune.profile.topology import TopologyError
from colltune.profile.whatif import format_whatif, placement, whatif

from conftest import run_cli

# Hand-checked case on fattree64x12 (4 leaves of 16 hosts, 16 spines, D-mod-k: the spine
# going up is the destination's position mod 16). Three hosts of leaf 0 (node-1..3) each
# send 1000 B to node-16, node-32 and node-48: every destination is 0 mod 16, so all nine
# messages climb L1-switch0 -> L2-switch0 (9000 B, the peak); each crosses 4 cables:
# hop-bytes 9 x 1000 x 4 = 36000. Compact: the six hosts become node-0..5, all on leaf 0:
# 2 cables each, hop-bytes 18000; the peak is a host cable with 3 messages, 3000 B.
SENDERS = ["node-1", "node-2", "node-3"]
RECEIVERS = ["node-16", "node-32", "node-48"]


def _matrix():
    hosts = SENDERS + RECEIVERS
    B = np.zeros((6, 6))
    B[:3, 3:] = 1000
    return B, (B > 0).astype(float), hosts


def test_whatif_hand_checked():
    topo = load_topology("fattree64x12")
    B, M, hosts = _matrix()
    w = whatif(topo, B, M, hosts, "compact")
    assert w.mapping == {h: f"node-{i}" for i, h in enumerate(hosts)}
    link, nb, nm = w.current.most_loaded()
    assert (link.id, nb, nm) == ("L1-switch0 -> L2-switch0", 9000, 9)
    assert w.current.hop_bytes == 36000 and w.other.hop_bytes == 18000
    assert w.other.most_loaded()[1:] == (3000, 3)
    assert w.ratio() == (pytest.approx(1 / 3), pytest.approx(0.5))
    text = format_whatif(w)
    assert "L1-switch0 -> L2-switch0: 9000 B, 9 messages" in text
    assert "ratio (what-if / current): peak link bytes 0.333, hop-bytes 0.500" in text
    # spread over 64 hosts with 6 job hosts: hosts 0, 10, 21, 32, 42, 53
    assert list(placement(topo, hosts, "spread").values()) == [f"node-{i}" for i in (0, 10, 21, 32, 42, 53)]
    r1, r2 = placement(topo, hosts, "random:7"), placement(topo, hosts, "random:7")
    assert r1 == r2 and len(set(r1.values())) == 6


def test_whatif_placement_file_errors(tmp_path):
    topo = load_topology("fattree64x12")
    hosts = SENDERS + RECEIVERS
    f = tmp_path / "place.txt"
    f.write_text("# new home\n" + "\n".join(f"{h} node-{60 - i}" for i, h in enumerate(hosts)) + "\n")
    assert placement(topo, hosts, str(f))["node-16"] == "node-57"
    f.write_text("node-0\nnode-1\nnowhere-3\n")
    with pytest.raises(TopologyError, match=r"place.txt:3: host 'nowhere-3' is not in the topology"):
        placement(topo, hosts, str(f))
    f.write_text("node-0\nnode-1\n")
    with pytest.raises(TopologyError, match="2 host line"):
        placement(topo, hosts, str(f))
    f.write_text("node-0\nnode-3\nnode-3\n")
    with pytest.raises(TopologyError, match=r"place.txt:3: host 'node-3' is already taken on line 2"):
        placement(topo, hosts, str(f))
    with pytest.raises(TopologyError, match="not compact, spread"):
        placement(topo, hosts, "tight")
    with pytest.raises(TopologyError, match="not in topology"):
        whatif(topo, np.ones((1, 1)), np.ones((1, 1)), ["elsewhere"], "compact")


def test_a_rank_file_of_another_job_size_is_named(tmp_path):
    from colltune.profile.counts import ProfileError, load_profile
    d = tmp_path / "p"
    write_profile(d, {0: "node-0", 1: "node-1"}, {(0, 1): 10}, 2)
    doc = json.loads((d / "rank-1.json").read_text())
    (d / "rank-1.json").write_text(json.dumps({**doc, "size": 6}))
    with pytest.raises(ProfileError, match=r"rank-1.json: field 'size' is 6, but .*job.json says 2"):
        load_profile(d)


def test_library_collectives_by_communicator_size(tmp_path):
    """Which communicators the library's collectives ran on (miniAMR uses 2, 4, 8 and 16)."""
    d = tmp_path / "p"
    write_profile(d, {0: "node-0", 1: "node-1", 2: "node-2", 3: "node-3"}, {(0, 1): 10}, 4)
    for r in range(4):
        doc = json.loads((d / f"rank-{r}.json").read_text())
        doc["comms"] = [[0, 1, 2, 3], [r - r % 2, r - r % 2 + 1]]
        doc["library_calls"] = [
            {"region": 0, "kind": "allreduce", "comm": 0, "root": -1, "bytes": 8, "calls": 3},
            {"region": 0, "kind": "allreduce", "comm": 1, "root": -1, "bytes": 8, "calls": 5}]
        (d / f"rank-{r}.json").write_text(json.dumps(doc))
    show = run_cli("profile", "show", str(d)).stdout
    assert re.search(r"run\s+allreduce\s+4 ranks\s+12 rank-calls", show), show
    assert re.search(r"run\s+allreduce\s+2 ranks\s+20 rank-calls", show), show
    page = tmp_path / "r.html"
    run_cli("profile", "report", str(d), "--topology", "fattree64x12", "-o", str(page))
    assert "by communicator size" in page.read_text()


def write_profile(d, placement_of: dict, sends: dict, size: int):
    """A profile directory as libcolltune writes it: job.json + rank-R.json (spec section 1).
    ``sends``: {(src rank, dst rank): bytes}, one message each, kind alltoall, source colltune.
    Ranks absent from ``placement_of`` leave no file."""
    d.mkdir()
    (d / "job.json").write_text(json.dumps({
        "schema": "colltune-profile-job/1", "size": size, "library": "synthetic test", "backend_hint": "openmpi",
        "started": "2026-01-01T00:00:00", "argv0": "test", "monitoring": "off", "notes": []}))
    for r, host in placement_of.items():
        peers = [[dst, nb, 1] for (src, dst), nb in sends.items() if src == r]
        (d / f"rank-{r}.json").write_text(json.dumps({
            "schema": "colltune-profile-rank/1", "rank": r, "size": size, "host": host,
            "regions": ["run"], "intervals": [], "intervals_dropped": 0,
            "counts": [{"region": 0, "kind": "alltoall", "source": "colltune", "peers": peers}] if peers else [],
            "comms": [], "library_calls": [], "memory_bytes": 1000}))


def test_cli_report_whatif_show(tmp_path):
    hosts = SENDERS + RECEIVERS
    sends = {(s, 3 + d): 1000 for s in range(3) for d in range(3)}
    good = tmp_path / "good"
    write_profile(good, dict(enumerate(hosts)), sends, 6)
    out = run_cli("profile", "whatif", str(good), "--topology", "fattree64x12", "--place", "compact").stdout
    assert "L1-switch0 -> L2-switch0: 9000 B, 9 messages" in out
    assert "total hop-bytes   36000" in out and "total hop-bytes   18000" in out
    assert "peak link bytes 0.333, hop-bytes 0.500" in out

    # rank 6 left no file, rank 7 ran on a host the topology lacks, rank 2 sent to both
    bad = tmp_path / "bad"
    sends2 = dict(sends) | {(2, 7): 555, (7, 0): 4444}
    write_profile(bad, dict(enumerate(hosts)) | {7: "far-away-9"}, sends2, 8)
    show = run_cli("profile", "show", str(bad)).stdout
    assert "MISSING: 1 rank file(s): 6" in show and "alltoall" in show
    html_path = tmp_path / "r.html"
    run_cli("profile", "report", str(good), "--compare", str(bad), "--topology", "fattree64x12",
            "-o", str(html_path), "--label", "all present", "--label", "damaged")
    html = html_path.read_text()
    box = re.search(r"<div class='missing'><h2>What is missing \(damaged\)</h2>(.*?)</div>", html, re.S).group(1)
    assert "1 rank(s) left no file" in box and ": 6." in box
    assert "far-away-9" in box and "4444 B" in box and "555 B" in box
    assert "all present: every rank's file present" in html
    # both drawn, the known traffic of the damaged run too: its hot link is there
    assert html.count('class="topology fattree"') == 2
    hot = re.findall(r'data-link="L1-switch0 -&gt; L2-switch0" data-bytes="(\d+)"', html)
    assert hot == ["9000", "9000"]
    # a kind the profile has none of: said in the box, not "every rank's file present"
    run_cli("profile", "report", str(good), "--topology", "fattree64x12", "--kind", "barrier",
            "-o", str(html_path))
    html = html_path.read_text()
    assert "no barrier traffic in region &#x27;run&#x27; (kinds there: alltoall)" in html
    assert "every rank's file present" not in html


def test_cli_export_writes_h2_files(tmp_path):
    from colltune.profile.files import read_csv
    hosts = SENDERS + RECEIVERS
    good = tmp_path / "good"
    write_profile(good, dict(enumerate(hosts)), {(s, 3 + d): 1000 for s in range(3) for d in range(3)}, 6)
    out = run_cli("profile", "export", str(good), "--topology", "fattree64x12", "-o", str(tmp_path / "files")).stdout
    assert {os.path.basename(p) for p in out.split()} >= {"traffic.json", "rank_matrix.csv", "node_matrix.csv",
                                                          "links.csv"}
    rows = [r for r in read_csv(tmp_path / "files" / "links.csv")
            if r["link"] == "L1-switch0 -> L2-switch0" and r["region"] == "run" and r["kind"] == "all"]
    assert [(float(r["bytes"]), float(r["messages"])) for r in rows] == [(9000, 9)]
    assert json.loads((tmp_path / "files" / "traffic.json").read_text())["schema"] == "colltune-traffic/1"


def test_cli_errors_name_the_input(tmp_path):
    proc = run_cli("profile", "report", str(tmp_path / "nope"), "--topology", "fattree64x12", "-o",
                   str(tmp_path / "x.html"), check=False)
    assert proc.returncode != 0 and "nope" in proc.stderr and "Traceback" not in proc.stderr
    d = tmp_path / "p"
    write_profile(d, {0: "node-0", 1: "node-1"}, {(0, 1): 10}, 2)
    proc = run_cli("profile", "whatif", str(d), "--topology", "no-such-platform", "--place", "compact",
                   check=False)
    assert proc.returncode != 0 and "no-such-platform" in proc.stderr and "Traceback" not in proc.stderr
    # a profile that does not say its machine needs --topology
    proc = run_cli("profile", "whatif", str(d), "--place", "compact", check=False)
    assert proc.returncode == 2 and f"{d}: --topology is needed" in proc.stderr
    # an output that cannot be written: the path and the reason, not "[Errno 21] ..."
    proc = run_cli("profile", "report", str(d), "--topology", "fattree64x12", "-o", str(tmp_path),
                   check=False)
    assert proc.returncode == 2 and f"colltune: error: {tmp_path}: Is a directory" in proc.stderr
    # a label too many had been dropped silently
    proc = run_cli("profile", "report", str(d), "--topology", "fattree64x12", "--label", "a",
                   "--label", "b", "-o", str(tmp_path / "x.html"), check=False)
    assert proc.returncode == 2 and "--label given 2 times for 1 profile(s)" in proc.stderr
    # a file given as the profile folder of a run
    proc = run_cli("run", "-n", "2", "--profile", str(d / "job.json"), "--", "x.c", check=False)
    assert proc.returncode == 2 and "job.json: is a file, not a folder" in proc.stderr, proc.stderr


def test_real_smpi_profile_report(workdir, tmp_path):
    """End to end: profcount counted under SMPI (2 hosts x 3 ranks of `small`), then the
    report of region 'coll', kind bcast: its loaded cable halves are the routes' links of
    the host pairs the profile reader says exchanged bcast bytes, with those bytes."""
    from colltune.profile import link_loads
    from colltune.profile.counts import load_profile
    out = tmp_path / "prof"
    app = os.path.join(os.path.dirname(__file__), "..", "native", "tests", "profcount.c")
    run_cli("run", "--platform", "small", "--layout", "2x3", "--profile", str(out), "--", app)
    show = run_cli("profile", "show", str(out)).stdout
    assert "6 ranks on 2 hosts" in show and re.search(r"coll\s+bcast", show)
    html_path = tmp_path / "r.html"
    # no --topology: the platform the run recorded (colltune-run.json), here `small`
    run_cli("profile", "report", str(out), "--region", "coll", "--kind", "bcast",
            "-o", str(html_path))
    html = html_path.read_text()
    B, M, hosts = load_profile(out).host_matrix(region="coll", kind="bcast")
    assert B.sum() > 0
    want = {k: v for k, v in link_loads(load_topology("small"), B, M, hosts=hosts).nonzero().items()
            if "loopback" not in k}
    drawn = {lid.replace("-&gt;", "->"): float(b) for lid, b in
             re.findall(r'<path class="half"[^>]*data-link="([^"]+)" data-bytes="(\d+)"', html) if float(b) > 0}
    assert drawn == {k: v[0] for k, v in want.items()}
    # colltune's own traffic, left out on purpose, is said apart, not as missing (a review:
    # the red box had listed it on every page)
    assert "Left out on purpose (prof): " in html and "were colltune&#x27;s own" in html
    assert "What is missing" not in html
    # drawn on another machine than the one it ran on: the page says so
    run_cli("profile", "report", str(out), "--topology", "fattree64x12", "-o", str(html_path))
    assert "recorded on small, drawn on fattree64x12 (--topology)" in html_path.read_text()
    # whatif on another machine says its 'current' placement never ran there
    out_w = run_cli("profile", "whatif", str(out), "--topology", "fattree64x12", "--place", "spread").stdout
    assert out_w.startswith("note: recorded on small, placed on fattree64x12 (--topology): 'current' is "
                            "its hosts matched by name there"), out_w
    # export, as report, takes the machine the run recorded: links.csv without --topology
    files_dir = tmp_path / "files"
    run_cli("profile", "export", str(out), "-o", str(files_dir))
    assert (files_dir / "links.csv").exists()
    # the trace's p2p, left out once rank files split it exactly, is not listed as a source
    prof = load_profile(out)
    assert prof.sources("p2p", "p2p") == ["interposer"]
