#!/usr/bin/env bash
# The benchmark command: installs what is missing, makes a Release build and runs the main
# job on the detected hardware (GPU when one is usable, CPU otherwise), then prints a
# throughput table. Results go to results/<date>/ (override with RESULTS_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"

build_dir=${BUILD_DIR:-$root/build/release}
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_CUDA="${DDPBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target ddpbench
bin="$build_dir/bench/ddpbench"

results=${RESULTS_DIR:-$root/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"

if "$bin" run --workload mlp-small --device cuda:0 --steps 1 --warmup 0 --quiet >/dev/null 2>&1; then
  device=cuda:0
  workloads=(mlp-small mlp-wide gpt-tiny gpt2-small embed)
else
  device=cpu
  workloads=(mlp-small gpt-tiny embed)
fi
echo "bench: single-device training on $device"
for w in "${workloads[@]}"; do
  "$bin" run --mode single --workload "$w" --device "$device" --steps 20 --warmup 3 --quiet \
    --out "$results/single-$w.json"
done

/usr/bin/env python3 - "$results" <<'PY'
import json, pathlib, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("single-*.json")):
    r = json.loads(f.read_text())
    s = r["summary"]
    rows.append((r["workload"]["name"], r["config"]["device"], r["config"]["global_batch"],
                 s["step_time_ms"]["median"], s["samples_per_s"], s["tokens_per_s"],
                 s["achieved_flops_per_s"] / 1e9, s["first_loss"], s["last_loss"]))
hdr = ("workload", "device", "batch", "median ms", "samples/s", "tokens/s", "GFLOP/s", "loss first", "loss last")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.1f} | {r[5]:.0f} | {r[6]:.2f} | {r[7]:.4f} | {r[8]:.4f} |")
PY
echo "bench: results in $results"
