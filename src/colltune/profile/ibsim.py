"""Real InfiniBand dumps of a simulated fabric: ibsim + opensm + infiniband-diags.

``ibsim`` (Debian ibsim-utils) simulates the fabric of a topology file; programs built on
libibumad talk to it instead of a kernel device when ``libumad2sim.so`` is preloaded
(Debian libumad2sim0). ``opensm`` (one sweep, ``-o``, with the chosen routing engine)
assigns LIDs and programs every switch's linear forwarding table; then ``ibnetdiscover``
and ``dump_fts`` (what ``dump_lfts.sh`` calls) read the fabric back, and ``ibtracert``
asks the fabric itself for the path between two LIDs (the reference the routes of
:func:`colltune.profile.ib.ib_topology` are checked against). Each run uses its own
socket name (``IBSIM_SOCKNAME``) and directory (umad2sim writes ``./sys-<pid>``), so runs
do not collide.

    python -m colltune.profile.ibsim tests/data/profile/ib/fattree.net tests/data/profile/ib
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["UMAD2SIM", "generate", "parse_tracert", "missing_tools"]

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
TOOLS = {"ibsim": "ibsim-utils", "opensm": "opensm", "ibnetdiscover": "infiniband-diags",
         "dump_fts": "infiniband-diags", "ibtracert": "infiniband-diags"}


class IBSimError(RuntimeError):
    """The simulated fabric could not be started or read."""


def missing_tools() -> list[str]:
    out = [f"{t} (Debian {p})" for t, p in TOOLS.items() if shutil.which(t) is None]
    if not os.path.exists(UMAD2SIM):
        out.append(f"{UMAD2SIM} (Debian libumad2sim0)")
    return out


def _first_hca(netfile: Path) -> str:
    """The ibsim node id of the first HCA: the SM and the diags attach there (SIM_HOST)."""
    for line in netfile.read_text().splitlines():
        m = re.match(r'^\s*(?:Hca|Ca)\s+\d+\s+"([^"]+)"', line)
        if m:
            return m.group(1)
    raise IBSimError(f"{netfile}: no Hca in this ibsim topology file")


def generate(netfile: str | os.PathLike, outdir: str | os.PathLike, *, routing: str = "ftree",
             lmc: int = 0, tracert: str | None = "all", timeout: float = 60.0) -> dict[str, Path]:
    """Simulate ``netfile``, route it with opensm's ``routing`` engine and write
    ``ibnetdiscover.txt``, ``lfts.txt`` (``dump_fts``) and ``tracert.txt`` (``ibtracert``
    between every ordered pair of HCA base LIDs with ``tracert="all"``; ``"some"``: the
    pairs from or to the lowest and the highest LID, fewer processes; ``None``: none)
    into ``outdir``. ``lmc``: opensm's LMC (2^lmc LIDs per port)."""
    missing = missing_tools()
    if missing:
        raise IBSimError("missing: " + ", ".join(missing) + " (bash scripts/setup.sh installs them)")
    netfile = Path(netfile).resolve()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ct-ibsim-") as tmp:
        env = dict(os.environ, IBSIM_SOCKNAME=f"ct{os.getpid()}x{time.monotonic_ns() % 10**6}",
                   SIM_HOST=_first_hca(netfile), OSM_TMP_DIR=tmp, OSM_CACHE_DIR=tmp)
        sim_log = open(Path(tmp) / "ibsim.log", "w+")
        sim = subprocess.Popen(["ibsim", "-s", "-n", str(netfile)], cwd=tmp, env=env,
                               stdin=subprocess.DEVNULL, stdout=sim_log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while "Network simulator ready" not in Path(sim_log.name).read_text():
                if sim.poll() is not None or time.monotonic() > deadline:
                    raise IBSimError(f"ibsim did not start: {Path(sim_log.name).read_text()[-2000:]}")
                time.sleep(0.05)
            penv = dict(env, LD_PRELOAD=UMAD2SIM)

            def run(argv: list[str]) -> str:
                p = subprocess.run(argv, cwd=tmp, env=penv, capture_output=True, text=True,
                                   timeout=timeout, stdin=subprocess.DEVNULL)
                if p.returncode != 0:
                    raise IBSimError(f"`{' '.join(argv)}` failed ({p.returncode}): {p.stderr[-2000:]}")
                return p.stdout

            run(["opensm", "-o", "-R", routing, "-l", str(lmc), "-f", str(Path(tmp) / "opensm.log")])
            log = (Path(tmp) / "opensm.log").read_text(errors="replace")
            if f"{routing} tables configured on all switches" not in log:
                raise IBSimError(f"opensm did not route with '{routing}': {log[-3000:]}")
            files = {"ibnetdiscover": out / "ibnetdiscover.txt", "lfts": out / "lfts.txt"}
            files["ibnetdiscover"].write_text(_stable(run(["ibnetdiscover"])))
            files["lfts"].write_text(run(["dump_fts"]))
            if tracert:
                lids = sorted({int(x) for x in re.findall(r"# lid (\d+) lmc",
                                                          files["ibnetdiscover"].read_text())})
                ends = set(lids) if tracert == "all" else {lids[0], lids[-1]}
                chunks = []
                for a in lids:
                    for b in lids:
                        if a != b and (a in ends or b in ends):
                            chunks.append(f"### ibtracert {a} {b}\n" + run(["ibtracert", str(a), str(b)]))
                files["tracert"] = out / "tracert.txt"
                files["tracert"].write_text("".join(chunks))
            return files
        finally:
            sim.terminate()
            try:
                sim.wait(5)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
            sim_log.close()


def _stable(text: str) -> str:
    """Drop ibnetdiscover's generation time, so regenerated dumps compare equal."""
    return re.sub(r"^# Topology file: generated on .*$", "# Topology file: generated by ibnetdiscover",
                  text, count=1, flags=re.M)


_TR_HOP = re.compile(r"^\[(\d+)\] -> (?:switch|ca) port \{0x([0-9a-f]+)\}\[(\d+)\]")


def parse_tracert(text: str) -> dict[tuple[int, int], list[tuple[int, str, int]]]:
    """``tracert.txt`` -> {(source LID, destination LID): [(out port, node GUID reached,
    in port), ...]}: every hop as the fabric reports it (``ibtracert``)."""
    out: dict[tuple[int, int], list] = {}
    for block in text.split("### ibtracert ")[1:]:
        head, *lines = block.splitlines()
        a, b = (int(x) for x in head.split())
        hops = []
        for line in lines:
            m = _TR_HOP.match(line)
            if m:
                hops.append((int(m.group(1)), m.group(2), int(m.group(3))))
            m = re.match(r"^To ca \{0x([0-9a-f]+)\}", line)
            if m and hops:  # the last hop names the port GUID: use the node's
                hops[-1] = (hops[-1][0], m.group(1), hops[-1][2])
        out[(a, b)] = hops
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m colltune.profile.ibsim", description=__doc__.split("\n\n")[0])
    ap.add_argument("netfile")
    ap.add_argument("outdir")
    ap.add_argument("--routing", default="ftree", help="opensm routing engine (default ftree)")
    ap.add_argument("--lmc", type=int, default=0, help="opensm's LMC (default 0)")
    ap.add_argument("--no-tracert", action="store_true")
    a = ap.parse_args(argv)
    try:
        files = generate(a.netfile, a.outdir, routing=a.routing, lmc=a.lmc,
                         tracert=None if a.no_tracert else "all")
    except IBSimError as exc:
        print(f"ibsim: {exc}", file=sys.stderr)
        return 1
    for f in files.values():
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
