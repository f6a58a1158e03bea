#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input (fuzz/): the safetensors reader, the run-record
# reader, the TCPStore frame parser, the suite-file parser and the meta.pkl reader, each under
# libFuzzer with ASan + UBSan.
#   scripts/fuzz.sh [SECONDS]      each target for SECONDS (default 60), on a copy of its
#                                  seed corpus fuzz/corpus/<target>/
#   FUZZ_BUILD_DIR=... JOBS=N      build directory (default build/fuzz; .ci/run passes
#                                  build/asan, where scripts/test.sh built the same
#                                  configuration); build jobs and targets fuzzed side by
#                                  side (default: the cores)
# Prints, per target, the executions, the corpus size at the end and the result. Exits
# non-zero on any crash, leak, UB report or timeout; the input that triggered it is kept
# under <build dir>/artifacts/<target>/ (reproduce: <build dir>/fuzz/<target> FILE).
# Without Clang or libFuzzer it prints "SKIPPED: ..." and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${1:-60}
case $seconds in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
build_dir=${FUZZ_BUILD_DIR:-$root/build/fuzz}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
targets=(fuzz_safetensors fuzz_report fuzz_store_protocol fuzz_suite_file fuzz_nanogpt_meta)

# libFuzzer ships with Clang's compiler-rt; check that a fuzzer actually links.
source "$root/scripts/lib/fuzz_build.sh"
why_not=$(fuzz_build_unsupported)
if [[ -n "$why_not" ]]; then
  echo "SKIPPED: $why_not"
  exit 0
fi

echo "== fuzz: configure and build ($build_dir)"
start=$(date +%s)
fuzz_build_configure "$build_dir"
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
echo "== fuzz: build took $(($(date +%s) - start)) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One target for $seconds; its result line goes to <build dir>/logs/<target>.result.
fuzz_one() {
  local t=$1 seeds=$root/fuzz/corpus/$1 corpus=$build_dir/corpus/$1
  local artifacts=$build_dir/artifacts/$1 log=$build_dir/logs/$1.log rc=0 execs size result
  rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  cp -r "$seeds/." "$corpus/"
  "$build_dir/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  result=ok
  [ "$rc" = 0 ] || result="FAILED (exit $rc)"
  printf '%-22s executions %-10s corpus %-6s %s\n' "$t" "${execs:-?}" "$size" "$result" \
    >"$build_dir/logs/$t.result"
}

# Targets run $jobs at a time, each on a core of its own for $seconds of wall time: the same
# fuzzing per target as one after another, in 1/$jobs of the time.
mkdir -p "$build_dir/logs"
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  echo "== fuzz: ${batch[*]} for ${seconds} s each, side by side"
  for t in "${batch[@]}"; do fuzz_one "$t" & done
  wait
done

failed=0
for t in "${targets[@]}"; do
  if ! grep -q ' ok$' "$build_dir/logs/$t.result"; then
    failed=1
    echo "== fuzz: $t failed; the end of $build_dir/logs/$t.log:"
    tail -n 40 "$build_dir/logs/$t.log"
    for f in "$build_dir/artifacts/$t"/*; do [ -e "$f" ] && echo "   kept input: $f"; done
  fi
done

echo "== fuzz summary (${seconds} s per target; logs in $build_dir/logs)"
for t in "${targets[@]}"; do cat "$build_dir/logs/$t.result"; done
exit "$failed"
