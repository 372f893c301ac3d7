"""Arm ids (``library``, ``ring``, ``han:imod=2,fs=65536``; docs/online.md) and the
preset arms of each collective. The preset list lives in ONE place, the C table
native/intercept/online_arms.c; it is read here through ``colltune-rules
online-arms`` (JSON, with the fingerprint a job of this build computes), never copied.
On MPICH the list goes on with MPICH's own algorithms, ``mpich:<name>``, found at run time
through MPI_T (native/intercept/online_libarms.c; the tool's ``library_arms`` member gives
their control variable values); other libraries list none."""
from __future__ import annotations

import json
import subprocess
import tempfile

from ..errors import BackendError, InputError

LIBRARY = "library"
# arm ids a library's own algorithm may carry: "mpich:NAME" (MPICH's MPIR_CVAR_<COLL>_INTRA_ALGORITHM
# value NAME, docs/online-native.md); "openmpi"/"smpi" are reserved, no build offers them
LIBRARY_PREFIXES = ("mpich", "openmpi", "smpi")


def split_arm(arm: str) -> tuple[str, str, dict[str, int]]:
    """'han:imod=2,fs=65536' -> ('colltune', 'han', {'imod': 2, 'fs': 65536});
    'library' -> ('library', 'library', {}); 'mpich:ring' -> ('mpich', 'ring', {})."""
    from ..exporters.colltune_rules import parse_number
    if arm == LIBRARY:
        return LIBRARY, LIBRARY, {}
    head, _, rest = arm.partition(":")
    if head in LIBRARY_PREFIXES:
        return head, rest, {}
    params = {}
    for item in filter(None, rest.split(",")):
        k, eq, v = item.partition("=")
        if not eq or parse_number(v) is None:
            raise InputError(f"bad parameter {item!r} in arm {arm!r}")
        params[k] = parse_number(v)
    return "colltune", head, params


def arm_label(arm: str) -> str:
    """The arm as an Algorithm label (results store, tables): 'han[imod=2,fs=65536]'."""
    prov, name, params = split_arm(arm)
    if prov not in ("colltune", LIBRARY):
        name = f"{prov}:{name}"
    return name + ("[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]" if params else "")


def preset_arms(impl, cache_dir: str, platform: str = "") -> tuple[dict[str, list[str]], str]:
    """({collective: [arm id, ...]}, fingerprint) compiled into libcolltune for impl;
    platform: COLLTUNE_PLATFORM of the job (part of an SMPI fingerprint)."""
    from ..providers.colltune import rules_tool_command
    with tempfile.TemporaryDirectory() as tmp:
        cmd = rules_tool_command(impl, cache_dir, tmp) + ["online-arms"]
        env = {**impl.run_env(), "COLLTUNE_PLATFORM": platform}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp, env=env)
    text = proc.stdout
    try:
        data = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError:
        raise BackendError(f"`colltune-rules --online-arms` printed no arm list (exit "
                           f"{proc.returncode}): {(proc.stdout + proc.stderr)[-400:]}") from None
    return parse_preset(data), data.get("fingerprint", "")


def parse_preset(data: dict) -> dict[str, list[str]]:
    """The tool's JSON: {"arms": {coll: [id, ...]}} or {"arms": [{"collective", "arm"}]}
    or {coll: [id, ...]}."""
    arms = data.get("arms", data)
    out: dict[str, list[str]] = {}
    if isinstance(arms, list):
        for a in arms:
            out.setdefault(a["collective"], []).append(a.get("arm") or a.get("id"))
    else:
        out = {c: [a if isinstance(a, str) else (a.get("arm") or a.get("id")) for a in ids]
               for c, ids in arms.items() if isinstance(ids, list)}
    return out
