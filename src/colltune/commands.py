"""Implementations of the CLI commands (argument parsing lives in cli.py)."""
from __future__ import annotations

import json
import os
import sys

from .campaign import Campaign
from .compare import compare_to_baselines, format_summary, summarize
from .errors import ColltuneError
from .mpi.impl import note_dropped
from .plan import BenchSpec, check_sizes
from .results import Results
from .session import Session, new_campaign_name
from .sizes import parse_list


def _split(text: str | None) -> list[str]:
    """A comma list; commas inside [...] belong to a label (han[fs=131072,ibalg=6])."""
    out, depth, cur = [], 0, ""
    for ch in text or "":
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [t.strip() for t in [*out, cur] if t.strip()]


def _layouts(args) -> list[tuple[int, int]]:
    if getattr(args, "layouts", None) and (args.nodes or args.ppn):
        raise ColltuneError("--layouts or --nodes/--ppn, not both")
    if getattr(args, "layouts", None):
        out = []
        for item in args.layouts.split(","):
            try:
                n, p = item.lower().split("x")
                out.append((int(n), int(p)))
            except ValueError:
                raise ColltuneError(f"bad layout {item!r}: expected NODESxPPN, e.g. 4x12") from None
            if min(out[-1]) < 1:
                raise ColltuneError(f"bad layout {item!r}: nodes and processes per node must be >= 1")
        return out
    nodes = parse_list(args.nodes or "2", "node count", 1)
    ppns = parse_list(args.ppn or "4", "processes per node", 1)
    return [(n, p) for n in nodes for p in ppns]


def _listing(provider) -> dict:
    return {c: {"algorithms": [a.name for a in provider.algorithms(c) if not a.params],
                "presets": [a.label for a in provider.algorithms(c) if a.params],
                "parameters": {a.name: provider.parameters(c, a.name)
                               for a in provider.algorithms(c)
                               if not a.params and provider.parameters(c, a.name)},
                "selectors": [s.name for s in provider.selectors(c)]}
            for c in provider.collectives()}


def _parameters_text(provider) -> str:
    """A library's algorithms that take parameters, in catalogue_text's form (info -A)."""
    lines = [f"{provider.name}: algorithms with parameters (a label sets them: "
             f"NAME[param=value,...]; the others at their defaults)"]
    for c in provider.collectives():
        algs = provider.algorithms(c)
        rows = []
        for a in algs:
            params = provider.parameters(c, a.name) if not a.params else {}
            if not params:
                continue
            rows.append(f"   {a.name}: {a.description}")
            rows += [f"       {k} = {v['default']}{' ' + v['unit'] if v['unit'] else ''} "
                     f"[{v['min']}..{v['max']}]: {v['help']}" for k, v in params.items()]
            presets = [",".join(f"{k}={v}" for k, v in b.params) for b in algs
                       if b.params and b.name == a.name]
            if presets:
                rows.append(f"       tuning presets: {'; '.join(presets)}")
        if rows:
            lines += [f"{c}:"] + rows
    return "\n".join(lines)


