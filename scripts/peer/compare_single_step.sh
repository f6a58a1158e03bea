#!/usr/bin/env bash
# Claim: "one single-device mlp-small step (batch 64, SGD momentum 0.9) is no slower than
# PyTorch 1.13 on one thread".
#
#   scripts/peer/compare_single_step.sh [DDPBENCH_BIN] [PAIRS]
#     DDPBENCH_BIN  default build/bench/ddpbench (this script builds nothing)
#     PAIRS         default 5
#   env: PYTHON (default /usr/bin/python3, Debian's PyTorch), MAX_RATIO (default 1.0)
#
# Runs ddpbench and scripts/peer/torch_single_step.py alternately, PAIRS times each, so that
# slow drift of the machine (thermal, neighbours) hits both sides alike. Each run reports the
# median step time of 50 steps after 5 warm-up steps; the table shows every run and the
# median of those medians, and ratio = ddpbench / pytorch (below 1 means ddpbench is faster).
# Both sides use one thread: ddpbench's CPU device sets OpenBLAS to one thread, and the
# PyTorch script sets torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1 (Debian's PyTorch
# calls OpenBLAS through libblas.so.3).
# Exit status: 0 when ratio <= MAX_RATIO, 1 when it is above, 2 when a run failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-build/bench/ddpbench}"
pairs="${2:-5}"
python="${PYTHON:-/usr/bin/python3}"
max_ratio="${MAX_RATIO:-1.0}"
steps=50
warmup=5
batch=64

if [[ ! -x "$bin" ]]; then
  echo "compare_single_step: no ddpbench binary at '$bin' (build it first, or pass its path)" >&2
  exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

median_of() {  # a JSON file -> summary.step_time_ms.median
  "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["step_time_ms"]["median"])' "$1"
}

ours=()
theirs=()
for ((i = 1; i <= pairs; ++i)); do
  if ! "$bin" run --mode single --workload mlp-small --global-batch "$batch" --steps "$steps" \
      --warmup "$warmup" --optimizer sgd --lr 0.01 --momentum 0.9 --quiet \
      --out "$tmp/ddpbench.$i.json" >"$tmp/ddpbench.$i.log" 2>&1; then
    echo "compare_single_step: ddpbench run $i failed:" >&2
    cat "$tmp/ddpbench.$i.log" >&2
    exit 2
  fi
  if ! "$python" "$here/torch_single_step.py" --batch "$batch" --steps "$steps" --warmup "$warmup" \
      --lr 0.01 --momentum 0.9 >"$tmp/torch.$i.json" 2>"$tmp/torch.$i.log"; then
    echo "compare_single_step: PyTorch run $i failed:" >&2
    cat "$tmp/torch.$i.log" >&2
    exit 2
  fi
  ours+=("$(median_of "$tmp/ddpbench.$i.json")")
  theirs+=("$(median_of "$tmp/torch.$i.json")")
done

# One renderer for the table and the verdict, so the two cannot disagree.
"$python" - "$max_ratio" "${#ours[@]}" "${ours[@]}" "${theirs[@]}" <<'EOF'
import statistics
import sys

max_ratio, n = float(sys.argv[1]), int(sys.argv[2])
ours = [float(v) for v in sys.argv[3 : 3 + n]]
theirs = [float(v) for v in sys.argv[3 + n : 3 + 2 * n]]
print("mlp-small, batch 64, SGD momentum 0.9, one thread: median step time (ms) per run")
print(f"{'run':>5} {'ddpbench':>10} {'pytorch':>10} {'ratio':>7}")
for i, (a, b) in enumerate(zip(ours, theirs), 1):
    print(f"{i:>5} {a:>10.3f} {b:>10.3f} {a / b:>7.3f}")
mo, mt = statistics.median(ours), statistics.median(theirs)
ratio = mo / mt
print(f"{'median':>5} {mo:>10.3f} {mt:>10.3f} {ratio:>7.3f}")
ok = ratio <= max_ratio
print(f"ratio ddpbench/pytorch = {ratio:.3f} (claim holds when <= {max_ratio:g}): "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
