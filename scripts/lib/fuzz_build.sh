# Sourced by scripts/fuzz.sh and scripts/test.sh: the one configuration of the Clang build
# with libFuzzer coverage and ASan + UBSan. test.sh's ASan pass builds its unit tests in it and
# fuzz.sh its four targets, so that in CI the library objects compile once for both.

# Prints nothing and returns 0 when clang++ links a libFuzzer target; otherwise prints why not.
fuzz_build_unsupported() {
  if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
    echo "fuzzing needs clang and clang++, not found on PATH"
    return 0
  fi
  local probe_dir rc=0
  probe_dir=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$probe_dir/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
    >"$probe_dir/probe.log" 2>&1 || rc=$?
  [[ $rc == 0 ]] ||
    echo "clang++ cannot link a libFuzzer target (-fsanitize=fuzzer): $(head -c 300 "$probe_dir/probe.log")"
  rm -rf "$probe_dir"
}

# Configures $1 as the fuzz build. -O0 with line tables: it compiles in 133 s where -O1 took
# 457 s (ASan and UBSan instrument every access at any level), the unit tests under it run in
# 1.6x -O1's time (62 s against 38 s, one after another), fuzzing gets fewer executions in its
# fixed time, and stacks keep file:line.
fuzz_build_configure() {
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" \
    -DDDPB_FUZZ=ON -DDDPBENCH_CUDA=OFF -DDDPB_NVTX=OFF -DDDPB_UNITY_LIBS=ON \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
}
