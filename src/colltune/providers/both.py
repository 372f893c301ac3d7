"""Best of both: the MPI library's algorithms, its default decision, and
colltune's own algorithms as one candidate set (`--provider both`).

The composite measures everything its two parts offer, but a decision table may
only choose an *arm* the job can really run:

- colltune's algorithms (with their parameters): the interposer runs them;
- the library's own algorithms, where a rules file can give each message size
  its own algorithm (``per_size_rules`` of the library provider: Open MPI,
  MPICH). SMPI configures one algorithm per collective for a whole run, so on
  the sim backend they are measured and reported, never chosen;
- the library's default decision: the selector the job runs with (setting
  ``default_selector``; default: the library provider's first baseline, ``ompi``
  on SMPI, ``default`` on a real library). The interposer hands those calls to
  the library (rule ``library``).

Records keep their own provider (``smpi``/``openmpi``/``mpich`` or ``colltune``),
so store keys are those of single-provider campaigns and points are reused.
"""
from __future__ import annotations

from ..errors import ConfigError
from . import PROVIDERS
from .base import Algorithm, LaunchMods, Provider
from .colltune import ColltuneProvider


@PROVIDERS.register("both")
class BothProvider(Provider):
    name = "both"
    description = ("the library's algorithms and default decision plus colltune's own "
                   "algorithms, one candidate set (docs/deploy.md)")
    backends = ColltuneProvider.backends
    on_library = True

    def __init__(self, backend, library: Provider):
        self.library = library
        self.colltune = ColltuneProvider(backend, library)
        self.parts = (library, self.colltune)
        self.default_baselines = library.default_baselines
        self.default_name = (backend.settings.values.get("default_selector")
                             or (library.default_baselines or ("default",))[0])

    @property
    def colltune_part(self) -> Provider:
        return self.colltune

    def collectives(self) -> list[str]:
        out: list[str] = []
        for part in self.parts:
            out += [c for c in part.collectives() if c not in out]
        return out

    def algorithms(self, collective: str) -> list[Algorithm]:
        return [a for part in self.parts if collective in part.collectives()
                for a in part.algorithms(collective)]

    def selectors(self, collective: str) -> list[Algorithm]:
        return self.library.selectors(collective)

    def default_arm(self, collective: str) -> Algorithm:
        """The library's default decision the deployment runs with."""
        for s in self.library.selectors(collective):
            if s.name == self.default_name:
                return s
        known = ", ".join(s.name for s in self.library.selectors(collective)) or "none"
        raise ConfigError(f"default_selector {self.default_name!r} is not a {self.library.name} "
                          f"{collective} selector (known: {known})")

    def arms(self, collective: str) -> list[Algorithm]:
        lib = self.library.algorithms(collective) if self.library.per_size_rules else []
        return [self.default_arm(collective), *lib, *self.colltune.algorithms(collective)]

    def arm_label(self, algorithm: Algorithm) -> str:
        return f"{algorithm.provider}:{algorithm.label}"

    def parameters(self, collective: str, name: str) -> dict:
        return self.colltune.parameters(collective, name)

    def lookup(self, collective: str, name: str) -> Algorithm:
        """``PROVIDER:NAME`` picks a part; a bare name is the library's if it has
        one, else colltune's."""
        prefix, sep, rest = name.partition(":")
        for part in self.parts:
            if sep and prefix == part.name:
                return part.lookup(collective, rest)
        errors = []
        for part in self.parts:
            try:
                return part.lookup(collective, name)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError("; ".join(errors))

    def reuse_labels(self, algorithm: Algorithm) -> dict[str, str | None]:
        return self.colltune.reuse_labels(algorithm)

    def key_fields(self, algorithm: Algorithm) -> dict[str, str]:
        """colltune's algorithms run under the library default (force): a point measured
        under another one, or under none (--provider colltune), is another measurement,
        kept beside it (a review: `--default-selector mpich` had reused the `ompi` times)."""
        return {"library_default": self.default_name} if algorithm.provider == self.colltune.name else {}

    def force(self, algorithm: Algorithm) -> LaunchMods:
        """colltune's algorithms run under the library's default decision the deployment
        runs with (SMPI: its selector for the whole run), so what an algorithm hands back
        to the library, and the library's collectives inside it, are timed as deployed."""
        mods = self.colltune.force(algorithm)     # hands library algorithms to the library
        if algorithm.provider == self.colltune.name:
            under = self.library.decision_mods(self.default_name).launcher_args
            mods.launcher_args[:0] = under
            if under and hasattr(mods, "labels"):
                mods.labels["library_default"] = " ".join(under)
        return mods

    def deployment(self) -> dict:
        lib = self.library
        return {
            "provider": self.name, "library": lib.name, "colltune": self.colltune.name,
            "library_default": self.default_name,
            "library_algorithms_deployable": lib.per_size_rules,
            "note": (f"arms: colltune's algorithms, {lib.name}'s default decision "
                     f"({self.default_name!r})" + (
                         f" and {lib.name}'s algorithms (a rules file selects them per size)"
                         if lib.per_size_rules else
                         f"; {lib.name}'s own algorithms were measured but not chosen: "
                         f"{lib.name} configures one algorithm per collective for a whole run, "
                         f"so its deployable arm is the selector {self.default_name!r}")),
        }

