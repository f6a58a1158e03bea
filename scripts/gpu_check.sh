#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, runs the CUDA tests (failing if any skip),
# short training runs, the GEMM table and the gpt2-small comparison with PyTorch, and prints
# a summary that is also written as JSON.
#
#   scripts/gpu_check.sh                  configure + build with CUDA in build/gpu, then check
#   scripts/gpu_check.sh --prebuilt DIR   use a bundle made by scripts/gpu_bundle.sh, the folder
#                                         or its .tar.gz, which is unpacked first (no build;
#                                         for a GPU machine without our Debian packages)
# Options: --budget SECONDS (default $BUDGET_S or 420): the whole check after the build;
#          every step runs under `timeout`, capped by what is left of the budget, and a step
#          the budget leaves out is WARN (not run), not FAIL. The steps run in the order of
#          their value (binaries and libraries, the CUDA tests, the runs and benchmarks of the
#          GPU targets table, PyTorch side by side, then the projection, the suite and
#          compute-sanitizer with the time that remains): with a machine start of 1-2
#          minutes, a first call fits 7 minutes of a 15-minute GPU window.
#          --only TAG,...: only these steps (globs on the tags: test_cuda_parity, test_dp_cuda,
#          test_process_group_nccl, the run tags such as single-resnet50 or 'ddp-*', gemm,
#          bn-bench, pytorch, pytorch-resnet50, projection, suite, memcheck, racecheck), for
#          a short second call after fixes; libraries and device always run.
# Output (Note [GPU check evidence]): the steps write into GPU_CHECK_WORK (default
#   $TMPDIR/gpu_check, emptied first); OUT (default ./gpu_check_out) gets exactly four files,
#   also on an early exit or a signal: gpu_check.json (steps, training, targets), summary.txt
#   (every table), failures.txt (the last 40 lines of each failed step's log) and
#   gpu_check.tgz (the whole work folder: logs, run records, the suite). The last screen is
#   the targets table, the step table and the first lines of each failure.
# Environment: PYTHON (default python3; the PyTorch step takes the first of $PYTHON,
#   python3, python, /usr/bin/python3 that imports torch);
#   BUILD_DIR (default build/gpu), JOBS (build parallelism, default nproc).
#   GPU_CHECK_SELFTEST=1 tests this script on a machine without a GPU: no device probe, every
#   run on the CPU with small stand-ins (mlp-small for mlp-wide, gpt-tiny for gpt2-small, a
#   1-layer seq-64 PyTorch model), 2 steps. Its numbers mean nothing and it still fails (the
#   CUDA tests skip, the CUDA benchmarks find no device): it only exercises every code path.
#
# Steps (each prints a "== [k] ..." header):
#   libraries   (--prebuilt) resolves the bundle's shared libraries against this machine:
#               bundle lib/ first, then $LD_LIBRARY_PATH and the usual CUDA folders; a soname
#               still missing is searched for (pip's nvidia/ folders, /usr, /opt); lib/compat
#               only if the system libstdc++ is too old, the bundled glibc loader only if
#               the system glibc is. Only our binaries get this path, never Python.
#   device      nvidia-smi, then a one-step ddpbench probe on cuda:0 (retried with the CUDA
#               forward-compatibility driver, if installed, when the driver is too old);
#               without a usable GPU the script stops here: one line on stderr, exit 1
#   tests       test_cuda_parity and test_dp --gtest_filter='*Cuda*'. A skipped test FAILS
#               the check: on a GPU machine a skip means nothing was tested. Tests that cannot
#               apply are excluded up front and named: CudaRuntime.NoDeviceMeansCudaErrorNotCrash
#               (needs a machine *without* a GPU) and, with one GPU, CudaParity.PeerCopy.
#   training    ddpbench run --mode single on cuda:0 (10 steps after 3 warm-up) for mlp-small,
#               mlp-wide, gpt-tiny, gpt2-small (batch 8, fp32, tf32 and bf16, and fp32 with
#               --attention flash and with --cuda-graph) and embed, gpt-tiny with --cuda-graph;
#               then
#               --mode dp over cuda:0,cuda:0 (two logical replicas) on mlp-small; DDP on
#               mlp-small over Gloo (2 ranks on cuda:0) and NCCL (world size 1), each also
#               with --comm-hook powersgd
#               (parity tests and runs with CUDNN_LOGLEVEL_DBG=2: cuDNN says why a plan fails)
#   gemm        cuda_gemm_bench: ddpb::ops::gemm vs cuBLAS on gpt2-small/mlp-wide shapes, and
#               the cost of the separate activation pass (Note [GEMM epilogues keep NaN])
#   bn-bench    cuda_bn_bench: the batch-norm kernels at resnet50's shapes, NCHW and NHWC,
#               against the copy bandwidth
#   pytorch     scripts/peer/torch_gpt_step.py: gpt2-small eager step, fp32, tf32 and bf16
#               (autocast), with matmul+softmax attention (ddpbench's algorithm) and, where PyTorch has it,
#               scaled_dot_product_attention; the ratio ddpbench / PyTorch uses ddpbench's
#               compute time (step minus the data phase) against PyTorch's step time
#               (zero_grad+forward+loss+backward+step on a resident batch), both medians
#   projection  ddpbench project: 2 logical ranks on one GPU predicted from the world-size-1
#               DDP run, against the measured 2-rank run (error in the table)
#   suite       ddpbench suite on CUDA: mlp-small and gpt-tiny, single/DP/DDP (NCCL) at world
#               size 1, correctness against single, suite.json and report.html
#   memcheck    compute-sanitizer --tool memcheck on a few parity tests, when installed
#   racecheck   compute-sanitizer --tool racecheck on the shared-memory kernels' tests, our
#               kernels only (names holding "ddpb"); last, so that a slow sanitizer cannot eat
#               the budget of the rest. A timeout is WARN, a sanitizer that refuses the device
#               INFO, a reported error FAIL
#   summary     scripts/gpu_check_summary.py: gpu_check.json and summary.txt, the targets table
# Exit: 0 when every step passed, 1 otherwise (2: bad arguments).
set -uo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$script_dir/.." && pwd)
prebuilt=""
budget=${BUDGET_S:-420}
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) prebuilt=${2:?--prebuilt needs a bundle directory or .tar.gz}; shift 2 ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2
              [[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget takes whole seconds" >&2; exit 2; } ;;
    --only) only=${2:?--only needs step tags, comma-separated}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-./gpu_check_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Note [GPU check evidence]: every step writes into the scratch folder $work; at the end, and on
# any early exit (the EXIT trap), deliver puts at most four files into $OUT (no folders):
# gpu_check.json, gpu_check.tgz (all of $work), summary.txt and failures.txt, because the GPU
# call returns at most 8 files of 16 MiB each, 2 folders deep, and the last 12,000 characters
# of output. The last screen is the targets table, the step table and each failure's head.
work=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/gpu_check}
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
: > "$work/steps.tsv"
summary_done=0
trap deliver EXIT
trap 'exit 1' INT TERM HUP
PYTHON=${PYTHON:-python3}
# NCCL's own warnings, not its INFO chatter, in the log of every run.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
step_no=0
clock_start=$SECONDS
reserve_s=20  # kept back for the summary

