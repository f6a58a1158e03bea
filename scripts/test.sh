#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs every test.
#   scripts/test.sh                 build dir build/ci (CUDA on when nvcc is present)
#   BUILD_DIR=... scripts/test.sh   another build directory
# CUDA code is compiled and linked whenever a CUDA compiler exists, even without a GPU;
# CUDA tests then skip with the reason printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/scripts/setup.sh"

build_dir=${BUILD_DIR:-$root/build/ci}
jobs=${JOBS:-$(nproc)}
cuda=${DDPBENCH_CUDA:-AUTO}

cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_CUDA="$cuda"
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 900
