#!/bin/bash
# Issue 3 end to end on real libraries: an exhaustive campaign of bcast and
# allreduce on 2 emulated hosts x 2 ranks (netns backend), for Open MPI and
# MPICH; each decision table exported in the library's dialect and checked by
# `colltune verify` on the real library. Needs root (network namespaces).
# Timings of 4 busy-polling ranks on a 2-core machine are noise: what this
# shows is that the pipeline works and the files are accepted and honoured.
#   usage: benchmarks/emulated_deploy.sh [WORKDIR]   (~20 min on 2 idle cores)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
C="$ROOT/.venv/bin/colltune"
W=${1:-$ROOT/benchmarks/results/emulated_deploy}; mkdir -p "$W"; cd "$W"
NAME=ctdeploy
"$C" cluster up --hosts 2 --name $NAME --subnet 10.213.91.0/24
trap '"$C" cluster down --name '$NAME' >/dev/null 2>&1 || true' EXIT
status=0
for lib in openmpi mpich; do
  case $lib in openmpi) fmt=openmpi-tuned; out=$lib.rules ;; mpich) fmt=mpich-json; out=$lib.json ;; esac
  "$C" tune --strategy exhaustive --backend netns --platform $NAME --mpi $lib \
      --collectives bcast,allreduce --layouts 2x2 --sizes 8,4096,65536 \
      --store deploy.sqlite --campaign $lib-2x2 --output-dir . -q
  "$C" export --table $lib-2x2.table.json --format $fmt -o $out
  "$C" verify --rules $out --library $lib --table $lib-2x2.table.json || status=1
done
exit $status
