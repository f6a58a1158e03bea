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
# DP and DDP over two devices on the same global batch as single (two logical CPU devices /
# ranks here; on one GPU, two logical replicas for DP and two Gloo ranks for DDP).
if [[ $device == cpu ]]; then
  dp_devices="cpu:0,cpu:1"; ddp_flags=(--device cpu)
else
  dp_devices="cuda:0,cuda:0"; ddp_flags=(--devices cuda:0,cuda:0 --backend gloo)
fi
echo "bench: DP and DDP over two devices, mlp-small"
"$bin" run --mode dp --devices "$dp_devices" --world-size 2 --workload mlp-small --steps 20 \
  --warmup 3 --quiet --out "$results/dp-mlp-small.json"
"$bin" run --mode ddp --world-size 2 "${ddp_flags[@]}" --workload mlp-small --steps 20 --warmup 3 \
  --quiet --out "$results/ddp-mlp-small.json" | grep -v '^\[rank'

/usr/bin/env python3 - "$results" <<'PY'
import json, pathlib, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(f.read_text())
    s = r["summary"]
    devices = r["mode"]["devices"]
    if r["config"]["mode"] == "ddp":  # rank 0's record: name the ranks (its loss is rank 0's share)
        devices = f'{r["mode"]["details"]["world_size"]} ranks ({r["mode"]["details"]["backend"]})'
    rows.append((r["workload"]["name"], r["config"]["mode"], devices, r["config"]["global_batch"],
                 s["step_time_ms"]["median"], s["samples_per_s"], s["tokens_per_s"],
                 s["achieved_flops_per_s"] / 1e9, s["first_loss"], s["last_loss"]))
hdr = ("workload", "mode", "devices", "batch", "median ms", "samples/s", "tokens/s", "GFLOP/s", "loss first", "loss last")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.1f} | {r[6]:.0f} | {r[7]:.2f} | {r[8]:.4f} | {r[9]:.4f} |")
PY
echo "bench: results in $results"
