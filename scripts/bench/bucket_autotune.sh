#!/usr/bin/env bash
# The bucket-cap autotuner against a fixed-cap sweep, side by side in one run: per workload,
# DDP on CPU at 2 ranks with --bucket-cap-mb 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100 and auto, every run
# with the same warm-up (the tuner's 37 steps) and measured steps, run after one another in
# ROUNDS rounds (the order of the caps rotated each round, so that drift hits every cap);
# per cap the median over rounds of each run's median step time.
#
#   scripts/bench/bucket_autotune.sh BUILD_DIR [WORKLOAD...]   (default: mlp-small gpt-tiny)
#   env: STEPS (default 40), ROUNDS (default 3), STRICT=1 exits 3 when auto misses the target
#
# Prints per workload the sweep, the tuner's choices, and ratio = auto / best fixed cap
# (target <= 1.05: the issue's "within 5% of the sweep's best").
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: scripts/bench/bucket_autotune.sh BUILD_DIR [WORKLOAD...]" >&2
  exit 2
fi
bin="$1/bench/ddpbench"
shift
[[ -x "$bin" ]] || { echo "bucket_autotune.sh: no $bin (build first)" >&2; exit 2; }
workloads=("${@:-mlp-small}")
[[ $# -eq 0 ]] && workloads=(mlp-small gpt-tiny)
steps=${STEPS:-40}
rounds=${ROUNDS:-3}
caps=(0.25 0.5 1 2.5 5 10 25 50 100 auto)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
missed=0
for w in "${workloads[@]}"; do
  for ((round = 0; round < rounds; ++round)); do
    n=${#caps[@]}
    for ((i = 0; i < n; ++i)); do
      cap=${caps[$(((i + round) % n))]}
      "$bin" run --mode ddp --world-size 2 --workload "$w" --bucket-cap-mb "$cap" --warmup 37 \
        --steps "$steps" --quiet --out "$out/$w-$cap-$round.json" > "$out/$w-$cap-$round.log" 2>&1 ||
        { echo "bucket_autotune.sh: $w at $cap failed:" >&2; tail -n 3 "$out/$w-$cap-$round.log" >&2; exit 1; }
    done
  done
  /usr/bin/python3 - "$out" "$w" "$rounds" "${caps[@]}" <<'PY' || missed=1
import json, statistics, sys
out, w, rounds, caps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(cap, r):
    with open(f"{out}/{w}-{cap}-{r}.json") as f:
        return json.load(f)
med = {c: statistics.median(load(c, r)["summary"]["step_time_ms"]["median"] for r in range(rounds))
       for c in caps}
fixed = {c: v for c, v in med.items() if c != "auto"}
best = min(fixed, key=fixed.get)
chosen = [load("auto", r)["mode"]["details"]["bucket_autotune"]["chosen_mb"] for r in range(rounds)]
print(f"{w} (DDP, 2 ranks, CPU): median step ms over {rounds} rounds")
for c in caps:
    print(f"  --bucket-cap-mb {c:>5}: {med[c]:8.2f}" + ("   <- best fixed" if c == best else ""))
ratio = med["auto"] / fixed[best]
print(f"  auto chose {', '.join(f'{c:g}' for c in chosen)} MB; ratio auto / best fixed ({best} MB) "
      f"= {ratio:.3f} (target <= 1.05): {'MET' if ratio <= 1.05 else 'MISSED'}")
sys.exit(0 if ratio <= 1.05 else 3)
PY
done
if [[ $missed -ne 0 && "${STRICT:-0}" == 1 ]]; then exit 3; fi
exit 0
