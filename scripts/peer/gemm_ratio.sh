#!/usr/bin/env bash
# ddpbench's CPU GEMM path against raw OpenBLAS on mlp-small's training GEMMs (batch 64).
#
#   scripts/peer/gemm_ratio.sh [GEMM_BENCH_BIN] [benchmark flags...]
#     GEMM_BENCH_BIN  default build/ci/bench/micro/gemm_bench (this script builds nothing)
#     flags           passed on, e.g. --benchmark_repetitions=5 (then the median is used)
#                     or --benchmark_min_time=0.5 (libbenchmark 1.7: plain seconds)
#   env: PYTHON (default /usr/bin/python3)
#
# Per shape: GFLOP/s of ddpb::ops::gemm (bias + ReLU epilogue included where training has
# it) and of cblas_sgemm, and ratio = ddpbench / openblas GFLOP/s (1.0 = parity, below 1 =
# ddpbench slower). The overall line weights each shape by how often one training step runs
# it (calls_per_step) and compares the summed times: ratio = sum(openblas time) /
# sum(ddpbench time), again as a throughput ratio. Times are CPU times (the default of
# Google Benchmark), which a busy machine disturbs less than wall-clock times.
set -euo pipefail

bin="${1:-build/ci/bench/micro/gemm_bench}"
shift || true
python="${PYTHON:-/usr/bin/python3}"
if [[ ! -x "$bin" ]]; then
  echo "gemm_ratio: no gemm_bench binary at '$bin' (build the gemm_bench target, or pass its path)" >&2
  exit 2
fi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
"$bin" --benchmark_format=json --benchmark_out_format=json --benchmark_out="$tmp" "$@" >/dev/null

"$python" - "$tmp" <<'EOF'
import json
import sys

doc = json.load(open(sys.argv[1]))
rows = {}  # (impl, shape) -> benchmark row
aggregated = any(b.get("run_type") == "aggregate" for b in doc["benchmarks"])
for b in doc["benchmarks"]:
    if b.get("error_occurred"):
        sys.exit(f"gemm_ratio: {b['name']} failed: {b.get('error_message', '?')}")
    if aggregated and b.get("aggregate_name") != "median":
        continue
    _, impl, shape = b["run_name"].split("/")
    rows[(impl, shape)] = b

unit_s = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
def seconds(b):
    return b["cpu_time"] * unit_s[b["time_unit"]]

ctx = doc["context"]
print(f"gemm_bench on {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
      f"library build {ctx.get('library_build_type', '?')}, {ctx.get('workload', '')}; "
      f"{'median of repetitions' if aggregated else 'one run'} per benchmark")
print(f"{'shape':<11} {'M':>5} {'N':>5} {'K':>5} {'calls':>5} {'ddpbench':>10} {'openblas':>10} {'ratio':>6}")
print(f"{'':<11} {'':>5} {'':>5} {'':>5} {'':>5} {'GFLOP/s':>10} {'GFLOP/s':>10} {'':>6}")
total_ours = total_blas = 0.0
shapes = [s for (impl, s) in rows if impl == "ddpbench"]
for shape in shapes:
    ours, blas = rows[("ddpbench", shape)], rows[("openblas", shape)]
    calls = int(ours["calls_per_step"])
    print(f"{shape:<11} {int(ours['M']):>5} {int(ours['N']):>5} {int(ours['K']):>5} {calls:>5} "
          f"{ours['FLOPS'] / 1e9:>10.1f} {blas['FLOPS'] / 1e9:>10.1f} "
          f"{ours['FLOPS'] / blas['FLOPS']:>6.3f}")
    total_ours += calls * seconds(ours)
    total_blas += calls * seconds(blas)
print(f"overall (GEMM time of one training step): ddpbench {total_ours * 1e3:.3f} ms, "
      f"openblas {total_blas * 1e3:.3f} ms, ratio {total_blas / total_ours:.3f}")
EOF