def cmd_info(args, cli) -> int:
    from . import mpi
    from .backends import BACKENDS
    from .providers.base import COLLECTIVES
    session = Session(cli, args.config)
    info: dict = {"backends": [], "mpi": [], "providers": {}}
    for name, cls in BACKENDS.items():
        info["backends"].append({"name": name, "description": cls.description})
    for impl in mpi.discover():
        info["mpi"].append({"name": impl.name, "version": impl.version, "describe": impl.describe()})
    try:
        provider = session.backend().provider()
        info["providers"][provider.name] = _listing(provider)
    except ColltuneError as exc:
        info["providers_error"] = str(exc)
    try:                                              # colltune's own, via the interposer
        from .providers.colltune import info_listing
        info["providers"].setdefault("colltune", info_listing(session.backend()))
    except ColltuneError as exc:
        info.setdefault("local_providers_unavailable", {})["colltune"] = str(exc).splitlines()[0]
    from .backends.local import local_providers      # real libraries found here
    found, errors = local_providers(session.settings)
    for provider in found.values():
        info["providers"].setdefault(provider.name, _listing(provider))
    if errors:
        info["local_providers_unavailable"] = errors
    from .backends import trait
    if trait(session.settings.backend, "simulated"):    # the machine a campaign would simulate
        from . import platforms
        try:
            info["platform"] = platforms.load(session.settings.platform).summary()
        except platforms.PlatformError as exc:
            info["platform_error"] = str(exc)
    if args.json:
        info = {"format": "colltune.info", "version": 1, **info}
        json.dump(info, sys.stdout, indent=1)
        print()
        return 0
    if args.all_algorithms:
        from .providers.colltune import catalogue_text
        print(catalogue_text(session.backend()))
        for provider in found.values():
            print(_parameters_text(provider))
        return 0
    print("Backends:")
    for b in info["backends"]:
        print(f"  {b['name']:<8} {b['description']}")
    print("MPI implementations found:")
    for m in info["mpi"] or [{"describe": "(none)"}]:
        print(f"  {m['describe']}")
    if "platform" in info:
        p = info["platform"]
        print(f"Platform {p['name']} ({p['xml']}, sidecar {p['sidecar'] or 'none: SMPI defaults'}): "
              f"{p['nodes']} nodes x {p['cores_per_node']} cores, {p['topology']}, "
              f"{p['leaf_units']} leaf unit(s)")
        print(f"  smpirun {' '.join(p['smpirun_args']) or '(no --cfg: SMPI defaults)'}")
        print(f"  colltune's reductions and copies charged at "
              f"{', '.join(f'{k}={v}' for k, v in p['charge_env'].items())} ({p['charge_rates_from']})")
    elif "platform_error" in info:
        print(f"Platform: {info['platform_error']}")
    if "providers_error" in info:
        print(f"Algorithm providers: unavailable: {info['providers_error']}")
    for pname, why in info.get("local_providers_unavailable", {}).items():
        print(f"Algorithm provider {pname}: unavailable: {why}")
    for pname, colls in info["providers"].items():
        print(f"Algorithm provider {pname}:")
        for c in COLLECTIVES:
            if c in colls:
                print(f"  {c:<21} {len(colls[c]['algorithms']):>3} algorithms: "
                      f"{', '.join(colls[c]['algorithms'])}")
                if colls[c].get("presets"):
                    print(f"  {'':<21} tuning presets: {', '.join(colls[c]['presets'])}")
                print(f"  {'':<21} selectors: {', '.join(colls[c]['selectors'])}")
    return 0


def cmd_bench(args, cli) -> int:
    session = Session(cli, args.config)
    backend = session.backend()
    provider = backend.provider()
    names = _split(args.algorithms)
    if args.collective not in provider.collectives():
        raise ColltuneError(f"--coll {args.collective}: not a collective {provider.name} provides "
                            f"({', '.join(provider.collectives())})")
    if not names:
        raise ColltuneError("--algorithms: empty (names, or 'all')")
    # 'all': every algorithm (and its presets); beside it, names add selectors (all,ompi,mpich)
    algs = provider.algorithms(args.collective) if "all" in names else []
    algs += [provider.lookup(args.collective, n) for n in names if n != "all"]
    algs = list(dict.fromkeys(algs))
    for opt, scen in (("delays_us", "delayed"), ("tcalc_us", "overlap")):
        if getattr(args, opt) is not None and args.scenario != scen:
            raise ColltuneError(f"--{opt.replace('_', '-')}: only with --scenario {scen}")
    if args.root and args.collective not in ROOTED:
        raise ColltuneError(f"--root {args.root}: {args.collective} has no root")
    if args.scenario == "overlap":
        _check_overlap(args.collective, [a for a in algs if a.kind == "algorithm"])
    sizes = tuple(parse_list(args.sizes, "message size"))
    check_sizes(args.collective, sizes, args.dtype)
    if args.collective == "barrier" and set(sizes) != {0}:
        print("colltune: warning: barrier moves no data: every size measures the same call "
              "(the size column repeats --sizes); --sizes 0 measures it once", file=sys.stderr)
    procs = tuple(parse_list(args.procs, "participant count", 1)) if args.procs else None
    specs = []
    layouts = _layouts(args)
    check_layouts(backend, layouts)
    for nodes, ppn in layouts:
        if procs and max(procs) > nodes * ppn:
            raise ColltuneError(f"--procs {max(procs)} exceeds {nodes}x{ppn} = {nodes * ppn} ranks")
        if not 0 <= args.root < min(procs or [nodes * ppn]):
            raise ColltuneError(f"--root {args.root}: not a rank of every communicator measured "
                                f"(the smallest has {min(procs or [nodes * ppn])} ranks)")
        for alg in algs:
            specs.append(BenchSpec(
                args.collective, alg, nodes, ppn, sizes, procs, args.scenario,
                tuple(parse_list(args.delays_us or "1..1024", "delay")) if args.scenario == "delayed" else (),
                args.delayed_rank if args.scenario == "delayed" else None,
                tuple(parse_list(args.tcalc_us or "1..1024", "tcalc")) if args.scenario == "overlap" else (),
                args.root, args.dtype))
    name = args.campaign or new_campaign_name("bench")
    note_dropped("bench")
    with session.store as store:
        campaign = Campaign(name, backend, store, session.settings, not args.quiet,
                            args.retry_failed)
        summary = campaign.run(specs)
        # what this command asked for, not every point the campaign's name holds (earlier
        # runs' algorithms, roots, sizes): the table, the failures and the exit code
        res = Results.from_store(store, name, campaign.reused_keys)
        if "key" in res.points:
            res = res.filter(key=campaign.planned_keys)
    from .tables import classic
    order = {(a.provider, a.label): i for i, a in enumerate(algs)}
    pts = res.points
    if not pts.empty:                      # in the order of --algorithms
        pts = pts.assign(_order=[order.get(k, len(order)) for k in zip(pts["provider"], pts["algorithm"])])
        pts = pts.sort_values("_order", kind="stable").drop(columns="_order")
    print(classic(pts))
    print(f"campaign {name}: {summary.launches} launches, measured {summary.measured}, "
          f"{summary.skipped_points} points already in {session.settings.store}")
    for line in [*reuse_notes(summary), *failure_lines(res), late_note(res), oversubscribed_note(res)]:
        if line:
            print(line)
    return 0 if not res.failures().shape[0] else 1


