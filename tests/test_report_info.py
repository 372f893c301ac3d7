"""`colltune info` reads algorithms from smpirun itself; the HTML report renders
in a real headless Chromium."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import run_cli


def _smpirun_list(sim_backend, key: str, tmp_path) -> list[str]:
    """Ask smpirun directly (the way a user would) for the valid algorithm names."""
    plat = sim_backend.platform
    hosts = plat.write_hostfile(1, 2, str(tmp_path / "hosts"))
    proc = subprocess.run([sim_backend.impl.launcher, "-np", "2", "-platform", plat.xml_path,
                           "-hostfile", hosts, f"--cfg=smpi/{key}:nope", str(sim_backend.bench)],
                          capture_output=True, text=True, timeout=60)
    m = re.search(r"Valid algorithms: (.*?)\.?$", proc.stdout + proc.stderr, re.MULTILINE)
    return [x.strip() for x in m.group(1).split(",")]


def test_info_lists_backends_mpis_and_algorithms(sim_backend, tmp_path):
    info = json.loads(run_cli("info", "--json").stdout)
    assert "sim" in {b["name"] for b in info["backends"]}
    smpi = [m for m in info["mpi"] if m["name"] == "smpi"]
    assert smpi and re.match(r"\d+\.\d+", smpi[0]["version"])
    colls = info["providers"]["smpi"]
    for coll, key in (("bcast", "bcast"), ("allreduce", "allreduce"),
                      ("reduce_scatter_block", "reduce_scatter")):
        listed = set(colls[coll]["algorithms"]) | set(colls[coll]["selectors"])
        assert listed == set(_smpirun_list(sim_backend, key, tmp_path))
        assert {"ompi", "mpich"} <= set(colls[coll]["selectors"])
        assert "ompi" not in colls[coll]["algorithms"]
    text = run_cli("info").stdout
    assert "binomial_tree" in text and "Algorithm provider smpi" in text
    # colltune's catalogue, as ucc_info -A: ids, descriptions, every parameter with its
    # default, range and meaning (from the native descriptors), presets
    cat = {a["name"]: a for a in info["providers"]["colltune"]["bcast"]["catalogue"]}
    assert {"name": "segsize", "unit": "bytes", "default": 8192, "min": 0, "max": 1 << 30,
            "help": "segment size, 0 = whole message"} in cat["binary"]["params"]
    text = run_cli("info", "-A").stdout
    assert f"\n  {cat['han']['id']:>2} han: {cat['han']['description']}\n" in text
    assert "       ibalg = 1 [1..6]: inter-node tree: 1 binomial" in text
    assert "tuning presets: ibalg=3;" in text
    # the real libraries' algorithms that take parameters, in the same form (labels set them)
    if "mpich" in info["providers"]:
        assert info["providers"]["mpich"]["bcast"]["parameters"]["tree"]["k"]["default"] == 2
        assert "mpich: algorithms with parameters" in text
        assert "       k = 2 [1..64]: radix" in text.split("mpich: algorithms with parameters")[1]
    if "openmpi" in info["providers"]:
        assert "fanout" in info["providers"]["openmpi"]["bcast"]["parameters"]["chain"]


def test_tuning_presets_are_candidates_unless_turned_off(sim_backend):
    """The catalogue's tune[] settings are listed and measured as candidates of their
    own (docs/deploy.md); --tune-presets no leaves the defaults only."""
    from colltune.session import Session
    info = json.loads(run_cli("info", "--json").stdout)
    assert "ring[segsize=8192]" in info["providers"]["colltune"]["allreduce"]["presets"]
    labels = [a.label for a in Session({"provider": "both"}).backend().provider().algorithms("allreduce")]
    assert "ring" in labels and "ring[segsize=8192]" in labels and "han[imod=2]" in labels
    off = Session({"provider": "both", "tune_presets": False}).backend().provider().algorithms("allreduce")
    assert "ring" in [a.label for a in off] and not [a for a in off if a.params]


def test_report_renders_in_chromium(workdir):
    run_cli("tune", "--collectives", "bcast,allreduce", "--layouts", "2x2,3x2", "--sizes",
            "8,1000,65536", "--algorithms", "binomial_tree,flattree,rdb,lr", "--campaign", "r", "-q")
    html_path = run_cli("report", "--campaign", "r").stdout.strip()
    text = open(html_path).read()
    assert "<h2 id='bcast'>" in text and "<h2 id='allreduce'>" in text
    assert text.count("data:image/png;base64,") >= 2 * (1 + 1 + 2)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: run `make setup` (scripts/setup.sh installs it)"
    shot = workdir / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={workdir / 'chrome'}", "--window-size=1300,2200",
                    f"--screenshot={shot}", "file://" + os.path.abspath(html_path)],
                   capture_output=True, timeout=120, check=True)
    import matplotlib.image as mpimg
    img = mpimg.imread(str(shot))
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    # a rendered page with plots: many distinct colours, not a blank/white page
    flat = (img[..., :3] * 255).astype(int).reshape(-1, 3)
    colours = {tuple(c) for c in flat[:: 97]}
    assert len(colours) > 50
    white = (flat.sum(axis=1) > 750).mean()
    assert 0.3 < white < 0.995


def test_report_keeps_sweeps_and_sub_communicators_out_of_the_summary(workdir):
    """`bench --procs` and the delayed scenario have points that share (collective,
    layout, size) but differ in ranks or delay: the summary compares only the plain
    scenario on the whole communicator; the rest is tabulated per ranks / delay."""
    run_cli("bench", "--coll", "gather", "--procs", "2,8", "--layouts", "2x4", "--sizes", "1",
            "--algorithms", "ompi_binomial,ompi_basic_linear,ompi", "--campaign", "p", "-q")
    run_cli("bench", "--coll", "bcast", "--scenario", "delayed", "--delays-us", "1,64",
            "--layouts", "2x4", "--sizes", "64K", "--algorithms", "binomial_tree,ompi",
            "--campaign", "d", "-q")
    text = open(run_cli("report", "--campaign", "p").stdout.strip()).read()
    summary = text[text.index("<h2>Summary"):text.index("<h2 id='gather'>")]
    # one point (P=8) in the summary, the P=2 one only in the sweep table
    assert re.search(r"<td class=\"l\">ompi</td><td class=\"\">1</td>", summary), summary
    sweep = text[text.index("Scenario sweeps"):text.index("<h2>Failures")]
    assert "gather plain, 2x4, 1 B" in sweep and "<td class=\"\">2</td>" in sweep
    text = open(run_cli("report", "--campaign", "d").stdout.strip()).read()
    assert "No comparable points" in text and "bcast delayed, 2x4, 65536 B" in text
    assert "delay (us)" in text
    bad = run_cli("report", "--campaign", "d", "--baselines", "foo", check=False)
    assert bad.returncode == 2 and "measured none of them (its library default selectors: ompi)" \
        in bad.stderr


def test_info_describes_the_platform_a_campaign_would_simulate(tmp_path):
    """No command showed a platform's nodes, SMPI settings and charge rates, nor said that
    a platform without a sidecar runs on SMPI's defaults (an HPC centre engineer's review).
    info --json has a format and version."""
    from colltune import platforms
    info = json.loads(run_cli("info", "--json").stdout)
    assert (info["format"], info["version"]) == ("colltune.info", 1)
    p = info["platform"]
    assert (p["name"], p["nodes"], p["cores_per_node"], p["topology"]) == ("small", 8, 4, "FLAT")
    assert p["smpirun_args"] == platforms.load("small").smpirun_cfg_args()
    assert p["charge_env"]["COLLTUNE_REDUCE_RATE"] == "4000000000.0" and p["charge_rates_from"] == "the sidecar"
    mine = tmp_path / "mine.xml"
    mine.write_text(open(platforms.load("small").xml_path).read())
    proc = run_cli("info", "--platform", str(mine))
    assert "sidecar none: SMPI defaults" in proc.stdout and "(no --cfg: SMPI defaults)" in proc.stdout
    assert "(colltune's defaults (DEFAULT_CHARGE_RATES))" in proc.stdout
    assert "has no SMPI settings (no sidecar mine.json with smpi_config)" in proc.stderr, proc.stderr
