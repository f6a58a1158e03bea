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

# The Release build scripts/test.sh makes (scripts/lib/main_build.sh: build/ci, configured the
# same way), so the two commands in either order build each object once. This one builds only
# the ddpbench binary and points ./ddpbench at it.
source "$root/scripts/lib/main_build.sh"
build_dir=$(main_build_dir "$root")
main_build_configure "$root" "$build_dir"
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target ddpbench
main_build_link "$root" "$build_dir"
bin="$build_dir/bench/ddpbench"

results=${RESULTS_DIR:-$root/results/suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$(dirname "$results")"
"$bin" env | sed -n '1,6p'
exec "$bin" suite --out "$results" "$@"