def _check_overlap(collective: str, algs: list) -> None:
    """The overlap scenario times MPI_I<coll>: forcing selects blocking algorithms only.
    colltune's algorithms (the interposer serves blocking collectives) are refused: every
    name would time the library's own non-blocking algorithm, which a developer's review
    found shown, identical, under three colltune names. A library's names all time its
    default non-blocking algorithm too: said once."""
    ours = sorted({a.label for a in algs if a.provider == "colltune"})
    if ours:
        raise ColltuneError(
            f"--scenario overlap: colltune's algorithms ({', '.join(ours)}) run through the "
            f"interposer, which serves the blocking MPI_{collective.capitalize()} only; "
            f"MPI_I{collective} would time the library's own non-blocking algorithm under each "
            f"name. Time them with --scenario plain or delayed")
    if len({a.name for a in algs}) > 1:
        from .mpi.impl import simulated
        lib = algs[0].provider
        how = ("SMPI's non-blocking collectives are its own flat implementations whatever "
               "algorithm is configured" if simulated(lib) else
               f"{lib}'s forcing selects its blocking algorithms only")
        print(f"colltune: warning: {how} (docs/bench.md): the overlap scenario times the same "
              f"MPI_I{collective} under every algorithm name", file=sys.stderr)


def failure_lines(results, most: int = 10) -> list[str]:
    """Each failed point with its reason (the table shows only its status)."""
    fails = results.failures()
    if fails.empty:
        return []
    out = [f"failed points ({len(fails)}), with their reason:"]
    for r in fails.head(most).itertuples():
        why = (getattr(r, "check_error", None) or "").strip() or "no reason recorded"
        out.append(f"  {r.collective} {r.algorithm} {int(r.nodes)}x{int(r.ppn)} {int(r.msg_size)} B: "
                   f"{r.status}: {why[:300]}")
    if len(fails) > most:
        out.append(f"  ... and {len(fails) - most} more (colltune results --campaign ...)")
    return out


def late_note(results) -> str | None:
    """Points that discarded more repetitions for late starts than they timed: a busy or
    oversubscribed host descheduled ranks, and the kept repetitions are the lucky ones
    (a real-MPI tune on 2 cores had claimed a 9x win there; docs/bench.md)."""
    p = results.ok().points
    if p.empty or "late_starts" not in p or "reps" not in p:
        return None
    late = p[p["late_starts"].fillna(0) > p["reps"].fillna(0)]
    if late.empty:
        return None
    return (f"note: {len(late)} of {len(p)} point(s) discarded more repetitions for late starts "
            f"than they timed (a busy or oversubscribed host): their times are unreliable "
            f"(docs/bench.md); fewer ranks per core, or an idle machine, for numbers to keep")


def oversubscribed_note(results) -> str | None:
    """Launches whose ranks outnumbered this host's cores on a backend that runs every
    rank here (local, netns): their speed-ups are noise (a review: a 4-rank tune on 2
    cores printed 'geomean speedup 19.8x' with no word of it)."""
    from .backends.local import host_cores, oversubscribed_runs
    runs = results.runs
    over = oversubscribed_runs(runs)
    if over.empty:
        return None
    return (f"note: {len(over)} of {len(runs)} launch(es) ran more ranks "
            f"({', '.join(str(int(n)) for n in sorted(set(over['nprocs'])))}) than this host's "
            f"{host_cores()} cores: those ranks time-share the cores, so their times and any "
            f"speed-up from them are noise, not a tuning result (docs/bench.md); tune on the "
            f"cluster itself "
            f"(--backend slurm) or with at most {host_cores()} ranks here")


