"""`colltune run --online STATE_DIR`: the environment of online mode, priors for the
job's layout before it runs, `online update` after (docs/online.md)."""
from __future__ import annotations

import os
import sys


def prepare(args, settings, runner) -> dict[str, str]:
    """COLLTUNE_ONLINE and the backend's own variables (Runner.online_env: COLLTUNE_PLATFORM
    on sim); predicted priors for the job's layout when earlier runs left samples."""
    from ..errors import ConfigError
    from ..online.statedir import update_dir
    if args.rules or args.force or args.tune_first:
        raise ConfigError("--online chooses the algorithms itself: drop --rules / --force / "
                          "--tune-first")
    state_dir = os.path.abspath(args.online)
    try:
        os.makedirs(os.path.join(state_dir, "samples"), exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--online {args.online}: cannot create it: {exc.strerror}") from None
    env = {"COLLTUNE_ONLINE": state_dir, **runner.online_env(state_dir)}
    if os.listdir(os.path.join(state_dir, "samples")):
        presets, fingerprint = _presets(settings, runner.library(), env.get("COLLTUNE_PLATFORM", ""))
        try:
            update_dir(state_dir, [runner.world_layout()], fingerprint or None, presets)
        except OSError as exc:        # a read-only state dir: the job runs on what is there
            where = f": {exc.filename}" if exc.filename else ""
            print(f"colltune run: warning: --online {args.online}: state not updated before "
                  f"the run ({exc.strerror}{where}); the job runs on the state as it "
                  f"is", file=sys.stderr)
    return env


SELECTOR_FILE = "smpi-selector"


def same_selector(state_dir: str, args, settings) -> None:
    """On SMPI the library arm is the run's selector (--default-selector, the deployment's,
    or SMPI's built-in default), which the state's fingerprint does not cover: runs under
    two selectors would mix two libraries' timings in one state. The first run writes its
    selector into the state dir; a run under another is refused."""
    from ..errors import ConfigError
    from ..runners.sim import run_selector
    mine = run_selector(args, settings) or "default"
    path = os.path.join(state_dir, SELECTOR_FILE)
    try:
        with open(path) as fh:
            theirs = fh.read().strip()
    except FileNotFoundError:
        try:
            with open(path, "w") as fh:
                fh.write(mine + "\n")
        except OSError:               # a state dir this run cannot write: nothing is
            pass                      # learnt into it either, so nothing can mix
        return
    if theirs and theirs != mine:
        raise ConfigError(f"--online {args.online}: its state was learnt under SMPI's "
                          f"{theirs!r} selector (its library arm), this run uses {mine!r}: the "
                          f"two libraries' times would mix in one state; use "
                          f"--default-selector {theirs} or another state dir")


def platform_id(platform: str) -> str:
    """The platform in the job's fingerprint: its name and the sha256 of its XML (a
    user file with a bundled platform's name, or an edited one, is another cluster)."""
    import hashlib
    from .. import platforms
    from ..errors import ConfigError
    try:
        xml = platforms.load(platform).xml_path
        with open(xml, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()[:12]
    except (platforms.PlatformError, OSError) as exc:
        raise ConfigError(f"--platform {platform}: {exc}") from None
    return f"{os.path.splitext(os.path.basename(xml))[0]}@{sha}"


def _presets(settings, library: str, platform: str) -> tuple[dict, str]:
    """The compiled preset arms and this job's fingerprint ({}, "" when the tool fails:
    the newest run's fingerprint and the state's arms then serve)."""
    from .. import mpi
    from ..errors import ColltuneError
    from .arms import preset_arms
    try:
        impl = mpi.find(library)
        return preset_arms(impl, settings.cache_dir, platform)
    except (ColltuneError, mpi.MPINotFound, OSError) as exc:
        print(f"colltune run: warning: online preset arms unknown ({exc})", file=sys.stderr)
        return {}, ""


def finish(args, settings) -> None:
    """Re-derive the state from every run and store the samples as records; a failure
    here never fails the job (the state C wrote stays)."""
    from ..errors import ColltuneError
    from ..online.statedir import update_dir
    from ..store import Store
    try:
        with Store(settings.store) as store:
            st = update_dir(os.path.abspath(args.online), store=store)
        if not args.quiet:
            print(f"colltune run: online state {args.online}: {st.run_count} runs, "
                  f"{len(st.blocks)} blocks", file=sys.stderr)
    except (ColltuneError, OSError) as exc:
        print(f"colltune run: warning: online update of {args.online} failed: {exc}",
              file=sys.stderr)
