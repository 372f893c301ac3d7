"""Per-job tune-then-run (`colltune run --tune-first`): inside the job's own
allocation, tune colltune's algorithms against the library's default decision for
the job's layout with the active learner within a budget, write colltune's rules
file, and run the application under the interposer with it."""
from __future__ import annotations

import re

from .errors import ConfigError

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def parse_budget(text: str) -> float:
    """'90s', '10m', '1.5h' or plain seconds -> seconds."""
    m = _BUDGET.match(text or "")
    if not m:
        raise ConfigError(f"bad --budget {text!r}: expected seconds or a number with s/m/h, e.g. 10m")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def tune_rules(cli: dict, config_file: str | None, collectives: list[str],
               layout: tuple[int, int], sizes: list[int], budget_s: float,
               campaign: str, show_progress: bool) -> tuple[str, object]:
    """Tune and export; returns (rules path, decision table)."""
    from .backends import trait
    from .exporters import EXPORTERS
    from .session import Session
    from .tuners.active import tune_active
    # both: the library's default decision is an arm, so the rules send a size to
    # `library` where nothing of colltune's beat it (with colltune's algorithms alone the
    # table could be slower than leaving the library alone); of the library's own
    # algorithms none, which a colltune rules file cannot name
    given = {**cli, "provider": cli.get("provider") or "both"}
    session = Session(given, config_file)
    if trait(session.settings.backend, "simulated") and session.settings.source_of("default_selector") == "default":
        # the default arm is the selector the job runs with: SMPI's own unless
        # --default-selector names one (runners/sim.py passes it to smpirun)
        session = Session({**given, "default_selector": "default"}, config_file)
    backend = session.backend()
    provider = backend.provider()
    algorithms = None
    if provider.colltune_part is not None:      # both: colltune's arms beside the library default
        algorithms = sorted({provider.arm_label(a) for c in collectives
                             for a in provider.colltune_part.algorithms(c)})
    with session.store as store:
        outcome = tune_active(backend, store, session.settings, collectives, [layout], sizes,
                              campaign=campaign, budget_s=budget_s, algorithms=algorithms,
                              show_progress=show_progress)
    if outcome.summary.past_deadline and show_progress:
        import sys
        print(f"colltune run: the tuning budget ({budget_s:g} s) was spent: "
              f"{outcome.summary.past_deadline} job(s) of launches not started; the rules are made of "
              f"what was measured", file=sys.stderr)
    table = outcome.table
    table.provenance.setdefault("arms", provider.deployment())    # which arm is `library`
    table.save(session.output_path(f"{campaign}.table.json"))
    exported = EXPORTERS.get("colltune")().export(table)
    path = session.output_path(f"{campaign}{exported.suffix}")
    with open(path, "w") as fh:
        fh.write(exported.text)
    return path, table