def reuse_notes(summary) -> list[str]:
    """What a campaign did with the points already stored, beyond reusing them: failures
    it kept (a re-run with a larger --timeout still shows them) and points it measured
    again because they lacked the result check (or the time) this run asks for."""
    out = []
    again = getattr(summary, "remeasured", 0)
    if again:
        out.append(f"{again} stored point(s) measured again: they lacked the result check "
                   f"(--check none) or the time (--check only) this run asks for")
    otherwise = getattr(summary, "measured_otherwise", 0)
    if otherwise:
        out.append(f"{otherwise} stored point(s) measured again: they were measured with another "
                   f"build of colltune's algorithms (its native sources changed since)")
    for setting, n in sorted((getattr(summary, "other_settings", None) or {}).items()):
        out.append(f"{n} stored point(s) measured again: they were measured with another "
                   f"{setting} (the platform's sidecar or the environment changed since)")
    alone = getattr(summary, "relaunched_alone", 0)
    if alone:
        out.append(f"{alone} launch(es) killed by SIGKILL beside other launches (the kernel's OOM "
                   f"killer?) were measured again alone")
    late = getattr(summary, "past_deadline", 0)
    if late:
        out.append(f"{late} job(s) of launches not started: the tuning budget was spent "
                   f"(active_budget_s, --budget); the table is made of what was measured")
    failed = getattr(summary, "skipped_failures", None) or {}
    if failed:
        kinds = ", ".join(f"{n} {st}" for st, n in sorted(failed.items()))
        out.append(f"{sum(failed.values())} stored failure(s) skipped ({kinds}; re-measure "
                   f"with --retry-failed)")
    return out


# collectives with a root (bench --root)
ROOTED = ("bcast", "reduce", "gather", "scatter")


def _why_unknown(provider, collective: str, name: str) -> str | None:
    """None when name is one of the provider's algorithms or selectors for the collective
    (a PROVIDER:NAME of --provider both; a label with parameters, checked against their
    ranges), else the lookup's reason."""
    from .errors import ConfigError
    try:
        provider.lookup(collective, name)
        return None
    except ConfigError as exc:
        if any(name in (a.label, provider.arm_label(a)) for a in provider.algorithms(collective)):
            return None
        return str(exc)


def check_layouts(backend, layouts) -> None:
    """Every layout fits the backend's machine (Backend.check_layout), before anything
    is launched."""
    from .backends.base import Launch
    for n, p in layouts:
        backend.check_layout(Launch(n, p, []))


def run_tuning(session: Session, args, collectives, layouts, sizes, name, strategy="exhaustive",
               baselines=None, algorithms=None):
    from .tuners import TUNERS, TuningSpace
    backend = session.backend()
    provider = backend.provider()
    for c in collectives:
        if c not in provider.collectives():
            raise ColltuneError(f"{provider.name} provides no algorithms for {c!r}; "
                                f"it has {', '.join(provider.collectives())}")
    check_layouts(backend, layouts)
    for c in collectives:
        check_sizes(c, sizes, getattr(args, "dtype", None))
    note_dropped("tune")
    for alg in algorithms or ():
        whys = [_why_unknown(provider, c, alg) for c in collectives]
        if all(whys):
            raise ColltuneError(f"--algorithms: {alg!r} is not an algorithm of {provider.name} for "
                                f"{', '.join(collectives)}: {'; '.join(dict.fromkeys(whys))} "
                                f"(`colltune info -A` lists them with their parameters)")
    for sel in baselines or ():
        if not any(s.name == sel for c in collectives for s in provider.selectors(c)):
            raise ColltuneError(f"--baselines: {sel!r} is not a selector of {provider.name} "
                                f"(known: {', '.join(sorted({s.name for c in collectives for s in provider.selectors(c)}))})")
    baselines = baselines or list(provider.default_baselines)
    space = TuningSpace(tuple(collectives), tuple(layouts), tuple(sizes),
                        tuple(algorithms) if algorithms else None, getattr(args, "root", 0))
    tuner = TUNERS.get(strategy)(provider, space, baselines)
    with session.store as store:
        if hasattr(tuner, "attach"):  # tuners that measure by themselves (taskmodel)
            tuner.attach(backend, session.settings, store, getattr(args, "heuristics", False),
                         getattr(args, "han_space", "han"))
        campaign = Campaign(name, backend, store, session.settings, not args.quiet,
                            getattr(args, "retry_failed", False))
        summary = tuner.run(campaign)
        # points of this space that another campaign measured count too (e.g. a
        # --provider both campaign after a library one: the same store keys)
        results = Results.from_store(store, name, also_keys=campaign.reused_keys)
        if campaign.planned_keys:       # not the campaign's points of an earlier plan
            results = results.filter(key=campaign.planned_keys)
    table = tuner.decide(results, {**backend.provenance(), "campaign": name,
                                   "baselines": baselines, "arms": provider.deployment()})
    return table, results, summary, baselines


