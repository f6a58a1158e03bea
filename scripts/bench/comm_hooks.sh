#!/usr/bin/env bash
# DDP comm hooks side by side in one run: fp32 AllReduce (no hook), fp16 and PowerSGD (rank 1,
# compressing from the first measured step) on one workload, 2 ranks on CPU, in ROUNDS
# rounds with the order rotated each round; per hook the median over rounds of each run's
# median step time, and its bytes per step.
#
#   scripts/bench/comm_hooks.sh BUILD_DIR [WORKLOAD]   (default: embed)
#   env: STEPS (default 30), WARMUP (default 10), ROUNDS (default 5), RANK (PowerSGD rank, 1),
#        STRICT=1 exits 3 when PowerSGD is not faster than fp32
#
# Prints ratio = PowerSGD / fp32 step time (target < 1: the issue's "beats the fp32 AllReduce").
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: scripts/bench/comm_hooks.sh BUILD_DIR [WORKLOAD]" >&2
  exit 2
fi
bin="$1/bench/ddpbench"
[[ -x "$bin" ]] || { echo "comm_hooks.sh: no $bin (build first)" >&2; exit 2; }
workload=${2:-embed}
steps=${STEPS:-30}
warmup=${WARMUP:-10}
rounds=${ROUNDS:-5}
rank=${RANK:-1}
hooks=(none fp16 powersgd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((round = 0; round < rounds; ++round)); do
  for ((i = 0; i < ${#hooks[@]}; ++i)); do
    h=${hooks[$(((i + round) % ${#hooks[@]}))]}
    extra=()
    [[ $h == powersgd ]] && extra=(--powersgd-rank "$rank" --powersgd-start-iter "$((warmup < 2 ? 2 : warmup))")
    "$bin" run --mode ddp --world-size 2 --workload "$workload" --comm-hook "$h" "${extra[@]}" \
      --warmup "$warmup" --steps "$steps" --quiet --out "$out/$h-$round.json" > "$out/$h-$round.log" 2>&1 ||
      { echo "comm_hooks.sh: $h failed:" >&2; tail -n 3 "$out/$h-$round.log" >&2; exit 1; }
  done
done
/usr/bin/python3 "$(dirname "$0")/../pylib/sweep_tables.py" hooks "$out" "$workload" "$rounds" "$rank" \
  "${hooks[@]}"
