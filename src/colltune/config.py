"""Settings with one precedence rule: CLI > environment > config file > defaults.

Every default lives in DEFAULTS; nothing else in the code invents one. The file
is TOML (``colltune.toml`` in the working directory, or the path in
``COLLTUNE_CONFIG``); environment variables are ``COLLTUNE_<KEY>`` in upper case.
The merged result is validated against schemas/config.schema.json, then the
constraints between settings (CROSS_CHECKS: min_reps <= max_reps).
"""
from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

import jsonschema

from .errors import ConfigError

DEFAULTS: dict[str, Any] = {
    # user output: results/ is git-ignored and holds nothing tracked (benchmark evidence
    # lives in benchmarks/results/); the store sits inside the output folder
    "store": "results/colltune.sqlite",
    "output_dir": "results",
    "backend": "sim",
    "platform": "small",
    "mpi": "openmpi",
    "jobs": 2,
    "timeout": 300.0,
    "warmup": 1,
    "min_reps": 5,
    "max_reps": 200,
    "rse": 0.02,
    # real MPI with more ranks than cores: descheduled ranks start late by up
    # to a scheduler time slice (ms); a tighter tolerance discards every rep
    "oversubscribed_late_tolerance_us": 20000.0,
    # a repetition whose start is later than this is discarded; 0 = the clock's own
    # (1 us on real MPI): a larger value for hosts shared with other jobs
    "late_tolerance_us": 0.0,
    "check": "first",
    # operator of the reducing collectives: "sum" (MPI_SUM) or "charged-sum", a
    # user-defined sum charging its arithmetic on SMPI whoever calls it (the library's
    # algorithms as colltune's; SMPI charges MPI_SUM for neither, colltune charges its own)
    "reduction_op": "sum",
    "check_memory_mb": 2048.0,
    "cache_dir": ".colltune-cache",
    # algorithm provider on top of the backend's MPI library; "" = the library's own
    # (e.g. "colltune": colltune's algorithms through the interposer, docs/interposer.md)
    "provider": "",
    # the library's default decision a deployment runs with, one arm of `--provider both`
    # (docs/deploy.md); "" = the library provider's first baseline (ompi on SMPI, default)
    "default_selector": "",
    # algorithms are also measured with their tuning presets: colltune's catalogue's
    # (`tune` in each descriptor, e.g. ring[segsize=8192]) and Open MPI's segmented ones
    # at the segment sizes of its classic fixed decision (providers/openmpi.py PRESETS);
    # False: defaults only
    "tune_presets": True,
    # active learning (tuners/active.py, docs/active.md: the defaults are justified there)
    "active_threshold": 0.05,       # stop when the summed variance changes by less (relative)
    "active_patience": 2,           # ... for this many consecutive iterations
    "active_min_points": 16,        # points measured before convergence may be declared
    "active_budget_s": 1800.0,      # wall-clock budget of a tuning session (seconds)
    "active_max_points": 0,         # points per collective at most (0 = no limit)
    "active_batch": 4,              # points selected per iteration (collected in parallel)
    "active_initial_points": 4,     # points measured before the first model
    "active_nonpow2_every": 5,      # every n-th point uses a random non-power-of-two size
    "active_trees": 64,             # trees per random forest
    "active_seed": 1,               # forest and random-size seed (reproducible runs)
    "active_rules": "bisect",       # rule breaks: "bisect" (where the model's choice changes) or
                                    # "midpoint" (ACCLAiM: one query between powers of two)
    "active_model": "forest",       # regressor: "forest" (random forest, ACCLAiM) or "extratrees"
    "active_features": "ranks",     # point features: "acclaim" (nodes, ppn, log2 size) or "ranks"
                                    # (+ log2 rank count, rank count a power of two)
    "active_per_algorithm": False,  # one regressor per algorithm (else the algorithm is a feature)
    "active_uncertainty": "decision",  # a point's uncertainty: its most uncertain "algorithm"
                                    # (ACCLAiM) or the "decision" (best vs runner-up gap)
    "active_stop": "stable",        # convergence: summed "variance" settles, or the table is "stable"
    "active_stable": 0.002,         # stable: predicted slowdown of the previous table's choices below
    "active_exclude_wrong": True,   # never pick an algorithm that returned wrong data at any
                                    # measured point of the collective (a broken implementation)
    # Slurm backend and batch scripts (docs/slurm.md); "" = the cluster's default.
    "slurm_partition": "",
    "slurm_account": "",
    "slurm_time": "",               # time limit of generated batch jobs (sbatch --time)
    "slurm_mpi": "auto",            # srun --mpi plugin; auto: pmix (Open MPI), pmi2 (MPICH)
    "slurm_srun_args": "",          # extra srun options for every step (shell words)
    "slurm_sbatch_args": "",        # extra #SBATCH options of generated scripts (shell words)
}