def cmd_tune(args, cli) -> int:
    session = Session(cli, args.config)
    name = args.campaign or new_campaign_name(f"tune-{args.strategy}")
    table, results, summary, baselines = run_tuning(
        session, args, _split(args.collectives), _layouts(args),
        parse_list(args.sizes, "message size"), name, args.strategy,
        _split(args.baselines) or None, _split(args.algorithms) or None)
    if not table.entries and session.settings.check == "only":
        # the table records the campaign's provenance; it has nothing to deploy
        path = table.save(args.table or session.output_path(f"{name}.table.json"))
        _print_outcome(name, summary, results, baselines, path, None)
        print("--check only: every point's result checked, nothing timed: the table has no rules")
        return 0
    if not table.entries:
        # nothing to deploy: say why (the failure counts), write no table (an earlier
        # good one of the same name stays), exit non-zero
        _print_outcome(name, summary, results, baselines, None, None)
        fails = results.failures()
        why = (f"every point failed ({fails.groupby('status').size().to_dict()})"
               if len(fails) and len(fails) == len(results) else
               "no algorithm measured ok" + (f" (failed points: "
                                             f"{fails.groupby('status').size().to_dict()})"
                                             if len(fails) else ""))
        print(f"colltune: error: campaign {name}: {why}; the decision table would have no "
              f"entries, none written (`colltune report --campaign {name}` lists the "
              f"failures with their reasons)", file=sys.stderr)
        return 1
    path = table.save(args.table or session.output_path(f"{name}.table.json"))
    _print_outcome(name, summary, results, baselines, path, None,
                   _keep_default_hint(table, session.settings.backend))
    line = table_vs_default(table, results)
    if line:
        print(line)
    for line in tuner_notes(table, args):
        print(line)
    return 0


def tuner_notes(table, args) -> list[str]:
    """What the strategy's table is and is not (only in its provenance otherwise):
    why active learning stopped, and that a taskmodel table of colltune's HAN alone
    was never compared with the library's default decision."""
    out = []
    act = table.provenance.get("active") or {}
    for coll, stop in (act.get("stops") or {}).items():
        points = (act.get("points") or {}).get(coll)
        at = act.get("converged_at_iteration", {}).get(coll)
        out.append(f"active learning, {coll}: stopped: {stop} after {points} measured points"
                   + (f" (converged at iteration {at})" if at else
                      " -- NOT converged: the table is the model's best guess so far"))
    if act:
        from .tuners.active import cost_lines
        out += cost_lines(act)
    if args.strategy == "taskmodel" and table.provenance.get("taskmodel", {}).get("han_part_of") != "both":
        out.append("note: the taskmodel table chooses among HAN configurations only, predicted "
                   "by the task cost model; nothing compared them with the library's default "
                   "decision, which may be faster at some points: `tune --provider both "
                   "--strategy taskmodel` measures the model's choice against it and keeps the "
                   "faster (docs/taskmodel.md)")
    return out


def table_vs_default(table, results) -> str | None:
    """For a table that could choose the library's default decision (--provider
    both): its choices against that default at the measured points."""
    import math
    arms = table.provenance.get("arms") or {}
    lib, default = arms.get("library"), arms.get("library_default")
    if not default:
        return None
    pts = results.filter(scenario="plain").ok().points
    t = {(r.collective, int(r.nodes), int(r.ppn), int(r.msg_size), r.provider, r.algorithm):
         float(r.ttc_median_s) for r in pts.itertuples()}
    ratios = []
    for (c, n, p, m, prov, alg), base in t.items():
        if (prov, alg) != (lib, default):
            continue
        rule = table.entry(c, n, p).rule_for(m)
        chosen = t.get((c, n, p, m, rule.provider, rule.algorithm))
        if chosen and base > 0:
            ratios.append(base / chosen)
    if not ratios:
        return None
    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return (f"\nThe table's choices vs the library default it deploys with ({lib} {default}): "
            f"geomean speedup {gm:.3f}x, worst {min(ratios):.3f}x over {len(ratios)} measured points")


