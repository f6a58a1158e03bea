#!/usr/bin/env bash
# Gloo raw vs ddpbench's ProcessGroupGloo: the time of one 64 MiB f32 sum allreduce over 2
# ranks (threads of one process, TCP over 127.0.0.1), called through Gloo's own API
# (gloo::allreduce, ring) and through ProcessGroupGloo::allreduce(t)->wait() on the same
# buffers; see bench/micro/gloo_raw_bench.cpp.
#
#   scripts/peer/gloo_ratio.sh BUILD_DIR [benchmark flags...]
#     BUILD_DIR  a build with the gloo_raw_bench target built (this script builds nothing)
#     flags      passed on after the defaults, so they override them; the defaults are
#                --benchmark_repetitions=20 --benchmark_min_time=0.3 (libbenchmark 1.7: plain
#                seconds; ~5 iterations per repetition) and
#                --benchmark_enable_random_interleaving=true (the repetitions of the two
#                sides interleaved, so a noisy neighbour hits both alike); ~20 s in all
#   env: PYTHON (default /usr/bin/python3); STRICT=1 exits 3 when the ratio misses the target
#
# Prints per side the median, quartiles and minimum over repetitions of the per-iteration
# time (each iteration: a barrier, then the max over ranks), the bandwidths at the median,
# and ratio = PG median / raw median (1.0 = no overhead; target <= 1.05) with a bootstrap
# 90% interval, and the ratio of the minima. On a busy machine (other builds; 2 ranks with
# their Gloo threads already fill 2 cores) single repetitions spread by +-30%, so a run with
# few repetitions can land anywhere within ~15% of the truth: read the interval.
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: scripts/peer/gloo_ratio.sh BUILD_DIR [benchmark flags...]" >&2
  exit 2
fi
build="$1"
shift
bin="$build/bench/micro/gloo_raw_bench"
python="${PYTHON:-/usr/bin/python3}"
if [[ ! -x "$bin" ]]; then
  echo "gloo_ratio: no gloo_raw_bench at '$bin' (build the gloo_raw_bench target in $build)" >&2
  exit 2
fi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
"$bin" --benchmark_filter='^gloo_allreduce/(raw|pg)/ranks:2/bytes:67108864/' \
  --benchmark_repetitions=20 --benchmark_min_time=0.3 --benchmark_enable_random_interleaving=true \
  --benchmark_format=json --benchmark_out_format=json --benchmark_out="$tmp" "$@" >/dev/null

STRICT="${STRICT:-0}" "$python" "$(dirname "$0")/../pylib/gloo_ratio.py" "$tmp"
