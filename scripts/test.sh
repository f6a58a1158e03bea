#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs every test, then
# the sanitizer passes: the unit tests under ASan + UBSan (LeakSanitizer included), and the
# multi-threaded ones (DP workers, streams, data loader, stores, process groups, FSDP) under TSan.
#   scripts/test.sh                 everything (build dirs build/ci, build/asan, build/tsan)
#   scripts/test.sh --sanitize      only the sanitizer passes
#   NO_SANITIZE=1 scripts/test.sh   skip the sanitizer passes
#   BUILD_DIR=... scripts/test.sh   another main build directory
#   CUDA_ARCHS="80;90" ...          the CUDA architectures (default: 80;90 with a GPU, 90 without)
# CUDA code is compiled and linked whenever a CUDA compiler exists, even without a GPU; CUDA
# tests then skip with the reason printed. Sanitizer builds are CPU-only. The Release build is
# the one scripts/bench.sh uses (scripts/lib/main_build.sh), and ./ddpbench points at its binary.
# A failing pass does not hide the others: every pass runs, and the ten slowest tests and the
# verdict line are printed on every exit, a failed build or pass included; the exit code is
# non-zero when anything failed.
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

source "$root/scripts/lib/main_build.sh"
source "$root/scripts/lib/side_by_side.sh"
jobs=${JOBS:-$(nproc)}
stage=setup      # what runs now: the verdict names it when the script stops on an error
failed_passes=() # the passes that failed, for the verdict
tmp_files=()

# The last lines, on every exit: the ten slowest tests of the main pass and one verdict line.
finish() {
  local rc=$?
  rm -f "${tmp_files[@]}"
  if [[ -n "${slowest:-}" ]]; then
    echo "scripts/test.sh: the ten slowest tests of the main pass:"
    echo "$slowest"
  fi
  local outcome="passed"
  if [[ $rc != 0 && ${#failed_passes[@]} == 0 ]]; then
    outcome="FAILED in $stage (exit $rc)"
  elif [[ ${#failed_passes[@]} != 0 ]]; then
    outcome="FAILED: ${failed_passes[*]}"
  fi
  echo "scripts/test.sh: $outcome; ${verdict:-main tests not run}; ${sanitizers:-sanitizer passes not run}"
}
trap finish EXIT

"$root/scripts/setup.sh"

if [[ $main == 1 ]]; then
  stage="the format check"
  "$root/scripts/check_format.sh"
  build_dir=$(main_build_dir "$root")
  stage="the Release build"
  main_build_configure "$root" "$build_dir"
  cmake --build "$build_dir" -j "$jobs"
  main_build_link "$root" "$build_dir"
  stage="the main tests"
  ctest_log=$(mktemp)
  skipped_why=$(mktemp)
  tmp_files+=("$ctest_log" "$skipped_why")
  ctest_rc=0
  ctest --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 900 | tee "$ctest_log" ||
    ctest_rc=$?
  /usr/bin/env python3 "$root/scripts/ctest_skips.py" "$build_dir" "$skipped_why" || true
  counts=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -n 1 || true)
  if [[ -n "$counts" ]]; then
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$counts")
    failed=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$counts")
    # ctest counts a skipped test as passed: take the skips out of the passes.
    skipped=$(grep -cE '\(Skipped\)$' "$ctest_log" || true)
    verdict="tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped (of $total; $(cat "$skipped_why"))"
  else
    verdict="tests: ctest printed no count (exit $ctest_rc)"
  fi
  # ctest's lines end "Passed   12.34 sec": the ten longest, for whoever keeps CI fast.
  slowest=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$ctest_log" |
    sort -rn | awk 'NR <= 10 {printf "  %7.1f s  %s\n", $1, $2}')  # no head: pipefail, SIGPIPE
  # A failed main pass does not stop the sanitizer passes: their findings are wanted too.
  [[ $ctest_rc == 0 ]] || failed_passes+=("main tests")
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
  # with fuzzer coverage), so that fuzzing after it (.ci/run) compiles only its five targets;
  # otherwise GCC's ASan + UBSan.
  source "$root/scripts/lib/fuzz_build.sh"
  stage="the ASan build"
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
              test_compare test_stream_sanitizer test_fsdp)
  cmake --build "$asan_dir" -j "$jobs" --target "${asan_tests[@]}"
  stage="the ASan tests"
  asan_runs=()
  for t in "${asan_tests[@]}"; do
    asan_runs+=("$(find "$asan_dir/tests" -type f -name "$t" -perm -u+x | head -n 1) --gtest_brief=1")
  done
  asan_result="ASan+UBSan: ${#asan_tests[@]} unit test binaries passed"
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    side_by_side "ASan+UBSan" "$jobs" "${asan_runs[@]}" ||
    { asan_result="ASan+UBSan: FAILED (the logs above)"; failed_passes+=("ASan+UBSan"); }

  tsan_dir=${TSAN_BUILD_DIR:-$root/build/tsan}
  echo "== ThreadSanitizer: DP workers, streams, data loader, stores, process groups, FSDP"
  stage="the TSan build"
  cmake -S "$root" -B "$tsan_dir" -G Ninja "${sanitizer_flags[@]}" -DDDPB_UNITY_LIBS=ON \
    -DDDPBENCH_CUDA=OFF -DDDPB_SANITIZE=thread >/dev/null
  cmake --build "$tsan_dir" -j "$jobs" --target test_dp_primitives test_stream test_dataloader test_store \
    test_process_group test_stream_sanitizer test_fsdp
  stage="the TSan tests"
  tsan_result="TSan: 7 passed"
  # The 2000-collective stress test is left to the main pass: under TSan it takes minutes.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/scripts/lib/tsan.supp" \
    side_by_side "TSan" "$jobs" \
    "$tsan_dir/tests/impl_dp/test_dp_primitives --gtest_brief=1" \
    "$tsan_dir/tests/test_stream --gtest_brief=1" \
    "$tsan_dir/tests/data/test_dataloader --gtest_brief=1" \
    "$tsan_dir/tests/comm/test_store --gtest_filter='StoreTest/HashStore.*:StoreTest/TCPStore.*' --gtest_brief=1" \
    "$tsan_dir/tests/comm/test_process_group --gtest_filter='-*Stress*' --gtest_brief=1" \
    "$tsan_dir/tests/test_stream_sanitizer --gtest_brief=1" \
    "$tsan_dir/tests/impl_fsdp/test_fsdp --gtest_brief=1" ||
    { tsan_result="TSan: FAILED (the logs above)"; failed_passes+=("TSan"); }
  sanitizers="$asan_result; $tsan_result"
fi
[[ $main == 1 ]] || verdict="main tests not run (--sanitize)"
[[ $sanitize == 1 ]] || sanitizers="sanitizer passes skipped (NO_SANITIZE=1)"
stage="the end"
# finish (the EXIT trap) prints the verdict; the exit code says whether any pass failed.
[[ ${#failed_passes[@]} == 0 ]]
