"""SimGrid's own routes, the ground truth of ``colltune.profile.routing``.

A small C++ program against SimGrid's s4u API (Debian ``libsimgrid-dev``; SimGrid has no
Python bindings there) loads a platform and prints every link SimGrid created (name,
bandwidth, latency, sharing policy) and, for each host pair read on stdin, the link
list of ``simgrid::s4u::Host::route_to`` (SimGrid's global route, the one its network
model charges). ``build()`` compiles it once into the cache folder (keyed by the source's
hash); ``routes()`` runs it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

__all__ = ["SOURCE", "build", "routes", "SimGridRoutes", "SHARING"]

#: s4u::Link::SharingPolicy values (simgrid/s4u/Link.hpp, 3.32)
SHARING = {0: "FATPIPE", 1: "SHARED", 2: "SPLITDUPLEX", 3: "WIFI", 4: "NONLINEAR"}

SOURCE = r"""
// colltune: print SimGrid's links and host-to-host routes (s4u Host::route_to).
// usage: sg_routes PLATFORM.xml [--log=...] < pairs   (one "src dst" host pair a line)
// output: "L name bandwidth latency policy" per link, then "R src dst link..." per pair
#include <simgrid/s4u.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  simgrid::s4u::Engine e(&argc, argv);
  if (argc < 2) { std::cerr << "usage: sg_routes PLATFORM.xml < pairs\n"; return 2; }
  e.load_platform(argv[1]);
  std::ios::sync_with_stdio(false);
  char buf[64];
  for (auto const* l : e.get_all_links()) {
    std::snprintf(buf, sizeof buf, " %.17g %.17g ", l->get_bandwidth(), l->get_latency());
    std::cout << "L " << l->get_name() << buf << static_cast<int>(l->get_sharing_policy()) << '\n';
  }
  std::string a, b;
  while (std::cin >> a >> b) {
    auto const* h1 = simgrid::s4u::Host::by_name_or_null(a);
    auto const* h2 = simgrid::s4u::Host::by_name_or_null(b);
    if (!h1 || !h2) { std::cout << "E " << a << ' ' << b << '\n'; continue; }
    std::vector<simgrid::s4u::Link*> links;
    double lat = 0;
    h1->route_to(h2, links, &lat);
    std::cout << "R " << a << ' ' << b;
    for (auto const* l : links) std::cout << ' ' << l->get_name();
    std::cout << '\n';
  }
  return 0;
}
"""


class SimGridRoutesError(RuntimeError):
    pass


def build(cache_dir: str | os.PathLike = ".colltune-cache") -> str:
    """Compile the route dumper (once per source version); return the executable's path."""
    tag = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
    out = Path(cache_dir).resolve() / "profile" / f"sg_routes-{tag}"
    if out.is_file() and os.access(out, os.X_OK):
        return str(out)
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise SimGridRoutesError("no C++ compiler (g++) found: install g++ and libsimgrid-dev")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cpp")
    src.write_text(SOURCE, encoding="utf-8")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    r = subprocess.run([cxx, "-O1", "-std=c++17", str(src), "-o", str(tmp), "-lsimgrid"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SimGridRoutesError(f"building the SimGrid route dumper failed (needs libsimgrid-dev):\n"
                                 f"{r.stderr[-2000:]}")
    os.replace(tmp, out)
    return str(out)


@dataclass
class SimGridRoutes:
    """What SimGrid said: ``links`` name -> (bandwidth B/s, latency s, policy name);
    ``routes`` (src, dst) -> [link names in route order]."""
    links: dict[str, tuple[float, float, str]]
    routes: dict[tuple[str, str], list[str]]


def routes(xml_path: str | os.PathLike, pairs: Iterable[tuple[str, str]],
           cache_dir: str | os.PathLike = ".colltune-cache", timeout: float = 300) -> SimGridRoutes:
    """Ask SimGrid for the routes of ``pairs`` (host names) on the platform file."""
    exe = build(cache_dir)
    pairs = list(pairs)
    text = "".join(f"{a} {b}\n" for a, b in pairs)
    r = subprocess.run([exe, os.fspath(xml_path), "--log=root.thres:critical"], input=text,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise SimGridRoutesError(f"sg_routes {xml_path} exited {r.returncode}: {r.stderr[-2000:]}")
    links: dict[str, tuple[float, float, str]] = {}
    got: dict[tuple[str, str], list[str]] = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "L":
            links[f[1]] = (float(f[2]), float(f[3]), SHARING.get(int(f[4]), f[4]))
        elif f[0] == "R":
            got[(f[1], f[2])] = f[3:]
        elif f[0] == "E":
            raise SimGridRoutesError(f"SimGrid has no host named in pair {f[1]} {f[2]}")
    missing = [p for p in pairs if p not in got]
    if missing:
        raise SimGridRoutesError(f"SimGrid printed no route for {len(missing)} pairs, e.g. {missing[0]}")
    return SimGridRoutes(links, got)
