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

STRICT="${STRICT:-0}" "$python" - "$tmp" <<'PY'
import json
import os
import random
import statistics
import sys

TARGET = 1.05
doc = json.load(open(sys.argv[1]))
unit_s = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
runs = {"raw": [], "pg": []}  # per repetition: seconds per iteration
nbytes = ranks = None
for b in doc["benchmarks"]:
    if b.get("error_occurred"):
        sys.exit(f"gloo_ratio: {b['name']} failed: {b.get('error_message', '?')}")
    if b.get("run_type") != "iteration":
        continue
    side = b["run_name"].split("/")[1]
    runs[side].append(b["real_time"] * unit_s[b["time_unit"]])  # manual time: max over ranks
    nbytes, ranks = b["bytes"], int(b["ranks"])
for side, times in runs.items():
    if not times:
        sys.exit(f"gloo_ratio: no '{side}' results (was the filter overridden?)")

ctx = doc["context"]
print(f"gloo_raw_bench on {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
      f"load {', '.join(f'{x:.1f}' for x in ctx.get('load_avg', []))}; {ranks} ranks (threads), "
      f"{nbytes / 2**20:.0f} MiB f32 sum, {len(runs['raw'])} repetitions per side")
def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]

print(f"{'side':<5} {'median ms':>10} {'p25 ms':>8} {'p75 ms':>8} {'min ms':>8} "
      f"{'algbw GB/s':>11} {'busbw GB/s':>11}")
median = {}
for side in ("raw", "pg"):
    t = runs[side]
    median[side] = statistics.median(t)
    algbw = nbytes / median[side] / 1e9
    busbw = algbw * 2 * (ranks - 1) / ranks
    print(f"{side:<5} {median[side] * 1e3:>10.2f} {quantile(t, 0.25) * 1e3:>8.2f} "
          f"{quantile(t, 0.75) * 1e3:>8.2f} {min(t) * 1e3:>8.2f} {algbw:>11.3f} {busbw:>11.3f}")
ratio = median["pg"] / median["raw"]
rng = random.Random(0)
boot = sorted(
    statistics.median(rng.choices(runs["pg"], k=len(runs["pg"]))) /
    statistics.median(rng.choices(runs["raw"], k=len(runs["raw"]))) for _ in range(2000))
lo, hi = boot[100], boot[1899]
verdict = "within target" if ratio <= TARGET else "ABOVE target"
print(f"ratio PG/raw (median time): {ratio:.3f}  90% interval {lo:.3f}-{hi:.3f}  "
      f"({verdict}: <= {TARGET})")
print(f"ratio PG/raw (min time):    {min(runs['pg']) / min(runs['raw']):.3f}")
if ratio > TARGET and os.environ.get("STRICT") == "1":
    sys.exit(3)
PY
