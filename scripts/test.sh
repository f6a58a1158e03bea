#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs every test, then
# runs the multi-threaded tests (DP workers, streams, data loader) under ThreadSanitizer.
#   scripts/test.sh                 build dirs build/ci and build/tsan
#   BUILD_DIR=... scripts/test.sh   another main build directory
#   NO_TSAN=1 scripts/test.sh       skip the TSan pass
# CUDA code is compiled and linked whenever a CUDA compiler exists, even without a GPU;
# CUDA tests then skip with the reason printed. Sanitizer builds are CPU-only.
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

if [ "${NO_TSAN:-0}" != 1 ]; then
  tsan_dir=${TSAN_BUILD_DIR:-$root/build/tsan}
  echo "== ThreadSanitizer: DP workers, streams, data loader"
  cmake -S "$root" -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDPBENCH_CUDA=OFF -DDDPB_SANITIZE=thread >/dev/null
  cmake --build "$tsan_dir" -j "$jobs" --target test_dp test_core test_dataloader
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  "$tsan_dir/tests/impl_dp/test_dp"
  "$tsan_dir/tests/test_core" --gtest_filter='CpuStream.*:Event.*'
  "$tsan_dir/tests/workloads/test_dataloader"
fi