def _keep_default_hint(table, backend_name: str) -> str:
    """What lets a table keep the library default where it beat every algorithm measured:
    a --provider both campaign, where the backend runs colltune's algorithms ("" when this
    campaign was one, or none can be)."""
    from .providers.both import BothProvider
    arms = ((table.provenance if table is not None else None) or {}).get("arms") or {}
    if arms.get("provider") == BothProvider.name:
        return ""
    if backend_name not in BothProvider.backends:
        return (f"; a table can keep the default only from `tune --provider both`, which backend "
                f"{backend_name!r} does not run (backends {', '.join(BothProvider.backends)})")
    return "; `tune --provider both` lets the table keep the default (docs/deploy.md)"


def _print_outcome(name, summary, results, baselines, table_path, report_path,
                   keep_default: str = "") -> None:
    fails = results.failures()
    print(f"\ncampaign {name}: {summary.launches} launches in {summary.wall_s:.0f} s, "
          f"points {summary.measured}, {summary.skipped_points} reused from the store")
    for line in [*reuse_notes(summary), late_note(results), oversubscribed_note(results)]:
        if line:
            print(line)
    if len(fails):
        kinds = fails.groupby("status").size().to_dict()
        print(f"failed points (excluded from 'best'): {kinds}")
    print(f"decision table: {table_path or 'none (no entries)'}")
    if report_path:
        print(f"HTML report:    {report_path}")
    print("\nBest algorithm vs the library default selectors (time ratio selector/best):")
    cmp = compare_to_baselines(results, baselines)
    print(format_summary(summarize(cmp, baselines)))
    for name in baselines if not cmp.empty else ():
        slower = int((cmp[f"{name}_speedup"] < 1 - 1e-6).sum())
        if slower:
            print(f"note: at {slower} point(s) the library default {name!r} beat every algorithm "
                  f"measured, so the table's choice there is slower than leaving the library "
                  f"alone{keep_default}")


def cmd_report(args, cli) -> int:
    from .report import render
    session = Session(cli, args.config)
    with session.existing_store() as store:
        name = args.campaign or (store.campaigns() or [None])[-1]
        if name is None:
            raise ColltuneError(f"no campaign in {session.settings.store}")
        results = Results.from_store(store, name).of_setup(args.root, args.dtype)
        from .report.online import online_sections
        online = online_sections(store, results)        # campaigns with online records
    from .decision import DecisionTable
    table_path = session.output_path(f"{name}.table.json")
    table = DecisionTable.load(table_path) if os.path.exists(table_path) else None
    if not len(results):
        if table is not None and table.tuner == "taskmodel":
            raise ColltuneError(
                f"campaign {name!r} has no points in {session.settings.store}: a taskmodel tune "
                f"measures task pipelines, not whole calls; its table {table_path} lists the model's "
                f"choices with their predicted times, `tune --provider both --strategy taskmodel` "
                f"measures them as whole calls (a campaign report can show), and "
                f"benchmarks/taskmodel_eval.py reports the model against measurements")
        raise ColltuneError(f"campaign {name!r} not found in {session.settings.store}")
    out = render(_choosable(results, table), _split(args.baselines),
                 args.output or session.output_path(f"{name}.html"), title=name,
                 extra=_tuner_sections(table) + online)
    print(out)
    return 0


def _choosable(results, table):
    """A --provider both campaign whose library configures one algorithm per run (SMPI):
    without the library's own algorithms, which it measured but its table cannot choose
    (the report's "best" had been 1.305x over `ompi` where the table's choices give 1.122x)."""
    from .providers.base import ALGORITHM
    arms = (table.provenance.get("arms") or {}) if table is not None else {}
    if arms.get("provider") != "both" or arms.get("library_algorithms_deployable", True):
        return results
    p = results.points
    keep = ~((p["provider"] == arms.get("library")) & (p["algorithm_kind"] == ALGORITHM)) \
        if "provider" in p else None
    return results if keep is None else Results(p[keep].copy(), results.runs.copy())


def _tuner_sections(table) -> tuple[str, ...]:
    """Sections a tuner left in its decision table's provenance (active learning's
    variance and learning curves); none without a table."""
    if table is None:
        return ()
    history = (table.provenance.get("active") or {}).get("history")
    if not history:
        return ()
    from .report.active import active_section
    return (active_section(history),)


