#!/usr/bin/env bash
# The benchmark command: installs what is missing, makes a Release build and runs the default
# suite (`ddpbench suite`) on the detected hardware: GPUs when one is usable, CPU otherwise.
#   scripts/bench.sh [SUITE OPTIONS...]    e.g. --quick, --with-pytorch, a SUITE.json
# Results go to results/suite-<date>/ (override with RESULTS_DIR): suite.json, every run's
# record, trace and log, report.html and report.md. The last lines say where the report is.
# Exit code: the suite's (0 all runs ok and correct, 1 a run failed or computed the wrong
# thing, 130 interrupted: continue with `ddpbench suite --resume DIR`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"

# The Release build of scripts/test.sh (build/ci) serves when it is there: one full build, not
# two. Otherwise build/release.
default_build=$root/build/release
if grep -qs '^CMAKE_BUILD_TYPE:STRING=Release$' "$root/build/ci/CMakeCache.txt"; then
  default_build=$root/build/ci
fi
build_dir=${BUILD_DIR:-$default_build}
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_CUDA="${DDPBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target ddpbench
bin="$build_dir/bench/ddpbench"

results=${RESULTS_DIR:-$root/results/suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$(dirname "$results")"
"$bin" env | sed -n '1,6p'
exec "$bin" suite --out "$results" "$@"
