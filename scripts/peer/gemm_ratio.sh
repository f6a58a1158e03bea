#!/usr/bin/env bash
# ddpbench's CPU GEMM path against raw oneDNN and OpenBLAS on mlp-small's training GEMMs
# (batch 64).
#
#   scripts/peer/gemm_ratio.sh [GEMM_BENCH_BIN] [benchmark flags...]
#     GEMM_BENCH_BIN  default build/ci/bench/micro/gemm_bench (this script builds nothing)
#     flags           passed on, e.g. --benchmark_repetitions=5 (then the median is used)
#                     or --benchmark_min_time=0.5 (libbenchmark 1.7: plain seconds)
#   env: PYTHON (default /usr/bin/python3)
#
# Per shape: GFLOP/s of ddpb::ops::gemm (bias + ReLU epilogue included where training has
# it), of dnnl_sgemm (oneDNN's call; ddpbench runs its matmul primitive) and of cblas_sgemm
# (what PyTorch's CPU build calls), and ratio = ddpbench / library GFLOP/s (1.0 = parity,
# below 1 = ddpbench slower). The overall lines weight each shape by how often one training
# step runs it (calls_per_step) and compare the summed times: ratio = sum(library time) /
# sum(ddpbench time), again as a throughput ratio. Times are CPU times (the default of Google
# Benchmark), which a busy machine disturbs less than wall-clock times.
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

"$python" "$(dirname "$0")/../pylib/gemm_ratio.py" "$tmp"
