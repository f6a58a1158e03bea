#!/usr/bin/env bash
# Claim: "one single-device mlp-small step (batch 64, SGD momentum 0.9) is no slower than
# PyTorch 1.13 on one thread".
#
#   scripts/peer/compare_single_step.sh [DDPBENCH_BIN] [PAIRS]
#     DDPBENCH_BIN  default build/ci/bench/ddpbench (this script builds nothing)
#     PAIRS         default 5
#   env: PYTHON (default /usr/bin/python3, Debian's PyTorch), MAX_RATIO (default 1.0)
#
# Runs ddpbench and scripts/peer/torch_single_step.py alternately, PAIRS times each, so that
# slow drift of the machine (thermal, neighbours) hits both sides alike. Each run reports
# medians over 50 steps after 5 warm-up steps; the table shows every run and the median of
# those medians, and ratio = ddpbench / pytorch (below 1 means ddpbench is faster).
# Two times per side:
#   step     the whole step: summary.step_time_ms.median of each record;
#   compute  the step without taking the batch: ddpbench's forward + backward + optimizer
#            phases (median over the measured steps of the record's "steps"), PyTorch's
#            zero_grad .. optimizer.step (summary.compute_time_ms.median).
# ddpbench synthesises its samples on a prefetch thread, so its data phase measures whether
# that thread keeps up on this machine (on a busy 2-core box it does not, and the wait lands
# in "step"), while the PyTorch script gathers from a tensor already in memory. The claim is
# judged on compute, the like-for-like part; step is shown next to it.
# Both sides use one thread: ddpbench's CPU device sets OpenBLAS to one thread, and the
# PyTorch script sets torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1 (Debian's PyTorch
# calls OpenBLAS through libblas.so.3).
# Exit status: 0 when the compute ratio <= MAX_RATIO, 1 when above, 2 when a run failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-build/ci/bench/ddpbench}"
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

# A run record (either side) -> "step_median compute_median" in ms.
cat >"$tmp/medians.py" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
step = r["summary"]["step_time_ms"]["median"]
if "compute_time_ms" in r["summary"]:  # torch_single_step.py
    compute = r["summary"]["compute_time_ms"]["median"]
else:  # ddpbench: per-step phases
    compute = statistics.median(
        s["phases_ms"]["forward"] + s["phases_ms"]["backward"] + s["phases_ms"]["optimizer"]
        for s in r["steps"] if s["measured"])
print(step, compute)
PY

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
  ours+=("$("$python" "$tmp/medians.py" "$tmp/ddpbench.$i.json")")
  theirs+=("$("$python" "$tmp/medians.py" "$tmp/torch.$i.json")")
done

# One renderer for the table and the verdict, so the two cannot disagree.
"$python" - "$max_ratio" "${#ours[@]}" "${ours[@]}" "${theirs[@]}" <<'PY'
import statistics
import sys

max_ratio, n = float(sys.argv[1]), int(sys.argv[2])
ours = [tuple(map(float, v.split())) for v in sys.argv[3 : 3 + n]]
theirs = [tuple(map(float, v.split())) for v in sys.argv[3 + n : 3 + 2 * n]]
print("mlp-small, batch 64, SGD momentum 0.9, one thread: median times (ms) per run")
print(f"{'':>6} {'----------- step -----------':>28}   {'--------- compute ----------':>28}")
print(f"{'run':>6} {'ddpbench':>9} {'pytorch':>9} {'ratio':>8}   {'ddpbench':>9} {'pytorch':>9} {'ratio':>8}")


def row(label, a, b):
    print(f"{label:>6} {a[0]:>9.3f} {b[0]:>9.3f} {a[0] / b[0]:>8.3f}   "
          f"{a[1]:>9.3f} {b[1]:>9.3f} {a[1] / b[1]:>8.3f}")


for i, (a, b) in enumerate(zip(ours, theirs), 1):
    row(str(i), a, b)
mo = tuple(statistics.median(r[k] for r in ours) for k in (0, 1))
mt = tuple(statistics.median(r[k] for r in theirs) for k in (0, 1))
row("median", mo, mt)
ratio = mo[1] / mt[1]
ok = ratio <= max_ratio
print(f"compute ratio ddpbench/pytorch = {ratio:.3f} (claim holds when <= {max_ratio:g}): "
      f"{'PASS' if ok else 'FAIL'}; whole-step ratio {mo[0] / mt[0]:.3f} "
      f"(ddpbench waited {mo[0] - mo[1]:.3f} ms for data)")
sys.exit(0 if ok else 1)
PY
