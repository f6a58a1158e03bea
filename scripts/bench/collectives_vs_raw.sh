#!/usr/bin/env bash
# `ddpbench collectives` against the bare library (issue 28, §3): MPI_Allreduce and Gloo's
# ring allreduce called by a program of a few lines (bench/micro/raw_allreduce.cpp, started by
# mpirun), against ddpbench's --backend mpi and --backend gloo at the same sizes, timed the
# same way (Note [Collectives measurement]), in alternated pairs. Target: >= 0.95 of the
# library's busbw at every size >= 64 KiB.
#   scripts/bench/collectives_vs_raw.sh BUILD_DIR
#   env: PAIRS (default 3), RANKS (default 2), MIN (default 65536), MAX (default 67108864),
#        ITERS (default 20), WARMUP (default 5), LIBS (default "mpi gloo"), STRICT=1 exits 3
#        when a target is missed
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: scripts/bench/collectives_vs_raw.sh BUILD_DIR" >&2; exit 2; }
bin="$1/bench/ddpbench"
raw="$1/bench/micro/raw_allreduce"
for b in "$bin" "$raw"; do [[ -x "$b" ]] || { echo "collectives_vs_raw: no $b" >&2; exit 2; }; done
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks=${RANKS:-2} min=${MIN:-65536} max=${MAX:-67108864} iters=${ITERS:-20} warmup=${WARMUP:-5}
status=0
for lib in ${LIBS:-mpi gloo}; do
  files=()
  for i in $(seq 1 "${PAIRS:-3}"); do
    "$bin" collectives --backend "$lib" -g "$ranks" -b "$min" -e "$max" -n "$iters" \
      -w "$warmup" -J "$tmp/$lib-ours$i.json" > "$tmp/$lib-ours$i.log"
    mkdir -p "$tmp/store$i-$lib"
    mpirun -np "$ranks" --oversubscribe "$raw" "$lib" "$min" "$max" "$iters" "$warmup" \
      "$tmp/store$i-$lib" > "$tmp/$lib-raw$i.txt"
    files+=("$tmp/$lib-ours$i.json" "$tmp/$lib-raw$i.txt")
  done
  STRICT="${STRICT:-0}" python3 "$here/../pylib/collectives_vs_raw.py" "$lib" "${files[@]}" ||
    status=$?
done
exit "$status"
