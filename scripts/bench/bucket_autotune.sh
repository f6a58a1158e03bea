#!/usr/bin/env bash
# The bucket-cap autotuner against a fixed-cap sweep, side by side in one run, per workload
# (DDP on CPU at 2 ranks, every run with the tuner's warm-up of 39 steps and STEPS measured):
#   1. the sweep: --bucket-cap-mb 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100 in ROUNDS rounds (the
#      order rotated each round); the best fixed cap is the one with the lowest median over
#      rounds of each run's median step time;
#   2. the check: PAIRS alternated pairs of `--bucket-cap-mb auto` and that best cap, measured
#      afresh, so that the sweep's luckiest sample does not stand in for the best cap's time
#      (on 2 shared cores identical runs differ by up to 20%; the minimum of nine is biased low).
# Prints the sweep, the tuner's choices, and ratio = median auto / median best fixed over the
# pairs (target cpu.bucket_auto_vs_best in scripts/pylib/perf_targets.py: within 5% of the
# sweep's best).
#
#   scripts/bench/bucket_autotune.sh BUILD_DIR [WORKLOAD...]   (default: mlp-small gpt-tiny)
#   env: STEPS (40), ROUNDS (3), PAIRS (7), STRICT=1 exits 3 when a workload misses the target
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: scripts/bench/bucket_autotune.sh BUILD_DIR [WORKLOAD...]" >&2
  exit 2
fi
bin="$1/bench/ddpbench"
shift
[[ -x "$bin" ]] || { echo "bucket_autotune.sh: no $bin (build first)" >&2; exit 2; }
workloads=("$@")
[[ $# -eq 0 ]] && workloads=(mlp-small gpt-tiny)
steps=${STEPS:-40}
rounds=${ROUNDS:-3}
pairs=${PAIRS:-7}
caps=(0.25 0.5 1 2.5 5 10 25 50 100)
python=/usr/bin/python3
tables="$(dirname "$0")/../pylib/sweep_tables.py"  # the tables and the target
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # WORKLOAD CAP FILE-STEM
  "$bin" run --mode ddp --world-size 2 --workload "$1" --bucket-cap-mb "$2" --warmup 39 \
    --steps "$steps" --quiet --out "$out/$3.json" > "$out/$3.log" 2>&1 ||
    { echo "bucket_autotune.sh: $1 at $2 failed:" >&2; tail -n 3 "$out/$3.log" >&2; exit 1; }
}

missed=0
for w in "${workloads[@]}"; do
  n=${#caps[@]}
  for ((round = 0; round < rounds; ++round)); do
    for ((i = 0; i < n; ++i)); do
      cap=${caps[$(((i + round) % n))]}
      run "$w" "$cap" "$w-sweep-$cap-$round"
    done
  done
  best=$("$python" "$tables" best-cap "$out" "$w" "$rounds" "${caps[@]}")
  for ((p = 0; p < pairs; ++p)); do
    if ((p % 2 == 0)); then run "$w" auto "$w-auto-$p"; run "$w" "$best" "$w-best-$p"
    else run "$w" "$best" "$w-best-$p"; run "$w" auto "$w-auto-$p"; fi
  done
  "$python" "$tables" autotune "$out" "$w" "$rounds" "$pairs" "$best" "${caps[@]}" || missed=1
done
if [[ $missed -ne 0 && "${STRICT:-0}" == 1 ]]; then exit 3; fi
exit 0
