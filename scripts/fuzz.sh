#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input (fuzz/): the safetensors reader, the run-record
# reader, the TCPStore frame parser and the suite-file parser, each under libFuzzer with ASan + UBSan.
#   scripts/fuzz.sh [SECONDS]      each target for SECONDS (default 60), on a copy of its
#                                  seed corpus fuzz/corpus/<target>/
#   FUZZ_BUILD_DIR=... JOBS=N      build directory (default build/fuzz) and build jobs
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
targets=(fuzz_safetensors fuzz_report fuzz_store_protocol fuzz_suite_file)

# libFuzzer ships with Clang's compiler-rt; check that a fuzzer actually links.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "SKIPPED: fuzzing needs clang and clang++, not found on PATH"
  exit 0
fi
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
  >"$probe_dir/probe.log" 2>&1; then
  echo "SKIPPED: clang++ cannot link a libFuzzer target (-fsanitize=fuzzer): $(head -c 300 "$probe_dir/probe.log")"
  exit 0
fi

echo "== fuzz: configure and build ($build_dir)"
start=$(date +%s)
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDPB_FUZZ=ON -DDDPBENCH_CUDA=OFF -DDDPBENCH_TESTS=OFF -DDDPB_NVTX=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
echo "== fuzz: build took $(($(date +%s) - start)) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
summary=()
for t in "${targets[@]}"; do
  seeds=$root/fuzz/corpus/$t
  corpus=$build_dir/corpus/$t
  artifacts=$build_dir/artifacts/$t
  log=$build_dir/logs/$t.log
  rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  cp -r "$seeds/." "$corpus/"
  echo "== fuzz: $t for ${seconds} s (seeds: $(find "$seeds" -type f | wc -l))"
  rc=0
  "$build_dir/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$rc" = 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed=1
    tail -n 40 "$log"
    for f in "$artifacts"/*; do [ -e "$f" ] && echo "   kept input: $f"; done
  fi
  summary+=("$(printf '%-22s executions %-10s corpus %-6s %s' "$t" "${execs:-?}" "$size" "$result")")
done

echo "== fuzz summary (${seconds} s per target; logs in $build_dir/logs)"
printf '%s\n' "${summary[@]}"
exit "$failed"
