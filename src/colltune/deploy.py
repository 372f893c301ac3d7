"""One deployment of a decision table (docs/deploy.md): `colltune deploy` writes,
into one folder, everything a job needs to run what the table says —

- the library's rules file for the points where the table names one of the
  library's own algorithms (the library's exporter, `Exporter.deploys`);
- colltune's rules file: colltune's algorithms where the table names them, the
  rule ``library`` everywhere else (the library's algorithms and its default);
- the interposer built for the library (``lib/``), and ``env.sh``: the
  environment (rules files, MCA parameters or CVARs, the interposer's path and
  the launcher / link arguments) to source; the same environment as an environment
  module (``module/colltune/<library>``, Tcl: Lmod and Environment Modules read it);
- ``deployment.json``, the versioned manifest that `colltune verify --deployment`
  reads, and a copy of the table.

A table's rules are of three kinds (``kind_of``): colltune's (provider
``colltune``), the library's default decision (the arm named in the table's
provenance ``arms.library_default``, tables of ``--provider both``), and the
library's own algorithms (any other rule). A collective may mix all three: the
library's rules file says "the library's own selection" where the table names
its default (coll/tuned: algorithm 0, its fixed decision; MPICH CSEL: a copy of
the built-in tree's branch), docs/deploy.md.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

from . import __version__
from .decision import DecisionTable, Entry, Rule
from .errors import InputError

FORMAT, VERSION = "colltune.deployment", 1
MANIFEST, ENV_FILE, TABLE_COPY, COLLTUNE_RULES = ("deployment.json", "env.sh", "table.json",
                                                  "colltune.rules")
MODULE_DIR = "module"              # `module use DIR/module && module load colltune/<library>`
COLLTUNE, DEFAULT, LIBRARY = "colltune", "default", "library"
INTERPOSER_VARS = ("COLLTUNE_RULES", "COLLTUNE_GUARD")    # what every rank must see
GUARD_MAX = 100000                                         # native/intercept/guard.c


def kind_of(table: DecisionTable, rule: Rule) -> str:
    """COLLTUNE, DEFAULT (the library's default decision) or LIBRARY."""
    from .exporters._mapping import is_library_default
    from .providers.colltune import ColltuneProvider
    if rule.provider == ColltuneProvider.name:
        return COLLTUNE
    return DEFAULT if is_library_default(table, rule) else LIBRARY


def check_colltune_names(table: DecisionTable, where: str, index: dict) -> None:
    """Every rule of colltune names one of its algorithms for that collective (index:
    catalogue_index of the interposer's catalogue); the rules file is built from the
    measured points, so a misspelt rule would otherwise go unnoticed."""
    from .exporters.colltune_rules import split_label
    for i, e in enumerate(table.entries):
        for j, r in enumerate(e.rules):
            if kind_of(table, r) == COLLTUNE and split_label(r.algorithm)[0] not in index.get(e.collective, {}):
                known = ", ".join(index.get(e.collective, {})) or "none"
                raise InputError(f"{where}: entries/{i}/rules/{j}: {r.algorithm!r} is not one of "
                                 f"colltune's {e.collective} algorithms (known: {known})")


def library_part(table: DecisionTable) -> DecisionTable | None:
    """The table restricted to the entries where the library runs one of its own
    algorithms at some size (None: nowhere), with their library rules and
    default-decision rules (the exporters write the latter as the library's own
    selection). Sizes of such an entry that colltune serves keep the
    neighbouring library rule (the interposer takes those calls: the library's
    choice there does not run). Entries without any of the library's algorithms
    are left to the library untouched."""
    entries = []
    for e in table.entries:
        kinds = [kind_of(table, r) for r in e.rules]
        if LIBRARY not in kinds:
            continue
        rules: list[Rule] = []
        first_lib = next(r for r, k in zip(e.rules, kinds) if k != COLLTUNE)
        for r, k in zip(e.rules, kinds):
            src = r if k != COLLTUNE else (rules[-1] if rules else first_lib)
            if rules and (rules[-1].algorithm, rules[-1].params) == (src.algorithm, src.params):
                continue
            rules.append(replace(src, min_size=0 if not rules else r.min_size))
        entries.append(Entry(e.collective, e.nodes, e.ppn, tuple(rules)))
    return replace(table, entries=tuple(entries)) if entries else None


def counts(table: DecisionTable) -> dict[str, int]:
    out = {COLLTUNE: 0, DEFAULT: 0, LIBRARY: 0}
    for e in table.entries:
        for r in e.rules:
            out[kind_of(table, r)] += 1
    return out


def library_exporter(library: str):
    from .exporters import EXPORTERS
    for _, cls in EXPORTERS.items():
        if cls.library == library and cls.deploys:
            return cls
    return None


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _launcher_args(impl, lib: Path, env: dict[str, str]) -> list[str]:
    """mpiexec arguments that preload the interposer into the ranks (not into
    mpiexec) and pass the interposer's variables (COLLTUNE_RULES, COLLTUNE_GUARD)
    to every host."""
    from .providers.colltune import preload_args
    args = preload_args(impl, lib)
    for k, v in env.items():        # -x VAR=VALUE (Open MPI), -genv VAR VALUE (MPICH)
        args += impl.library.to_ranks(k, v)
    return args


def colltune_rules_exporter(impl, cache_dir: str, guard: int = 0):
    """The exporter of a deployment's colltune rules file: checked against the
    interposer's catalogue for this library, every non-colltune rule -> `library`, and
    where nothing was measured a margin over the default unless the guard runs (verify
    derives the expected rules with it too)."""
    from .exporters.colltune_rules import ColltuneRulesExporter, catalogue_index
    from .providers.colltune import catalogue
    rules_exp = ColltuneRulesExporter()
    rules_exp.allow_substitute = True
    rules_exp.catalogue = catalogue_index(catalogue(impl, cache_dir))
    if guard:           # the guard keeps the promise at run time: no margin where unmeasured
        rules_exp.unmeasured_margin = None
    return rules_exp


def deploy(table_path: str, library: str, out_dir: str, cache_dir: str, target: str | None = None,
           allow_substitute: bool = False, guard: int = 0) -> dict:
    """Write the deployment folder; returns the manifest. guard > 0: the interposer
    checks each of colltune's rules against the library's collective, `guard` timed
    calls each, and keeps the faster (COLLTUNE_GUARD, docs/interposer.md); so where
    the tuner measured nothing, the rules take the arm with the smallest worst slowdown
    without the margin over the default (docs/rules.md)."""
    from . import mpi
    from .errors import BackendError
    from .mpi.impl import simulated
    from .providers.colltune import libcolltune, link_args
    if not 0 <= guard <= GUARD_MAX:
        raise InputError(f"--guard {guard}: timed calls per arm must be in [0, {GUARD_MAX}]")
    table = DecisionTable.load(table_path)
    try:
        impl = mpi.find(library)
    except mpi.MPINotFound as exc:
        raise BackendError(str(exc)) from None
    except ValueError as exc:
        raise InputError(f"--library: {exc}") from None
    if target is not None and not impl.library.simulated:
        from .exporters.openmpi_tuned import parse_version
        if parse_version(target)[:2] != parse_version(impl.version)[:2]:
            # the interposer is built against the installed library, and the library's
            # rules file is checked against it: a deployment is for the library it runs on
            raise InputError(f"--target {target}: a deployment runs the installed {library} "
                             f"{impl.version} (its interposer is built against it); deploy for "
                             f"another release series where that release is installed")
    rules_exp = colltune_rules_exporter(impl, cache_dir, guard)
    check_colltune_names(table, table_path, rules_exp.catalogue)     # before writing anything
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out_dir}: exists and is not a folder")
    earlier = _earlier_deployment(out, out_dir)
    # every file's text is made before the first is written: a table that does not
    # export leaves no half-written folder (which a retry would refuse as no deployment)
    pending: dict[Path, str] = {}
    notes: list[str] = []
    arms = (table.provenance or {}).get("arms") or {}
    if arms.get("note"):
        notes.append(f"table: {arms['note']}")
    if arms.get("library") and arms["library"] != library and not simulated(arms["library"]):
        notes.append(f"the table was tuned on {arms['library']}, deployed on {library}")
    if arms.get("library_default") and simulated(arms.get("library")) and not impl.library.simulated:
        notes.append(f"where the table says SMPI's selector {arms['library_default']!r}, "
                     f"{library}'s own default decision runs (SMPI's {arms['library_default']!r} "
                     f"imitates that library's decision logic; verify measures the real one)")
    env: dict[str, str] = {}
    files: dict[str, str | None] = {"table": TABLE_COPY, "library_rules": None,
                                   "library_format": None}
    # 1. the library's part
    lib_table = library_part(table)
    if lib_table is not None:
        cls = library_exporter(library)
        if cls is None:
            raise InputError(f"{library} cannot run the table's own-library rules per message "
                             f"size (no rules file): "
                             + ", ".join(sorted({e.collective for e in lib_table.entries})))
        exporter = cls()
        exporter.allow_substitute = allow_substitute
        exported = exporter.export(lib_table, target)
        name = f"{exporter.name}{exported.suffix}"
        pending[out / name] = exported.text
        env.update(exported.env_for(str(out / name)))
        files.update(library_rules=name, library_format=exporter.name)
        notes += list(exported.notes)
    if impl.library.simulated and arms.get("library_default"):
        notes.append(f"run smpirun with --cfg=smpi/coll-selector:{arms['library_default']} "
                     f"($COLLTUNE_SMPIRUN_ARGS): the table's library arm")
    # 2. colltune's part, checked against the interposer's catalogue for this library
    exported = rules_exp.export(table, target)
    pending[out / COLLTUNE_RULES] = exported.text
    env["COLLTUNE_RULES"] = str(out / COLLTUNE_RULES)
    if guard:
        env["COLLTUNE_GUARD"] = str(guard)
    notes += [n for n in exported.notes if "is not one of colltune's" not in n
              and not n.startswith("run under the interposer")]
    # 3. the interposer, the environment file
    built = libcolltune(impl, cache_dir)
    (out / "lib").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(table_path, out / TABLE_COPY)
    for path, text in pending.items():
        path.write_text(text)
    lib = out / "lib" / built.name
    shutil.copyfile(built, lib)
    if impl.library.simulated:
        smpirun, rates = smpi_settings(table)
        launch = {"COLLTUNE_LDFLAGS": shlex.join(link_args(lib)), **rates}
        if arms.get("library_default"):
            smpirun.append(f"--cfg=smpi/coll-selector:{arms['library_default']}")
        if smpirun:
            launch["COLLTUNE_SMPIRUN_ARGS"] = " ".join(smpirun)
        usage = ["smpicc app.c -o app $COLLTUNE_LDFLAGS",
                 "smpirun $COLLTUNE_SMPIRUN_ARGS -np N -platform P -hostfile H ./app"]
    else:
        launch = {"COLLTUNE_LIB": str(lib),
                  "COLLTUNE_MPIRUN_ARGS": " ".join(_launcher_args(
                      impl, lib, {k: v for k, v in env.items() if k in INTERPOSER_VARS})),
                  # --no-as-needed: kept wherever LDFLAGS puts it (before the objects,
                  # gcc's default --as-needed dropped it and the program ran without it)
                  "COLLTUNE_LDFLAGS": f"-Wl,--no-as-needed {lib} -Wl,--as-needed "
                                      f"-Wl,-rpath,{lib.parent}"}
        usage = ["mpirun $COLLTUNE_MPIRUN_ARGS -n N ./app      (preloads the interposer)",
                 f"or link it: {Path(impl.cc).name} app.c -o app $COLLTUNE_LDFLAGS"]
    module = f"{MODULE_DIR}/colltune/{library}"
    files.update(colltune_rules=COLLTUNE_RULES, env=ENV_FILE, module=module,
                 interposer=f"lib/{built.name}")
    write_env(out / ENV_FILE, {**env, **launch}, usage, library, impl.version)
    write_module(out / module, {**env, **launch}, usage, library, impl.version)
    manifest = {
        "format": FORMAT, "version": VERSION, "colltune_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "library": library, "library_version": impl.version, "target": target,
        "table": {"source": os.path.abspath(table_path), "sha256": _sha256(table_path),
                  "tuner": table.tuner, "arms": arms, "rules": counts(table)},
        "files": files, "env": env, "launch": launch, "notes": notes, "guard": guard,
        # the rules files as written: `run --deployment` names one edited since
        "sha256": {f: _sha256(str(out / f)) for f in (files.get("library_rules"), COLLTUNE_RULES) if f},
        "dir": str(out),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    # an earlier deployment's files this one does not have (its library rules file, where
    # the new table has no library part) would be taken for part of it
    for stale in earlier - _listed(files):
        (out / stale).unlink(missing_ok=True)
    return manifest


def _listed(files: dict) -> set[str]:
    """The file names of a manifest's "files" (library_format names a format)."""
    return {f for k, f in files.items() if k != "library_format" and isinstance(f, str)}


def _earlier_deployment(out: Path, given: str) -> set[str]:
    """The files of the deployment already in `out` (replaced by the new one), or set()
    for a new or empty folder; a folder holding something else is refused, so deploy
    never mixes its files with a user's."""
    if not out.is_dir() or not any(out.iterdir()):
        return set()
    try:
        old = json.loads((out / MANIFEST).read_text())
        listed = _listed(old.get("files") or {})
    except (OSError, ValueError, AttributeError):
        raise InputError(f"-o {given}: a folder that is not empty and holds no deployment "
                         f"({MANIFEST}): give a new or empty folder, or an earlier deployment's "
                         f"to replace it") from None
    # only names inside the folder (a manifest's entries are relative)
    return {f for f in listed if not Path(f).is_absolute() and ".." not in Path(f).parts}


def smpi_settings(table: DecisionTable) -> tuple[list[str], dict[str, str]]:
    """How the table's points were simulated, as a job launched by hand with smpirun needs
    them to run on the machine the tuner measured: the SMPI settings (per-message
    overheads, bandwidth factors) as smpirun arguments, and the rates colltune's
    algorithms were charged at (COLLTUNE_REDUCE_RATE / COLLTUNE_COPY_RATE), both from the
    table's provenance, i.e. the platform file and sidecar it was tuned with, whatever
    its name. A table from before the provenance held the charge rates gets the rates
    libcolltune defaults to; one of another backend gets nothing."""
    from . import platforms
    from .backends import trait
    prov = table.provenance or {}
    if not trait(prov.get("backend"), "simulated"):
        return [], {}
    rates = {var: str(v) for var, v in (prov.get("charge_rates") or {}).items()
             if var in platforms.CHARGE_ENV.values()}
    return platforms.cfg_args(prov.get("smpi_config") or {}), rates


def _dquote(text: str) -> str:
    """text for the inside of a double-quoted shell word."""
    for ch in '\\"$`':
        text = text.replace(ch, "\\" + ch)
    return text


def write_env(path: Path, env: dict[str, str], usage: list[str], library: str, version: str) -> None:
    """env.sh; paths into the folder go through $COLLTUNE_DEPLOYMENT, which bash sets
    to where the file is when it is sourced (the folder may have moved); other shells
    keep the folder it was written to."""
    here = str(path.parent)
    lines = [f"# colltune {__version__} deployment for {library} {version}: source this file "
             f"(or load module/colltune/{library}) before launching the job",
             *[f"#   {u}" for u in usage],
             f"COLLTUNE_DEPLOYMENT={shlex.quote(here)}",
             '# sourced from bash: the folder this file is in, wherever the deployment was moved',
             'if [ -n "${BASH_SOURCE:-}" ]; then '
             'COLLTUNE_DEPLOYMENT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P); fi',
             "export COLLTUNE_DEPLOYMENT"]
    mark = _dquote(here + os.sep)
    lines += [f'export {k}="{_dquote(v).replace(mark, "${COLLTUNE_DEPLOYMENT}/")}"'
              for k, v in env.items()]
    path.write_text("\n".join(lines) + "\n")


def _tcl_quote(text: str) -> str:
    """text for the inside of a double-quoted Tcl word (no substitution)."""
    for ch in '\\"$[]':
        text = text.replace(ch, "\\" + ch)
    return text


def write_module(path: Path, env: dict[str, str], usage: list[str], library: str,
                 version: str) -> None:
    """The environment of env.sh as a Tcl modulefile (Lmod and Environment Modules
    both read Tcl). Paths into the folder go through the folder the modulefile is in,
    so a moved deployment's module points into its new place in every shell; unloading
    it takes back what it set."""
    here = str(path.parent.parent.parent)
    mark = _tcl_quote(here + os.sep)
    lines = ["#%Module1.0",
             f"## colltune {__version__} deployment for {library} {version}:",
             f"##   module use <deployment>/{MODULE_DIR} && module load colltune/{library}",
             *[f"##   {u}" for u in usage],
             f'module-whatis "colltune deployment for {_tcl_quote(library)} {_tcl_quote(version)}"',
             "conflict colltune",
             "# the deployment folder: three levels above this file, wherever it was moved",
             "set root [file dirname [file dirname [file dirname "
             "[file normalize $ModulesCurrentModulefile]]]]",
             "setenv COLLTUNE_DEPLOYMENT $root"]
    lines += [f'setenv {k} "{_tcl_quote(v).replace(mark, "$root/")}"' for k, v in env.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# what load() needs of a manifest: key -> type (and of "files": its keys)
_REQUIRED = {"library": str, "files": dict, "env": dict, "launch": dict}
_REQUIRED_FILES = ("table", "colltune_rules")


def load(deployment_dir: str) -> tuple[dict, Path]:
    """The manifest of a deployment folder, its paths rebased on where the folder is
    now (it may have been moved or copied since `colltune deploy` wrote it), its
    files checked against the sha256 recorded for the table."""
    d = Path(deployment_dir).resolve()
    where = d / MANIFEST
    try:
        manifest = json.loads(where.read_text())
    except OSError as exc:
        raise InputError(f"{where}: cannot read the deployment manifest: "
                         f"{exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
            or manifest.get("version") != VERSION:
        got = manifest if isinstance(manifest, dict) else {}
        raise InputError(f"{where}: not a {FORMAT} version {VERSION} manifest "
                         f"(format {got.get('format')!r}, version {got.get('version')!r})")
    for key, typ in _REQUIRED.items():
        if not isinstance(manifest.get(key), typ):
            raise InputError(f"{where}: {key!r} missing or not a {typ.__name__} "
                             f"(hand-edited? deploy again)")
    for key in _REQUIRED_FILES:
        if not isinstance(manifest["files"].get(key), str):
            raise InputError(f"{where}: files.{key} missing (hand-edited? deploy again)")
    _rebase(manifest, d)
    for key in _REQUIRED_FILES:
        if not (d / manifest["files"][key]).is_file():
            raise InputError(f"{where}: its {key.replace('_', ' ')} file "
                             f"{d / manifest['files'][key]} is missing")
    sha = (manifest.get("table") or {}).get("sha256")
    if sha and _sha256(str(d / manifest["files"]["table"])) != sha:
        raise InputError(f"{d / manifest['files']['table']}: changed since it was deployed "
                         f"(sha256 differs from {where}'s); deploy the table again")
    # rules files edited by hand since (a site's own change, or a mistake): said, not
    # refused; `verify --deployment` proves what the files make the library run
    shas = manifest.get("sha256") if isinstance(manifest.get("sha256"), dict) else {}
    manifest["edited"] = sorted(f for f, s in shas.items()
                                if isinstance(f, str) and (d / f).is_file() and _sha256(str(d / f)) != s)
    return manifest, d


def check_library_file(path: Path, fmt: str | None) -> None:
    """InputError naming the file and line where the library's rules file does not
    parse: a hand-edited file the library would abort on in MPI_Init (MPICH's
    assertion names no file) is refused before `run --deployment` launches. What
    parses but the library refuses (Open MPI drops a file whose first rule is not at
    size 0) is left to `verify --deployment`, which proves it on the library."""
    from .verify.rules import load_csel, parse_han, parse_tuned
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the library's rules file: {exc.strerror}") from None
    if fmt == "mpich-json":
        load_csel(str(path))
    elif fmt == "openmpi-tuned":
        parse_tuned(text, str(path), strict=False)
    elif fmt == "openmpi-han":
        parse_han(text, str(path))


def _rebase(manifest: dict, d: Path) -> None:
    """Paths into the folder as written (manifest "dir"; older manifests: the folder
    of env's COLLTUNE_RULES) now point into d, in env and launch."""
    was = manifest.get("dir") or os.path.dirname(manifest["env"].get("COLLTUNE_RULES", "")) or None
    manifest["dir"] = str(d)
    if not was or was == str(d):
        return
    for part in ("env", "launch"):
        manifest[part] = {k: v.replace(was + os.sep, str(d) + os.sep) if isinstance(v, str) else v
                          for k, v in manifest[part].items()}