ENV_PREFIX = "COLLTUNE_"
CONFIG_FILE_ENV = "COLLTUNE_CONFIG"
DEFAULT_CONFIG_FILE = "colltune.toml"
# settings that name files or folders: relative paths in a config file are the file's
# (platform: when it is an XML path, not a bundled platform's name)
PATH_SETTINGS = ("store", "output_dir", "cache_dir", "platform")


def _schema() -> dict:
    text = resources.files("colltune").joinpath("schemas/config.schema.json").read_text()
    return json.loads(text)


@dataclass(frozen=True)
class Settings:
    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise AttributeError(key) from None

    def source_of(self, key: str) -> str:
        return self.sources.get(key, "default")


def _coerce(key: str, raw: str, where: str) -> Any:
    """Environment values are strings: convert by the type of the default."""
    kind = type(DEFAULTS[key])
    if kind is bool:
        v = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}.get(
            raw.strip().lower())
        if v is None:
            raise ConfigError(f"{where}: {key} must be yes or no (true/false, 1/0), got {raw!r}")
        return v
    try:
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
    except ValueError:
        raise ConfigError(f"{where}: {key} must be a {kind.__name__}, got {raw!r}") from None
    return raw


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    section = data.get("colltune", data)
    unknown = sorted(set(section) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(DEFAULTS))}")
    return dict(section)


def load(cli: Mapping[str, Any] | None = None,
         environ: Mapping[str, str] | None = None,
         config_file: str | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    values = dict(DEFAULTS)
    sources = {k: "default" for k in DEFAULTS}

    path = config_file or environ.get(CONFIG_FILE_ENV)
    if path is None and os.path.exists(DEFAULT_CONFIG_FILE):
        path = DEFAULT_CONFIG_FILE
    if path is not None:
        if not os.path.exists(path):
            raise ConfigError(f"config file {path} does not exist")
        for k, v in _read_file(path).items():
            if k in PATH_SETTINGS and isinstance(v, str) and v and not os.path.isabs(v) \
                    and (k != "platform" or v.endswith(".xml")):
                # relative to the file, not to wherever colltune runs (a site's file
                # named by COLLTUNE_CONFIG)
                v = os.path.join(os.path.dirname(os.path.abspath(path)), v)
            values[k], sources[k] = v, f"file {path}"

    for key in DEFAULTS:
        env_key = ENV_PREFIX + key.upper()
        if env_key in environ:
            values[key] = _coerce(key, environ[env_key], f"environment {env_key}")
            sources[key] = f"environment {env_key}"

    for key, v in (cli or {}).items():
        if v is not None and key in DEFAULTS:
            values[key], sources[key] = v, "command line"

    for key in ("timeout", "rse", "check_memory_mb", "oversubscribed_late_tolerance_us", "late_tolerance_us",
                "active_threshold", "active_budget_s"):
        if isinstance(values[key], int):
            values[key] = float(values[key])
    try:
        jsonschema.validate(values, _schema())
    except jsonschema.ValidationError as exc:
        key = exc.path[0] if exc.path else "?"
        raise ConfigError(f"setting {key} from {sources.get(key, '?')}: {exc.message}") from None
    for low, high in CROSS_CHECKS:
        if values[low] > values[high]:
            raise ConfigError(f"setting {low} from {sources[low]}: {values[low]} is above setting "
                              f"{high} {values[high]} from {sources[high]} ({low} must be <= {high})")
    return Settings(values, sources)


# (low, high): settings whose values must satisfy low <= high (the schema checks one
# value at a time)
CROSS_CHECKS = (("min_reps", "max_reps"),)
