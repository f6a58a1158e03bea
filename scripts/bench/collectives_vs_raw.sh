#!/usr/bin/env bash
# `ddpbench collectives` against the bare library (issue 28, §3): MPI_Allreduce and Gloo's
# ring allreduce called by a program of a few lines (bench/micro/raw_allreduce.cpp, started by
# mpirun), against ddpbench's --backend mpi and --backend gloo at the same sizes, timed the
# same way (Note [Collectives measurement]), in alternated pairs (each side first in every
# other pair). Target: >= 0.95 of the library's busbw at every size >= 64 KiB.
#   scripts/bench/collectives_vs_raw.sh BUILD_DIR
#   env: PAIRS (default 3), RANKS (default 2), MIN (default 65536), MAX (default 67108864),
#        ITERS (default 20), WARMUP (default 5), LIBS (default "mpi gloo"), STRICT=1 exits 3
#        when a target is missed (judged on the first MPI thread level), MPI_THREAD_LEVEL
#        (default "serialized single": the bare loop at the level ddpbench's MPI backend needs,
#        and at the library's floor, see raw_allreduce.cpp; each timed in every pair)
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
  # The bare loop's variants: gloo has one; mpi one per thread level, the first judged.
  variants=(gloo)
  [[ "$lib" == mpi ]] && read -r -a variants <<< "${MPI_THREAD_LEVEL:-serialized single}"
  for i in $(seq 1 "${PAIRS:-3}"); do
    ours() {
      "$bin" collectives --backend "$lib" -g "$ranks" -b "$min" -e "$max" -n "$iters" \
        -w "$warmup" -J "$tmp/$lib-ours$i.json" > "$tmp/$lib-ours$i.log"
    }
    bare() {
      for v in "${variants[@]}"; do
        last="$v"
        [[ "$lib" == gloo ]] && { last="$tmp/store$i-$lib"; mkdir -p "$last"; }
        mpirun -np "$ranks" --oversubscribe "$raw" "$lib" "$min" "$max" "$iters" "$warmup" \
          "$last" > "$tmp/$lib-raw$i-$v.txt"
      done
    }
    # Each program goes first in every other pair, so that neither always runs right after
    # the other's teardown.
    if (( i % 2 )); then ours; bare; else bare; ours; fi
  done
  judged=1
  for v in "${variants[@]}"; do
    files=()
    for i in $(seq 1 "${PAIRS:-3}"); do files+=("$tmp/$lib-ours$i.json" "$tmp/$lib-raw$i-$v.txt"); done
    label="$lib"
    [[ "$lib" == mpi ]] && label="mpi (bare loop at MPI_THREAD_${v^^})"
    rc=0
    STRICT="${STRICT:-0}" python3 "$here/../pylib/collectives_vs_raw.py" "$label" "${files[@]}" ||
      rc=$?
    [[ $judged == 1 && $rc != 0 ]] && status=$rc
    judged=0
  done
done
exit "$status"