header() {
  step_no=$((step_no + 1))
  echo
  echo "== [$step_no] $1  (elapsed $((SECONDS - clock_start)) s of $budget s)"
}
# record NAME STATUS SECONDS DETAIL [LOG]: STATUS is PASS, FAIL, WARN or INFO (only FAIL
# fails); LOG is the step's log, whose tail failures.txt carries when the step failed.
record() {
  local detail=${4//$'\t'/ }
  detail=${detail//$'\n'/; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$detail" "${5:-}" >> "$work/steps.tsv"
  echo "-- $1: $2${4:+ ($detail)}"
}
# selected TAG: whether --only names this step (comma-separated globs; all when not given).
selected() {
  [[ -z "$only" ]] && return 0
  local pattern
  IFS=, read -r -a patterns <<<"$only"
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053  # a glob on purpose
    [[ "$1" == $pattern ]] && return 0
  done
  return 1
}
# $work/gpu_check.json from steps.tsv alone (an early stop, or no Python for the full summary).
write_steps_json() {
  local n s secs d sep=""
  {
    printf '{"schema_version": 1, "kind": "gpu_check", "ok": %s, "steps": [' \
      "$(grep -q $'\tFAIL\t' "$work/steps.tsv" && echo false || echo true)"
    while IFS=$'\t' read -r n s secs d _; do
      d=${d//\\/\\\\}
      printf '%s{"step": "%s", "status": "%s", "seconds": %s, "detail": "%s"}' "$sep" "$n" "$s" "$secs" "${d//\"/\\\"}"
      sep=", "
    done < "$work/steps.tsv"
    printf ']}\n'
  } > "$work/gpu_check.json"
}
# The step table from steps.tsv: name, status, seconds and the detail cut to fit a screen.
step_table() {
  printf '%-30s %-6s %4s  %s\n' step status s detail
  local n st secs d
  while IFS=$'\t' read -r n st secs d _; do
    printf '%-30s %-6s %4s  %s\n' "${n:0:30}" "$st" "$secs" "${d:0:80}"
  done < "$work/steps.tsv"
}
# failures.txt: per failed step its detail and the last 40 lines of its log.
write_failures() {
  local n st secs d log
  while IFS=$'\t' read -r n st secs d log; do
    [[ "$st" == FAIL ]] || continue
    echo "== $n: $d"
    if [[ -n "$log" && -f "$log" ]]; then tail -n 40 "$log"; else echo "(no log)"; fi
    echo
  done < "$work/steps.tsv"
}
# The EXIT trap (Note [GPU check evidence]).
deliver() {
  local rc=$?
  trap - EXIT
  [[ $summary_done == 1 && -f "$work/gpu_check.json" ]] || write_steps_json
  [[ -f "$work/summary.txt" ]] || step_table > "$work/summary.txt"
  write_failures > "$work/failures.txt"
  local f
  for f in gpu_check.json summary.txt failures.txt; do cp "$work/$f" "$OUT/$f"; done
  # Every log and record, not the suite's parameter dumps (safetensors: megabytes of floats
  # that the correctness verdict in suite.json already judged); should that still pass the
  # per-file limit, without the files over 1 MiB.
  tar -C "$(dirname "$work")" --exclude='*.safetensors' -czf "$OUT/gpu_check.tgz" \
    "$(basename "$work")" 2>/dev/null
  if (( $(stat -c %s "$OUT/gpu_check.tgz" 2>/dev/null || echo 0) > 15 * 1048576 )); then
    (cd "$(dirname "$work")" &&
       find "$(basename "$work")" -type f -size -1048577c ! -name '*.safetensors' -print0 |
       tar --null -T - -czf "$OUT/gpu_check.tgz")
  fi
  echo
  echo "== steps"
  step_table
  if grep -q $'\tFAIL\t' "$work/steps.tsv"; then
    echo
    echo "== failures (the first lines of each; all of them in failures.txt)"
    # Each section's header and its telling lines (a failed test, an error), at most 2.
    awk '/^== / {shown = 0; print substr($0, 1, 140); next}
         shown < 2 && /FAILED|[Ee]rror|[Ff]ailure|Expected|SKIPPED|not found|what\(\)/ {
           print "    " substr($0, 1, 130); shown++
         }' "$work/failures.txt" | head -c 4000
    echo "gpu_check: FAILED: $(awk -F'\t' '$2 == "FAIL" {printf "%s%s", sep, $1; sep=", "}' "$work/steps.tsv")" >&2
  fi
  echo "gpu_check: exit $rc; wrote $(cd "$OUT" && ls | tr '\n' ' ')in $OUT"
  exit "$rc"
}
# Stops the check: one line on stderr and exit 1 (deliver writes the steps so far).
fail_fast() {
  echo "gpu_check: $1" >&2
  exit 1
}
# Seconds a step may run: min(WANT, what is left of the budget); fails when under 10 s.
step_timeout() {
  local left=$((budget - (SECONDS - clock_start) - reserve_s))
  local t=$(( $1 < left ? $1 : left ))
  (( t >= 10 )) || return 1
  echo "$t"
}
timeout_text() { [[ $1 == 124 || $1 == 137 ]] && echo "timed out after $2 s" || echo "exit $1"; }

# ---- Binaries and their environment ------------------------------------------------------
# bin_prefix runs our binaries: empty for a local build; `env LD_LIBRARY_PATH=$ld_path` for a
# bundle; the bundled glibc loader when this machine's glibc is too old. Python and the
# system tools never see the bundle's libraries.
bin_prefix=()
ld_path=""       # LD_LIBRARY_PATH for our binaries ("" = leave the environment alone)
loader=""        # the bundled ld-linux when this machine's glibc is too old
loader_dirs=""   # its glibc and libstdc++ folders
set_prefix() {
  if [[ -n "$loader" ]]; then
    bin_prefix=("$loader" --library-path "$loader_dirs:$ld_path")
  elif [[ -n "$ld_path" ]]; then
    bin_prefix=(env "LD_LIBRARY_PATH=$ld_path")
  else
    bin_prefix=()
  fi
}
run_bin() { "${bin_prefix[@]+"${bin_prefix[@]}"}" "$@"; }
# Unresolved sonames of the binaries under $1 with the current ld_path.
missing_libs() {
  local b
  for b in "$1"/*; do LD_LIBRARY_PATH="$ld_path" ldd "$b" 2>/dev/null; done |
    awk '/=> not found/ {print $1}' | sort -u | tr '\n' ' '
}

setup_prebuilt() {
  local dir=$1
  header "libraries (bundle $dir)"
  local t0=$SECONDS
  # A copy may have lost the executable bits.
  chmod u+x "$dir"/bin/* "$dir"/lib/glibc/ld-linux* 2>/dev/null || true
  if [[ ! -x "$dir/bin/ddpbench" ]]; then
    record libraries FAIL 0 "$dir/bin/ddpbench missing: not a bundle from scripts/gpu_bundle.sh"
    fail_fast "$dir is not a bundle (no bin/ddpbench)"
  fi
  [[ -f "$dir/MANIFEST.txt" ]] && sed -n '1,6p' "$dir/MANIFEST.txt"
  ld_path="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local d
  for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d "$d" && ":$ld_path:" != *":$d:"* ]] && ld_path="$ld_path:$d"
  done
  # Libraries neither the bundle nor the loader's default paths provide (CUDA libraries in
  # an unusual place, or only inside a pip wheel): look for the exact soname, bounded.
  local missing lib found roots=()
  missing=$(missing_libs "$dir/bin")
  if [[ -n "${missing// }" ]]; then
    roots=(/usr/local /usr/lib /usr/lib64 /opt)
    local d
    # CUDA from pip wheels: site and user site-packages, the nvidia package's folders and
    # torch/lib (found without importing torch, which takes seconds).
    while IFS= read -r d; do
      [[ -n "$d" && -d "$d" ]] && roots=("$d" "${roots[@]}")
    done < <(timeout 5 "$PYTHON" - 2>/dev/null <<'PY' || true
import importlib.util, os, site
dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
for name in ("nvidia", "torch"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    for p in (spec.submodule_search_locations or []) if spec else []:
        dirs.append(os.path.join(p, "lib") if name == "torch" else p)
print("\n".join(d for d in dirs if os.path.isdir(d)))
PY
)
    # One bounded walk for every missing soname (with the CUDA 12 runtime, to say so), so
    # that a machine without them fails within the first seconds.
    local names=() found
    for lib in $missing libcudart.so.12; do names+=(-o -name "$lib"); done
    while IFS= read -r found; do
      lib=$(basename "$found")
      [[ " $missing " == *" $lib "* ]] || continue
      echo "found $lib in $(dirname "$found")"
      [[ ":$ld_path:" == *":$(dirname "$found"):"* ]] || ld_path="$ld_path:$(dirname "$found")"
    done < <(timeout 6 find "${roots[@]}" -maxdepth 6 \( -false "${names[@]}" \) \
               \( -type f -o -type l \) -print 2>/dev/null | tee "$work/found-libs.txt")
    missing=$(missing_libs "$dir/bin")
    if [[ -n "${missing// }" ]]; then
      local older
      older=$(grep -m 1 'libcudart.so.12' "$work/found-libs.txt")
      [[ -n "$older" && "$missing" == *".so.13"* ]] &&
        echo "this machine has CUDA 12 libraries only ($older); the bundle needs CUDA 13's"
      record libraries FAIL $((SECONDS - t0)) "not found on this machine: $missing"
      fail_fast "shared libraries not found: $missing(set LD_LIBRARY_PATH to their folder)"
    fi
  fi
  # cuDNN is opened at the first convolution (dlopen; core/cuda/cuda_conv.cpp), so ldd does
  # not list it: look for libcudnn.so.9 on the path, else where PyTorch's wheels keep theirs.
  local dirs cudnn=""
  IFS=: read -r -a dirs <<<"$ld_path"
  for d in "${dirs[@]}"; do [[ -e "$d/libcudnn.so.9" ]] && cudnn="$d/libcudnn.so.9"; done
  if [[ -z "$cudnn" ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 '; then
    local search=(/usr/local /usr/lib /opt)
    while IFS= read -r d; do [[ -d "$d" ]] && search=("$d" "${search[@]}"); done < <(
      timeout 5 "$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
    cudnn=$(timeout 6 find "${search[@]}" -maxdepth 6 -name libcudnn.so.9 2>/dev/null | head -n 1)
    if [[ -n "$cudnn" ]]; then
      echo "found libcudnn.so.9 in $(dirname "$cudnn")"
      ld_path="$ld_path:$(dirname "$cudnn")"
    else
      echo "libcudnn.so.9 not found: the resnet runs will say so"
    fi
  fi
  # Every CUDA-side soname the binaries need, and where each was found.
  LD_LIBRARY_PATH="$ld_path" ldd "$dir/bin/ddpbench" 2>/dev/null |
    awk '/cuda|cublas|cudnn|nccl|nvToolsExt|nvrtc/ {print "  needs " $1 " => " $3}' | sort -u
  # Symbol versions: a too-old libstdc++ takes lib/compat; a too-old glibc, the bundled loader.
  set_prefix
  local err
  err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null)
  if grep -qE "(GLIBCXX|CXXABI)_[0-9.]+' not found" <<<"$err"; then
    echo "this machine's libstdc++ is too old for the bundle: using $dir/lib/compat"
    ld_path="$dir/lib:$dir/lib/compat:${ld_path#"$dir/lib:"}"
    set_prefix
    err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null)
  fi
  if grep -qE "GLIBC_[0-9.]+' not found" <<<"$err"; then
    loader=$(ls "$dir"/lib/glibc/ld-linux-x86-64.so.* 2>/dev/null | head -n 1)
    if [[ -n "$loader" ]]; then
      echo "this machine's glibc is too old for the bundle: starting binaries with $loader"
      loader_dirs="$dir/lib/glibc:$dir/lib/compat"
      set_prefix
      err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null)
    fi
  fi
  if ! run_bin "$dir/bin/ddpbench" workloads >/dev/null 2>&1; then
    record libraries FAIL $((SECONDS - t0)) "ddpbench does not start: $(head -n 1 <<<"$err")"
    fail_fast "the bundle's ddpbench does not start here: $(head -n 1 <<<"$err")"
  fi
  record libraries PASS $((SECONDS - t0)) "LD_LIBRARY_PATH=$ld_path${loader:+ (bundled loader $loader)}"
}

build_local() {
  local build_dir=${BUILD_DIR:-$root/build/gpu}
  header "build (CUDA, $build_dir)"
  local t0=$SECONDS targets=(ddpbench test_cuda_parity test_dp test_process_group_nccl)
  if ! cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_CUDA=ON \
      > "$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log"
    record build FAIL $((SECONDS - t0)) "configure failed (see $work/build.log)"
    fail_fast "CUDA configure failed (see $work/build.log)"
  fi
  if ! timeout 3600 cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" \
      >> "$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log"
    record build FAIL $((SECONDS - t0)) "build failed (see $work/build.log)"
    fail_fast "CUDA build failed (see $work/build.log)"
  fi
  # Separately: an older tree without bench/micro/cuda.cmake has no such target.
  if timeout 1800 cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target cuda_gemm_bench \
      >> "$work/build.log" 2>&1; then
    targets+=(cuda_gemm_bench)
  else
    echo "cuda_gemm_bench did not build (see $work/build.log); the GEMM step will fail"
  fi
  record build INFO $((SECONDS - t0)) "built ${targets[*]}"
  build_root=$build_dir
}

# Path of binary NAME: the bundle's bin/, or the first match in the build tree.
bin_path() {
  if [[ -n "$prebuilt" ]]; then
    echo "$prebuilt/bin/$1"
  else
    local d
    for d in bench tests tests/impl_dp bench/micro .; do
      [[ -x "$build_root/$d/$1" ]] && { echo "$build_root/$d/$1"; return; }
    done
    find "$build_root" -path '*/CMakeFiles' -prune -o -type f -name "$1" -perm -u+x -print 2>/dev/null |
      sort | head -n 1
  fi
}

if [[ -n "$prebuilt" && -f "$prebuilt" && "$prebuilt" == *.tar.gz ]]; then
  # The archive scripts/gpu_bundle.sh writes (what the device tool carries): unpack it.
  unpack_dir=$(mktemp -d "${TMPDIR:-/tmp}/ddpb-bundle.XXXXXX")
  tar -C "$unpack_dir" -xzf "$prebuilt" || { echo "gpu_check: cannot unpack $prebuilt" >&2; exit 2; }
  prebuilt=$(find "$unpack_dir" -mindepth 2 -maxdepth 2 -type d -name bin -printf '%h\n' | head -n 1)
  [[ -n "$prebuilt" ]] || { echo "gpu_check: $unpack_dir has no bundle (bin/) after unpacking" >&2; exit 2; }
fi
if [[ -n "$prebuilt" ]]; then
  [[ -d "$prebuilt" ]] || { echo "gpu_check: --prebuilt $prebuilt: no such directory" >&2; exit 2; }
  prebuilt=$(cd "$prebuilt" && pwd)
  setup_prebuilt "$prebuilt"
else
  build_local
  clock_start=$SECONDS  # the budget covers the checks, not the build
fi
DDPBENCH=$(bin_path ddpbench)
torch_script="$root/scripts/peer/torch_gpt_step.py"
[[ -n "$prebuilt" && -f "$prebuilt/scripts/peer/torch_gpt_step.py" ]] && torch_script="$prebuilt/scripts/peer/torch_gpt_step.py"
reference_script="${torch_script%/*}/torch_reference.py"
# The presets torch_reference.py builds, from this very binary (scripts/peer/workload_table.py).
workloads_json="$work/workloads.json"
run_bin "$DDPBENCH" workloads --json > "$workloads_json" 2>/dev/null || rm -f "$workloads_json"

selftest=${GPU_CHECK_SELFTEST:-0}
device=cuda:0 dp_devices=cuda:0,cuda:0 steps=10 warmup=3
torch_args=(--device cuda:0 --batch 8 --math "fp32,tf32,bf16" --attention both --warmup 3 --steps 10)
resnet_batch=64
declare -A stand_in=()
if [[ $selftest == 1 ]]; then
  echo "gpu_check: SELFTEST on the CPU: exercises the script only; the results mean nothing"
  device=cpu dp_devices=cpu:0,cpu:1 steps=2 warmup=1
  torch_args=(--device cpu --layers 1 --seq 64 --math fp32 --attention both --warmup 1 --steps 2)
  stand_in=([mlp-wide]=mlp-small [gpt2-small]=gpt-tiny [resnet50]=resnet-tiny)
  resnet_batch=8
fi

# ---- Device ------------------------------------------------------------------------------
header "device"
t0=$SECONDS
gpu_count=0
smi_note=""
if command -v nvidia-smi >/dev/null 2>&1; then
  if smi=$(timeout 20 nvidia-smi -L 2>&1); then
    echo "$smi" | tee "$work/device.txt"
    gpu_count=$(grep -c '^GPU [0-9]' <<<"$smi")
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
      --format=csv 2>/dev/null | tee -a "$work/device.txt"
  else
    smi_note="nvidia-smi -L failed: $(head -n 1 <<<"$smi")"
  fi
else
  smi_note="nvidia-smi not installed"
fi
# One training step on the device: the cheapest proof that our binaries can use it.
probe_device() {
  probe=$(timeout 90 "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" run --mode single \
          --workload mlp-small --device "$device" --steps 1 --warmup 0 --quiet 2>&1)
}
# The CUDA runtime's own reason, as the parity tests' skip message carries it.
cuda_reason() {
  local parity
  parity=$(bin_path test_cuda_parity)
  [[ -n "$parity" ]] || return 0
  timeout 30 "${bin_prefix[@]+"${bin_prefix[@]}"}" "$parity" --gtest_filter=CudaParity.FillAndZero 2>&1 |
    grep -m 1 '^no CUDA device:' | sed 's/^no CUDA device: //'
}
probe_device
probe_rc=$?
if [[ $probe_rc -ne 0 ]]; then
  cuda_why=$(cuda_reason)
  # A driver older than our CUDA 13 runtime: retry with the toolkit's forward-compatibility
  # libcuda (data-center GPUs support it) when this machine has one.
  if [[ "$cuda_why" == *InsufficientDriver* && -z "$loader" ]]; then
    for d in /usr/local/cuda/compat /usr/local/cuda-13*/compat; do
      [[ -e "$d/libcuda.so.1" ]] || continue
      echo "driver too old for CUDA 13 ($cuda_why): retrying with the forward-compatibility driver in $d"
      saved_ld=$ld_path
      ld_path="$d${ld_path:+:$ld_path}"
      [[ -z "$prebuilt" ]] && ld_path="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      set_prefix
      if probe_device; then probe_rc=0; break; fi
      ld_path=$saved_ld
      set_prefix
    done
  fi
fi
if [[ $probe_rc -ne 0 ]]; then
  why=$(grep -m 1 -E 'error|failed' <<<"$probe" || tail -n 1 <<<"$probe")
  [[ $probe_rc == 124 ]] && why="timed out after 90 s"
  [[ -n "$cuda_why" ]] && why="$why; CUDA runtime: $cuda_why"
  record device FAIL $((SECONDS - t0)) "no usable GPU: ${smi_note:+$smi_note; }ddpbench on cuda:0: $why"
  fail_fast "no usable NVIDIA GPU (${smi_note:+$smi_note; }ddpbench on cuda:0: $why)"
fi
(( gpu_count > 0 )) || gpu_count=1  # nvidia-smi missing, but ddpbench ran on cuda:0
[[ $selftest == 1 ]] && echo "(selftest: ran on $device)"
record device PASS $((SECONDS - t0)) "$gpu_count GPU(s): $(head -n 1 "$work/device.txt" 2>/dev/null || echo 'cuda:0 usable')"

# ---- Tests -------------------------------------------------------------------------------
# gtest names on lines like "[  SKIPPED ] Suite.Name (3 ms)", without the summary headers.
gtest_names() {
  grep -E "^\[ +$1 +\] [A-Za-z_]" "$2" | grep -vE '[0-9]+ tests?, listed below' |
    sed -E 's/^\[[^]]*\] //; s/ \(.*//; s/, where .*//' | sort -u | tr '\n' ' '
}

run_gtest() {  # NAME BINARY FILTER WANT_S
  local name=$1 bin=$2 filter=$3 want=$4 t rc
  selected "$name" || return 0
  header "$name"
  if [[ -z "$bin" || ! -x "$bin" ]]; then record "$name" FAIL 0 "binary not found"; return; fi
  if ! t=$(step_timeout "$want"); then record "$name" WARN 0 "not run: time budget exhausted"; return; fi
  local log="$work/$name.log" t0=$SECONDS
  echo "filter: $filter"
  # cuDNN says why an engine or plan fails (Note [cuDNN engine choice]).
  CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr \
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$bin" --gtest_filter="$filter" \
    --gtest_color=no > "$log" 2>&1
  rc=$?
  grep -E '^\[ +(FAILED|SKIPPED) +\] [A-Za-z_]' "$log" | head -n 20
  local passed skipped failed
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  skipped=$(gtest_names SKIPPED "$log")
  failed=$(gtest_names FAILED "$log")
  local secs=$((SECONDS - t0))
  if [[ $rc -ne 0 ]]; then
    record "$name" FAIL "$secs" "$(timeout_text "$rc" "$t")${failed:+; failed: $failed}" "$log"
  elif [[ -n "$skipped" ]]; then
    record "$name" FAIL "$secs" "skipped on a GPU machine (nothing tested): $skipped" "$log"
  elif [[ "${passed:-0}" -eq 0 ]]; then
    record "$name" FAIL "$secs" "no test ran" "$log"
  else
    record "$name" PASS "$secs" "$passed passed, 0 skipped" "$log"
  fi
}

parity_filter='*'
excluded="CudaRuntime.NoDeviceMeansCudaErrorNotCrash"
(( gpu_count < 2 )) && excluded="$excluded:CudaParity.PeerCopy"
echo
echo "excluded as not applicable here ($gpu_count GPU): ${excluded//:/, }"
run_gtest test_cuda_parity "$(bin_path test_cuda_parity)" "$parity_filter-$excluded" 150
run_gtest test_dp_cuda "$(bin_path test_dp)" '*Cuda*' 150
# NCCL group: world 1 and the two-ranks-on-one-GPU refusal on one GPU; more with 2+ GPUs.
nccl_excluded=""
(( gpu_count < 2 )) && nccl_excluded="-*TwoGpus*"
run_gtest test_process_group_nccl "$(bin_path test_process_group_nccl)" "*$nccl_excluded" 120

# ---- Training runs -----------------------------------------------------------------------
run_train() {  # NAME TAG WANT_S ddpbench-run-args...
  local name=$1 tag=$2 want=$3 t rc
  shift 3
  selected "$tag" || return 0
  header "$name"
  if ! t=$(step_timeout "$want"); then record "$name" WARN 0 "not run: time budget exhausted"; return; fi
  local log="$work/$tag.log" t0=$SECONDS
  CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr \
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" run "$@" --steps "$steps" \
    --warmup "$warmup" --quiet --out "$work/$tag.json" > "$log" 2>&1
  rc=$?
  grep -m 1 '^summary:' "$log"
  local secs=$((SECONDS - t0))
  if [[ $rc -ne 0 || ! -f "$work/$tag.json" ]]; then
    record "$name" FAIL "$secs" "$(timeout_text "$rc" "$t"): $(grep -m 1 -E 'error|failed' "$log" || tail -n 1 "$log")" "$log"
  else
    record "$name" PASS "$secs" "$(grep -m 1 -oE 'median step [0-9.]+ ms' "$log")" "$log"
  fi
}

# Tags (file names) keep the GPU workload's name; the record inside names what really ran.
for w in mlp-small mlp-wide gpt-tiny gpt2-small embed; do
  want=60
  [[ $w == gpt2-small || $w == mlp-wide ]] && want=120
  run_train "single $w" "single-$w" "$want" --mode single --workload "${stand_in[$w]:-$w}" --device "$device"
done
run_train "single gpt2-small tf32" single-gpt2-small-tf32 120 --mode single \
  --workload "${stand_in[gpt2-small]:-gpt2-small}" --device "$device" --precision tf32
run_train "single gpt2-small bf16" single-gpt2-small-bf16 120 --mode single \
  --workload "${stand_in[gpt2-small]:-gpt2-small}" --device "$device" --precision bf16
run_train "single gpt2-small flash" single-gpt2-small-flash 120 --mode single \
  --workload "${stand_in[gpt2-small]:-gpt2-small}" --device "$device" --attention flash
run_train "single gpt2-small graph" single-gpt2-small-graph 120 --mode single \
  --workload "${stand_in[gpt2-small]:-gpt2-small}" --device "$device" --cuda-graph
run_train "single resnet50" single-resnet50 120 --mode single \
  --workload "${stand_in[resnet50]:-resnet50}" --device "$device" --global-batch "$resnet_batch"
run_train "single gpt-tiny graph" single-gpt-tiny-graph 60 --mode single \
  --workload gpt-tiny --device "$device" --cuda-graph
run_train "dp mlp-small $dp_devices" dp-mlp-small 60 --mode dp --world-size 2 \
  --devices "$dp_devices" --workload mlp-small
grep -h '^phases' "$work/dp-mlp-small.log" 2>/dev/null | sed 's/^/dp per-phase /'
# DDP: two ranks sharing the GPU must use Gloo (NCCL refuses them); NCCL at world size 1.
run_train "ddp gloo 2 ranks on cuda:0" ddp-gloo-mlp-small 90 --mode ddp --world-size 2 \
  --devices "cuda:0,cuda:0" --backend gloo --workload mlp-small
run_train "ddp nccl world 1" ddp-nccl-mlp-small 60 --mode ddp --world-size 1 --device "$device" \
  --backend nccl --workload mlp-small
# PowerSGD on CUDA: its kernels (orthogonalisation, the gemms) with NCCL at world size 1, and
# its two collectives per bucket over Gloo with two ranks on the GPU, compressing from step 3.
run_train "ddp powersgd nccl world 1" ddp-powersgd-nccl 60 --mode ddp --world-size 1 \
  --device "$device" --backend nccl --workload mlp-small --comm-hook powersgd \
  --powersgd-start-iter 2 --powersgd-rank 2
run_train "ddp powersgd gloo 2 ranks" ddp-powersgd-gloo 90 --mode ddp --world-size 2 \
  --devices "cuda:0,cuda:0" --backend gloo --workload mlp-small --comm-hook powersgd \
  --powersgd-start-iter 2

# ---- Micro-benchmarks: GEMM and batch norm ------------------------------------------------
# run_bench TAG BINARY WANT_S ROWS_REGEX: a plain-main benchmark writing $work/TAG.json.
run_bench() {
  local tag=$1 bin=$2 want=$3 rows=$4 t rc t0=$SECONDS log="$work/$2.log"
  selected "$tag" || return 0
  header "$tag ($bin)"
  local path
  path=$(bin_path "$bin")
  if [[ -z "$path" || ! -x "$path" ]]; then
    record "$tag" FAIL 0 "$bin not built (bench/micro/cuda.cmake)"
  elif ! t=$(step_timeout "$want"); then
    record "$tag" WARN 0 "not run: time budget exhausted"
  else
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$path" --json "$work/$bin.json" \
      > "$log" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      record "$tag" FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(grep -m 1 "$bin:" "$log")" "$log"
    else
      record "$tag" PASS $((SECONDS - t0)) "$(grep -cE "$rows" "$log") rows" "$log"
    fi
  fi
}
run_bench gemm cuda_gemm_bench 150 '^(gpt2-small|mlp-wide) '
run_bench bn-bench cuda_bn_bench 60 '^(nchw|nhwc) '

# ---- PyTorch comparison ------------------------------------------------------------------
torch_py="" torch_info=""
find_torch() {
  local py info probe='import torch; print(f"{torch.__version__} (CUDA {torch.version.cuda}, GPU available: {torch.cuda.is_available()})")'
  for py in "$PYTHON" python3 python /usr/bin/python3; do
    if info=$(timeout 60 "$py" -c "$probe" 2>&1); then torch_py=$py torch_info=$info; return 0; fi
    torch_info="$py: $(tail -n 1 <<<"$info")"
  done
  return 1
}

# gpt2-small, one GPU: PyTorch eager (torch_gpt_step.py) in fp32, tf32 and bf16.
step_pytorch() {
  local t rc t0=$SECONDS log="$work/torch-gpt2-small.log"
  header "gpt2-small vs PyTorch eager"
  if [[ -z "$torch_py" ]] && ! find_torch; then
    record pytorch FAIL $((SECONDS - t0)) "no Python with torch: $torch_info"
  elif ! t=$(step_timeout 180); then
    record pytorch WARN 0 "not run: time budget exhausted"
  else
    echo "$torch_py: torch $torch_info"
    timeout -k 5 "$t" "$torch_py" "$torch_script" "${torch_args[@]}" --out "$work/torch-gpt2-small.json" \
      > /dev/null 2> "$log"
    rc=$?
    tail -n 8 "$log"
    if [[ $rc -ne 0 ]]; then
      record pytorch FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(tail -n 1 "$log")" "$log"
    else
      record pytorch PASS $((SECONDS - t0)) "torch $torch_info" "$log"
    fi
  fi
}

# ResNet-50, one GPU, 64 images, fp32: torchvision's model in PyTorch eager (torch_reference.py).
step_pytorch_resnet50() {
  local t rc t0=$SECONDS log="$work/torch-resnet50.log"
  header "resnet50 vs PyTorch eager"
  if [[ -z "$torch_py" ]] && ! find_torch; then
    record pytorch-resnet50 FAIL 0 "no Python with torch: $torch_info"
  elif ! t=$(step_timeout 90); then
    record pytorch-resnet50 WARN 0 "not run: time budget exhausted"
  else
    timeout -k 5 "$t" "$torch_py" "$reference_script" --workloads-json "$workloads_json" \
      --workload "${stand_in[resnet50]:-resnet50}" \
      --device "${device%%:*}" --global-batch "$resnet_batch" --steps "$steps" --warmup "$warmup" \
      --quiet --out "$work/torch-resnet50.json" > "$log" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      record pytorch-resnet50 FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(tail -n 1 "$log")" "$log"
    else
      record pytorch-resnet50 PASS $((SECONDS - t0)) "$(grep -m 1 -oE 'median step [0-9.]+ ms' "$log")" "$log"
    fi
  fi
}
selected pytorch && step_pytorch
selected pytorch-resnet50 && step_pytorch_resnet50

# ---- Projection and suite on the GPU ------------------------------------------------------
# The projection checked on the GPU: 2 logical ranks on one GPU predicted from the world-size-1
# DDP run (measured topology: the GPU's compute shared by both ranks, Gloo fitted here),
# against the measured 2-rank Gloo run above.
step_projection() {
  local t t0=$SECONDS log="$work/projection.log" detail
  header "projection (2 logical ranks from 1)"
  if [[ ! -f "$work/ddp-nccl-mlp-small.json" || ! -f "$work/ddp-gloo-mlp-small.json" ]]; then
    record projection WARN 0 "not run: a DDP run it needs failed or was not selected"
  elif ! t=$(step_timeout 30); then
    record projection WARN 0 "not run: time budget exhausted"
  elif timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" project \
      "$work/ddp-nccl-mlp-small.json" --devices 2 --json "$work/projection-2.json" > "$log" 2>&1; then
    detail=$(python3 "$script_dir/gpu_check_projection.py" "$work/projection-2.json" \
               "$work/ddp-gloo-mlp-small.json" 2>&1)
    record projection PASS $((SECONDS - t0)) "$detail" "$log"
  else
    record projection FAIL $((SECONDS - t0)) "$(tail -n 1 "$log")" "$log"
  fi
}

# A small suite end to end on CUDA: single, DP and DDP (NCCL) at world size 1 with the
# correctness check against single, the suite record and its HTML report.
step_suite() {
  local t rc t0=$SECONDS log="$work/suite.log"
  header "suite (small, cuda)"
  if [[ -n "$loader" ]]; then
    record suite INFO 0 "not run: binaries start through the bundled glibc loader (runs re-execute ddpbench)"
  elif ! t=$(step_timeout 90); then
    record suite WARN 0 "not run: time budget exhausted"
  else
    printf '{"workloads": ["%s", "%s"], "world_sizes": [1], "steps": 5, "warmup": 2}\n' \
      mlp-small "${stand_in[gpt2-small]:-gpt-tiny}" > "$work/suite-small.json"
    rm -rf "$work/suite"
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" suite "$work/suite-small.json" \
      --device "${device%%:*}" --out "$work/suite" > "$log" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      record suite FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(grep -m 1 -E 'FAIL|failed|error' "$log" || tail -n 1 "$log")" "$log"
    else
      record suite PASS $((SECONDS - t0)) "$(grep -c ' ok ' "$log") runs ok; report in gpu_check.tgz" "$log"
    fi
  fi
}
selected projection && step_projection
selected suite && step_suite

# ---- compute-sanitizer: memcheck, then racecheck (shared-memory races in our kernels) ------
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
parity_bin=$(bin_path test_cuda_parity)
# Racecheck instruments only our kernels (their names hold the namespace "ddpb"), not cuBLAS's
# or cuDNN's: the option's name depends on the sanitizer's version.
kernel_filter=()
if [[ -n "$sanitizer" ]]; then
  if "$sanitizer" --help 2>/dev/null | grep -q -- '--kernel-name'; then
    kernel_filter=(--kernel-name kns=ddpb)
  elif "$sanitizer" --help 2>/dev/null | grep -q -- '--kernel-regex'; then
    kernel_filter=(--kernel-regex kns=ddpb)
  fi
fi
run_sanitizer() {  # TOOL FILTER [SANITIZER-OPTIONS...]
  local tool=$1 filter=$2 t rc summary t0=$SECONDS log="$work/$1.log"
  shift 2
  selected "$tool" || return 0
  header "compute-sanitizer $tool (test_cuda_parity, a few ops)"
  if [[ -z "$sanitizer" ]]; then
    record "$tool" INFO 0 "compute-sanitizer not installed: not run"
  elif [[ -z "$parity_bin" || ! -x "$parity_bin" ]]; then
    record "$tool" FAIL 0 "test_cuda_parity not found"
  elif [[ -n "$loader" ]]; then
    record "$tool" INFO 0 "not run: binaries start through the bundled glibc loader"
  elif ! t=$(step_timeout 120); then
    record "$tool" WARN 0 "not run: time budget exhausted"
  else
    echo "filter: $filter"
    # The sanitizer itself starts with the bundle's libraries on the path (its own are CUDA's).
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$sanitizer" --tool "$tool" \
      --error-exitcode 86 "$@" "$parity_bin" --gtest_filter="$filter" --gtest_color=no > "$log" 2>&1
    rc=$?
    tail -n 5 "$log"
    summary=$(grep -m 1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log")
    if [[ $rc == 124 || $rc == 137 ]]; then
      record "$tool" WARN $((SECONDS - t0)) "timed out after $t s (bounded)" "$log"
    elif grep -qiE 'device not supported|error 999|unsupported device' "$log"; then
      # The sanitizer cannot attach to this GPU or driver: nothing was checked, nothing failed.
      record "$tool" INFO $((SECONDS - t0)) "the sanitizer refuses this device: $(grep -m 1 -iE 'not supported|999' "$log")" "$log"
    elif [[ $rc == 86 ]] || grep -qE 'SUMMARY: [1-9]' <<<"$summary"; then
      record "$tool" FAIL $((SECONDS - t0)) "${summary:-$tool reported errors}" "$log"
    elif [[ $rc -ne 0 ]]; then
      record "$tool" FAIL $((SECONDS - t0)) "exit $rc under $tool" "$log"
    else
      record "$tool" PASS $((SECONDS - t0)) "${summary:-no errors}" "$log"
    fi
  fi
}
run_sanitizer memcheck 'CudaParity.Arithmetic:CudaParity.Activations:CudaParity.Softmax:CudaParity.LayerNorm:CudaParity.Embedding:CudaParity.Attention:CudaParity.CrossEntropy:CudaParity.SgdStep:CudaParity.GemmUnalignedViewsUseTheFallbackCorrectly'
# The kernels that use shared memory (block reductions, attention tiles).
run_sanitizer racecheck 'CudaParity.Softmax:CudaParity.LayerNorm:CudaParity.Attention:CudaParity.CrossEntropy:CudaParity.FlashAttention*:CudaParity.BatchNormReductionsOverManyChunksInBothLayouts' \
  "${kernel_filter[@]+"${kernel_filter[@]}"}"

# ---- Summary -----------------------------------------------------------------------------
header "summary"
export GPU_CHECK_WORK="$work" GPU_CHECK_MODE="${prebuilt:+prebuilt $prebuilt}" GPU_CHECK_BUDGET="$budget"
export GPU_CHECK_ELAPSED=$((SECONDS - clock_start))
[[ -z "$GPU_CHECK_MODE" ]] && GPU_CHECK_MODE="build ${build_root:-?}"
summary_script="$script_dir/gpu_check_summary.py"
[[ -n "$prebuilt" && -f "$prebuilt/scripts/gpu_check_summary.py" ]] && summary_script="$prebuilt/scripts/gpu_check_summary.py"
if "${torch_py:-$PYTHON}" "$summary_script" 2> "$work/summary.log"; then
  summary_done=1
else
  echo "gpu_check: the summary failed ($(tail -n 1 "$work/summary.log")): steps only"
fi

# deliver (the EXIT trap) writes $OUT and prints the last screen.
grep -q $'\tFAIL\t' "$work/steps.tsv" && exit 1
exit 0
