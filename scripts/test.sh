#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs every test, then
# the sanitizer passes: the unit tests under ASan + UBSan (LeakSanitizer included), and the
# multi-threaded ones (DP workers, streams, data loader, stores, process groups) under TSan.
#   scripts/test.sh                 everything (build dirs build/ci, build/asan, build/tsan)
#   scripts/test.sh --sanitize      only the sanitizer passes
#   NO_SANITIZE=1 scripts/test.sh   skip the sanitizer passes
#   BUILD_DIR=... scripts/test.sh   another main build directory
#   CUDA_ARCHS="80;90" ...          the CUDA architectures (default: 80;90 with a GPU, 90 without)
# CUDA code is compiled and linked whenever a CUDA compiler exists, even without a GPU; CUDA
# tests then skip with the reason printed. Sanitizer builds are CPU-only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

main=1
sanitize=$([[ "${NO_SANITIZE:-0}" == 1 ]] && echo 0 || echo 1)
for arg in "$@"; do
  case "$arg" in
    --sanitize) main=0; sanitize=1 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (expected --sanitize)" >&2; exit 2 ;;
  esac
done

"$root/scripts/setup.sh"
jobs=${JOBS:-$(nproc)}

if [[ $main == 1 ]]; then
  "$root/scripts/check_format.sh"
  build_dir=${BUILD_DIR:-$root/build/ci}
  # Without a GPU the CUDA code compiles for one architecture: that checks that it builds and
  # links, in half the time of the two a GPU machine gets.
  cuda_archs="80;90"
  nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null || cuda_archs=90
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPB_WERROR=ON \
    -DDDPB_UNITY_LIBS=ON -DDDPBENCH_CUDA="${DDPBENCH_CUDA:-AUTO}" "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-$cuda_archs}"
  cmake --build "$build_dir" -j "$jobs"
  ctest_log=$(mktemp)
  trap 'rm -f "$ctest_log"' EXIT
  ctest_rc=0
  ctest --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 900 | tee "$ctest_log" ||
    ctest_rc=$?
  skipped_why=$(mktemp)
  /usr/bin/env python3 "$root/scripts/ctest_skips.py" "$build_dir" "$skipped_why" || true
  counts=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -n 1)
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$counts")
  failed=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$counts")
  # ctest counts a skipped test as passed: take the skips out of the passes.
  skipped=$(grep -cE '\(Skipped\)$' "$ctest_log" || true)
  verdict="tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped (of $total; $(cat "$skipped_why"))"
  # ctest's lines end "Passed   12.34 sec": the ten longest, for whoever keeps CI fast.
  slowest=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$ctest_log" |
    sort -rn | awk 'NR <= 10 {printf "  %7.1f s  %s\n", $1, $2}')  # no head: pipefail, SIGPIPE
  rm -f "$skipped_why"
  if [[ $ctest_rc != 0 ]]; then
    echo "scripts/test.sh: FAILED: $verdict"
    exit "$ctest_rc"
  fi
fi

if [[ $sanitize == 1 ]]; then
  # -O0 with line tables only: the sanitizers' reports keep file:line stacks, and the builds
  # take a fraction of an optimized one's time (the JSON and gtest templates are most of it),
  # for tests that run a little longer: the TSan build takes 71 s at -O0 as unity builds (112 s
  # without, and more at -Og).
  sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -g1 -DNDEBUG"
                   "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -g1 -DNDEBUG")
  # Unit tests that run in-process (the process-spawning tests are covered by the main pass).
  asan_dir=${ASAN_BUILD_DIR:-$root/build/asan}
  # With Clang and libFuzzer the ASan build is scripts/fuzz.sh's configuration (ASan + UBSan
  # with fuzzer coverage), so that fuzzing after it (.ci/run) compiles only its four targets;
  # otherwise GCC's ASan + UBSan.
  source "$root/scripts/lib/fuzz_build.sh"
  if [[ -z "$(fuzz_build_unsupported)" ]]; then
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer (Clang, the fuzz build): unit tests"
    fuzz_build_configure "$asan_dir"
  else
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer (GCC): unit tests"
    cmake -S "$root" -B "$asan_dir" -G Ninja "${sanitizer_flags[@]}" -DDDPB_UNITY_LIBS=ON \
      -DDDPBENCH_CUDA=OFF -DDDPB_SANITIZE=address >/dev/null
  fi
  # The two longest first, so that they run side by side.
  asan_tests=(test_process_group test_dp_primitives test_core test_ddp test_store test_flight_recorder
              test_safetensors test_sampler test_dataset test_dataloader test_report_render
              test_compare test_stream_sanitizer)
  cmake --build "$asan_dir" -j "$jobs" --target "${asan_tests[@]}"
  export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  source "$root/scripts/lib/side_by_side.sh"
  asan_runs=()
  for t in "${asan_tests[@]}"; do
    asan_runs+=("$(find "$asan_dir/tests" -type f -name "$t" -perm -u+x | head -n 1) --gtest_brief=1")
  done
  side_by_side "ASan+UBSan" "$jobs" "${asan_runs[@]}"

  tsan_dir=${TSAN_BUILD_DIR:-$root/build/tsan}
  echo "== ThreadSanitizer: DP workers, streams, data loader, stores, process groups"
  cmake -S "$root" -B "$tsan_dir" -G Ninja "${sanitizer_flags[@]}" -DDDPB_UNITY_LIBS=ON \
    -DDDPBENCH_CUDA=OFF -DDDPB_SANITIZE=thread >/dev/null
  cmake --build "$tsan_dir" -j "$jobs" --target test_dp_primitives test_stream test_dataloader test_store \
    test_process_group test_stream_sanitizer
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  # The 2000-collective stress test is left to the main pass: under TSan it takes minutes.
  side_by_side "TSan" "$jobs" "$tsan_dir/tests/impl_dp/test_dp_primitives --gtest_brief=1" \
    "$tsan_dir/tests/test_stream --gtest_brief=1" \
    "$tsan_dir/tests/data/test_dataloader --gtest_brief=1" \
    "$tsan_dir/tests/comm/test_store --gtest_filter='StoreTest/HashStore.*:StoreTest/TCPStore.*' --gtest_brief=1" \
    "$tsan_dir/tests/comm/test_process_group --gtest_filter='-*Stress*' --gtest_brief=1" \
    "$tsan_dir/tests/test_stream_sanitizer --gtest_brief=1"
  sanitizers="ASan+UBSan: ${#asan_tests[@]} unit test binaries passed; TSan: 6 passed"
fi

if [[ -n "${slowest:-}" ]]; then
  echo "scripts/test.sh: the ten slowest tests of the main pass:"
  echo "$slowest"
fi
# One verdict line, last (set -e has stopped the script on any earlier failure).
echo "scripts/test.sh: ${verdict:-main tests not run (--sanitize)}; ${sanitizers:-sanitizer passes skipped (NO_SANITIZE=1)}"