def cmd_results(args, cli) -> int:
    session = Session(cli, args.config)
    with session.existing_store() as store:
        if args.results_command == "list":
            for c in store.campaigns():
                print(c)
            return 0
        if args.campaign and args.campaign not in store.campaigns():
            raise ColltuneError(f"campaign {args.campaign!r} not found in {session.settings.store} "
                                f"(`colltune results list` lists them)")
        results = Results.from_store(store, args.campaign)
    out = sys.stdout if args.output == "-" else open(args.output, "w", newline="")
    try:
        if args.format == "csv":
            results.to_csv(out)
        else:
            results.to_jsonl(out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


# The embedded default job: <= 5 minutes on 2 cores from scratch (README, "What
# `make demo` does"). Part 1 tunes SMPI's algorithms against its selectors; part 2
# tunes colltune's algorithms + the `ompi` selector (`--provider both`, reusing part
# 1's points), deploys the table and runs an unmodified program under it and under
# the library default.
DEMO = {"collectives": ["bcast", "allreduce"], "layouts": [(2, 4), (4, 4), (8, 4)],
        "sizes": "8..1M,1000,100000", "campaign": "demo", "both": "demo-both",
        "deployment": "demo-deploy", "app_layout": (8, 4), "app_iterations": 20}


def cmd_demo(args, cli) -> int:
    from .report import render
    session = Session(cli, args.config)
    layouts = ", ".join(f"{n}x{p}" for n, p in DEMO["layouts"])
    print(f"colltune demo on the '{session.settings.platform}' simulated cluster (SimGrid SMPI), "
          f"{', '.join(DEMO['collectives'])}, layouts {layouts}, sizes {DEMO['sizes']} bytes per rank")
    print("\n[1/4] SMPI's own algorithms vs its default selectors (exhaustive)", flush=True)
    sizes = parse_list(DEMO["sizes"])
    table, results, summary, baselines = run_tuning(
        session, args, DEMO["collectives"], DEMO["layouts"], sizes, DEMO["campaign"])
    path = table.save(session.output_path(f"{DEMO['campaign']}.table.json"))
    report = render(results, baselines, session.output_path(f"{DEMO['campaign']}.html"),
                    title="colltune demo")
    _print_outcome(DEMO["campaign"], summary, results, baselines, path, report)

    print("\n[2/4] best of both: colltune's algorithms + the library default "
          "(tune --provider both; SMPI's points above are reused)", flush=True)
    both = Session({**cli, "provider": "both", "default_selector": "ompi"}, args.config)
    btable, bresults, bsummary, _ = run_tuning(
        both, args, DEMO["collectives"], DEMO["layouts"], sizes, DEMO["both"])
    bpath = btable.save(both.output_path(f"{DEMO['both']}.table.json"))
    print(f"\ncampaign {DEMO['both']}: {bsummary.launches} launches in {bsummary.wall_s:.0f} s, "
          f"{bsummary.skipped_points} points reused from the store")
    print(f"decision table: {bpath}   ({_arm_counts(btable)})")
    line = table_vs_default(btable, bresults)
    if line:
        print(line.lstrip("\n"))

    print(f"\n[3/4] colltune deploy --table {bpath} --library smpi "
          f"-o {both.output_path(DEMO['deployment'])}", flush=True)
    from .deploy import ENV_FILE, deploy
    dep_dir = both.output_path(DEMO["deployment"])
    m = deploy(bpath, "smpi", dep_dir, both.settings.cache_dir)
    n = m["table"]["rules"]
    print(f"deployment: {n['colltune']} colltune rule(s), {n['default']} library-default "
          f"rule(s); environment: {dep_dir}/{ENV_FILE}: "
          + "".join(f"COLLTUNE_SMPIRUN_ARGS (the platform's SMPI settings, {a})" for a in
                    m["launch"].get("COLLTUNE_SMPIRUN_ARGS", "").split()
                    if a.startswith("--cfg=smpi/coll-selector:")))

    return _demo_app(cli, args.config, btable, dep_dir)


def _arm_counts(table) -> str:
    """'N rules: colltune's algorithms x, the library default y' of a both table."""
    from .deploy import counts
    c = counts(table)
    arms = table.provenance.get("arms") or {}
    return (f"{sum(c.values())} rules: {c['colltune']} colltune's algorithms, {c['default']} "
            f"the library default ({arms.get('library')} {arms.get('library_default')})")


def _demo_app(cli, config_file, table, dep_dir) -> int:
    """[4/4]: the unmodified program under the library default and under the deployment."""
    import os
    import subprocess
    import tempfile
    from importlib import resources
    selector = (table.provenance.get("arms") or {}).get("library_default") or "ompi"
    app = str(resources.files("colltune") / "apps" / "collmix.c")
    shown = os.path.relpath(app) if not os.path.relpath(app).startswith("..") else app
    nodes, ppn = DEMO["app_layout"]
    iters = str(DEMO["app_iterations"])
    glob = ["--config", config_file] if config_file else []
    for k, v in cli.items():
        if v is not None and k not in ("provider", "default_selector", "backend"):
            glob += [f"--{k.replace('_', '-')}", str(v)]
    print(f"\n[4/4] an unmodified MPI program ({shown}: bcast + allreduce of 6 sizes in a "
          f"loop, results checked) on {nodes}x{ppn}, twice", flush=True)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="colltune-demo-") as tmp:
        report = os.path.join(tmp, "report.jsonl")
        for key, extra in (("default", ["--default-selector", selector]),
                           ("deployed", ["--deployment", dep_dir, "--report", report])):
            shown_cmd = " ".join(["colltune run", *extra[:2], f"--layout {nodes}x{ppn}", "--",
                                  shown, iters])
            print(f"$ {shown_cmd}", flush=True)
            cmd = [sys.executable, "-m", "colltune.cli", "run", "--quiet", "--backend", "sim",
                   *glob, *extra, "--layout", f"{nodes}x{ppn}", "--", app, iters]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stdout.write(proc.stdout)
                sys.stderr.write(proc.stderr)
                raise ColltuneError(f"the demo program failed ({shown_cmd}: exit "
                                    f"{proc.returncode})")
            warned = [ln for ln in proc.stderr.splitlines() if ln.startswith("colltune: warning")]
            if warned:      # e.g. the rules refused: every call went to the library
                raise ColltuneError(f"{shown_cmd}: the interposer warned, the deployment did "
                                    f"not run as deployed:\n" + "\n".join(warned))
            runs[key] = _parse_collmix(proc.stdout, shown_cmd)
        ran = {}
        if os.path.exists(report):
            with open(report) as fh:
                for ln in fh:
                    r = json.loads(ln)
                    ran[(r["collective"], int(r["bytes"]))] = r.get("ran") or r.get("requested")
    d, t = runs["default"], runs["deployed"]
    print(f"\ncollective time of the program (max over ranks, SimGrid time: deterministic):")
    print(f"{'call':<27} {'library default':>16} {'deployed':>12} {'ratio':>7}  deployed runs")
    print(f"{'':<27} {'(' + selector + ' selector)':>16} {'':>12} {'def/dep':>7}")
    for (coll, nbytes), (calls, td) in d["calls"].items():
        tt = t["calls"][(coll, nbytes)][1]
        rule = table.entry(coll, nodes, ppn).rule_for(nbytes)
        what = ran.get((coll, nbytes))
        what = (f"colltune {what}" if what and what != "library" else
                f"library ({selector})" if what == "library" else
                f"not reported (table: {rule.provider} {rule.algorithm})")
        print(f"{coll + ' ' + _bytes(nbytes) + f' x {calls}':<27} {td * 1e6:>13.1f} us "
              f"{tt * 1e6:>9.1f} us {td / tt if tt else float('nan'):>6.2f}x  {what}")
    print(f"{'total in collectives':<27} {d['total'] * 1e6:>13.1f} us {t['total'] * 1e6:>9.1f} us "
          f"{d['total'] / t['total'] if t['total'] else float('nan'):>6.2f}x")
    print(f"results checked: {d['checks']} + {t['checks']} checks, "
          f"{d['failures'] + t['failures']} failures")
    return 0


def _bytes(n: int) -> str:
    return f"{n // 1048576} MiB" if n >= 1048576 and n % 1048576 == 0 else f"{n} B"


def _parse_collmix(out: str, what: str) -> dict:
    import re
    calls = {}
    for m in re.finditer(r"^collmix: (\w+)\s+(\d+) B x\s+(\d+) calls\s+([0-9.e+-]+) s$", out, re.M):
        calls[(m[1], int(m[2]))] = (int(m[3]), float(m[4]))
    tot = re.search(r"^collmix: total ([0-9.e+-]+) s in collectives, (\d+) checks, (\d+) failures",
                    out, re.M)
    if not calls or not tot:
        raise ColltuneError(f"{what}: no collmix report in its output:\n{out[-2000:]}")
    return {"calls": calls, "total": float(tot[1]), "checks": int(tot[2]),
            "failures": int(tot[3])}
