#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, runs the CUDA tests (failing if any skip),
# short training runs, the GEMM table and the gpt2-small comparison with PyTorch, and prints
# a summary that is also written as JSON.
#
#   scripts/gpu_check.sh                  configure + build with CUDA in build/gpu, then check
#   scripts/gpu_check.sh --prebuilt DIR   use a bundle made by scripts/gpu_bundle.sh, the folder
#                                         or its .tar.gz, which is unpacked first (no build;
#                                         for a GPU machine without our Debian packages)
# Options: --budget SECONDS (default $BUDGET_S or 330): the whole check after the build;
#          every step runs under `timeout`, capped by what is left of the budget. The steps
#          run in the order of their value (binaries and libraries, the CUDA tests, the runs
#          and GEMMs of the GPU targets table, PyTorch side by side, then the suite and
#          compute-sanitizer only with the time that remains), so that with the machine's
#          start the check fits a 15-minute GPU window twice: at most 6 minutes.
# Environment: OUT (default ./gpu_check_out) gets the logs, every run record and
#   gpu_check.json; PYTHON (default python3; the PyTorch step takes the first of $PYTHON,
#   python3, python, /usr/bin/python3 that imports torch);
#   BUILD_DIR (default build/gpu), JOBS (build parallelism, default nproc).
#   GPU_CHECK_SELFTEST=1 tests this script on a machine without a GPU: no device probe, every
#   run on the CPU with small stand-ins (mlp-small for mlp-wide, gpt-tiny for gpt2-small, a
#   1-layer seq-64 PyTorch model), 2 steps. Its numbers mean nothing and it still fails (the
#   CUDA tests skip, cuda_gemm_bench finds no device): it only exercises every code path.
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
#   gemm        cuda_gemm_bench: ddpb::ops::gemm vs cuBLAS on gpt2-small/mlp-wide shapes
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
#   racecheck   compute-sanitizer --tool racecheck on the shared-memory kernels' tests
#               (last, so that a slow sanitizer cannot eat the budget of the rest; a timeout
#               is a warning, a reported error fails the check)
#   summary     tables on stdout and $OUT/gpu_check.json
# Exit: 0 when every step passed, 1 otherwise (2: bad arguments).
set -uo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$script_dir/.." && pwd)
prebuilt=""
budget=${BUDGET_S:-330}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) prebuilt=${2:?--prebuilt needs a bundle directory or .tar.gz}; shift 2 ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2
              [[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget takes whole seconds" >&2; exit 2; } ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-./gpu_check_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
: > "$OUT/steps.tsv"
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
# record NAME STATUS SECONDS DETAIL: STATUS is PASS, FAIL, WARN or INFO (only FAIL fails).
record() {
  local detail=${4//$'\t'/ }
  detail=${detail//$'\n'/; }
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$detail" >> "$OUT/steps.tsv"
  echo "-- $1: $2${4:+ ($detail)}"
}
# $OUT/gpu_check.json from steps.tsv alone (an early stop, or no Python for the full summary).
write_steps_json() {
  local n s secs d sep=""
  {
    printf '{"schema_version": 1, "kind": "gpu_check", "ok": %s, "steps": [' \
      "$(grep -q $'\tFAIL\t' "$OUT/steps.tsv" && echo false || echo true)"
    while IFS=$'\t' read -r n s secs d; do
      d=${d//\\/\\\\}
      printf '%s{"step": "%s", "status": "%s", "seconds": %s, "detail": "%s"}' "$sep" "$n" "$s" "$secs" "${d//\"/\\\"}"
      sep=", "
    done < "$OUT/steps.tsv"
    printf ']}\n'
  } > "$OUT/gpu_check.json"
}
# Stops the check: one line on stderr, the steps so far in gpu_check.json, exit 1.
fail_fast() {
  write_steps_json
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
               \( -type f -o -type l \) -print 2>/dev/null | tee "$OUT/found-libs.txt")
    missing=$(missing_libs "$dir/bin")
    if [[ -n "${missing// }" ]]; then
      local older
      older=$(grep -m 1 'libcudart.so.12' "$OUT/found-libs.txt")
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
      > "$OUT/build.log" 2>&1; then
    tail -n 30 "$OUT/build.log"
    record build FAIL $((SECONDS - t0)) "configure failed (see $OUT/build.log)"
    fail_fast "CUDA configure failed (see $OUT/build.log)"
  fi
  if ! timeout 3600 cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" \
      >> "$OUT/build.log" 2>&1; then
    tail -n 30 "$OUT/build.log"
    record build FAIL $((SECONDS - t0)) "build failed (see $OUT/build.log)"
    fail_fast "CUDA build failed (see $OUT/build.log)"
  fi
  # Separately: an older tree without bench/micro/cuda.cmake has no such target.
  if timeout 1800 cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target cuda_gemm_bench \
      >> "$OUT/build.log" 2>&1; then
    targets+=(cuda_gemm_bench)
  else
    echo "cuda_gemm_bench did not build (see $OUT/build.log); the GEMM step will fail"
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
    echo "$smi" | tee "$OUT/device.txt"
    gpu_count=$(grep -c '^GPU [0-9]' <<<"$smi")
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
      --format=csv 2>/dev/null | tee -a "$OUT/device.txt"
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
record device PASS $((SECONDS - t0)) "$gpu_count GPU(s): $(head -n 1 "$OUT/device.txt" 2>/dev/null || echo 'cuda:0 usable')"

# ---- Tests -------------------------------------------------------------------------------
# gtest names on lines like "[  SKIPPED ] Suite.Name (3 ms)", without the summary headers.
gtest_names() {
  grep -E "^\[ +$1 +\] [A-Za-z_]" "$2" | grep -vE '[0-9]+ tests?, listed below' |
    sed -E 's/^\[[^]]*\] //; s/ \(.*//; s/, where .*//' | sort -u | tr '\n' ' '
}

run_gtest() {  # NAME BINARY FILTER WANT_S
  local name=$1 bin=$2 filter=$3 want=$4 t rc
  header "$name"
  if [[ -z "$bin" || ! -x "$bin" ]]; then record "$name" FAIL 0 "binary not found"; return; fi
  if ! t=$(step_timeout "$want"); then record "$name" FAIL 0 "not run: time budget exhausted"; return; fi
  local log="$OUT/$name.log" t0=$SECONDS
  echo "filter: $filter"
  timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$bin" --gtest_filter="$filter" \
    --gtest_color=no 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local passed skipped failed
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  skipped=$(gtest_names SKIPPED "$log")
  failed=$(gtest_names FAILED "$log")
  local secs=$((SECONDS - t0))
  if [[ $rc -ne 0 ]]; then
    record "$name" FAIL "$secs" "$(timeout_text "$rc" "$t")${failed:+; failed: $failed}"
  elif [[ -n "$skipped" ]]; then
    record "$name" FAIL "$secs" "skipped on a GPU machine (nothing tested): $skipped"
  elif [[ "${passed:-0}" -eq 0 ]]; then
    record "$name" FAIL "$secs" "no test ran"
  else
    record "$name" PASS "$secs" "$passed passed, 0 skipped"
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
  header "$name"
  if ! t=$(step_timeout "$want"); then record "$name" FAIL 0 "not run: time budget exhausted"; return; fi
  local log="$OUT/$tag.log" t0=$SECONDS
  timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" run "$@" --steps "$steps" \
    --warmup "$warmup" --quiet --out "$OUT/$tag.json" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local secs=$((SECONDS - t0))
  if [[ $rc -ne 0 || ! -f "$OUT/$tag.json" ]]; then
    record "$name" FAIL "$secs" "$(timeout_text "$rc" "$t"): $(grep -m 1 -E 'error|failed' "$log" || tail -n 1 "$log")"
  else
    record "$name" PASS "$secs" "$(grep -m 1 -oE 'median step [0-9.]+ ms' "$log")"
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
grep -h '^phases' "$OUT/dp-mlp-small.log" 2>/dev/null | sed 's/^/dp per-phase /'
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

# ---- GEMM table --------------------------------------------------------------------------
header "gemm table (cuda_gemm_bench)"
gemm_bin=$(bin_path cuda_gemm_bench)
t0=$SECONDS
if [[ -z "$gemm_bin" || ! -x "$gemm_bin" ]]; then
  record gemm FAIL 0 "cuda_gemm_bench not built (include bench/micro/cuda.cmake from bench/micro/CMakeLists.txt)"
elif ! t=$(step_timeout 150); then
  record gemm FAIL 0 "not run: time budget exhausted"
else
  timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$gemm_bin" --json "$OUT/cuda_gemm_bench.json" \
    2>&1 | tee "$OUT/cuda_gemm_bench.log"
  rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]]; then
    record gemm FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(grep -m 1 'cuda_gemm_bench:' "$OUT/cuda_gemm_bench.log")"
  else
    record gemm PASS $((SECONDS - t0)) "$(grep -c '^gpt2-small\|^mlp-wide' "$OUT/cuda_gemm_bench.log") rows"
  fi
fi

# ---- PyTorch comparison ------------------------------------------------------------------
header "gpt2-small vs PyTorch eager"
t0=$SECONDS
torch_py="" torch_info=""
torch_probe='import torch; print(f"{torch.__version__} (CUDA {torch.version.cuda}, GPU available: {torch.cuda.is_available()})")'
for py in "$PYTHON" python3 python /usr/bin/python3; do
  if info=$(timeout 60 "$py" -c "$torch_probe" 2>&1); then torch_py=$py torch_info=$info; break; fi
  torch_info="$py: $(tail -n 1 <<<"$info")"
done
if [[ -z "$torch_py" ]]; then
  record pytorch FAIL $((SECONDS - t0)) "no Python with torch: $torch_info"
elif ! t=$(step_timeout 180); then
  record pytorch FAIL 0 "not run: time budget exhausted"
else
  echo "$torch_py: torch $torch_info"
  timeout -k 5 "$t" "$torch_py" "$torch_script" "${torch_args[@]}" --out "$OUT/torch-gpt2-small.json" \
    > /dev/null 2> "$OUT/torch-gpt2-small.log"
  rc=$?
  cat "$OUT/torch-gpt2-small.log"
  if [[ $rc -ne 0 ]]; then
    record pytorch FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(tail -n 1 "$OUT/torch-gpt2-small.log")"
  else
    record pytorch PASS $((SECONDS - t0)) "torch $torch_info"
  fi
fi

# ResNet-50, one GPU, 64 images, fp32: torchvision's model in PyTorch eager (torch_reference.py).
header "resnet50 vs PyTorch eager"
t0=$SECONDS
if [[ -z "$torch_py" ]]; then
  record pytorch-resnet50 FAIL 0 "no Python with torch"
elif ! t=$(step_timeout 90); then
  record pytorch-resnet50 FAIL 0 "not run: time budget exhausted"
else
  timeout -k 5 "$t" "$torch_py" "$reference_script" --workload "${stand_in[resnet50]:-resnet50}" \
    --device "${device%%:*}" --global-batch "$resnet_batch" --steps "$steps" --warmup "$warmup" \
    --quiet --out "$OUT/torch-resnet50.json" > "$OUT/torch-resnet50.log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    record pytorch-resnet50 FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(tail -n 1 "$OUT/torch-resnet50.log")"
  else
    record pytorch-resnet50 PASS $((SECONDS - t0)) "$(grep -m 1 -oE 'median step [0-9.]+ ms' "$OUT/torch-resnet50.log")"
  fi
fi

# ---- Suite on the GPU ----------------------------------------------------------------------
# The projection checked on the GPU: 2 logical ranks on one GPU predicted from the world-size-1
# DDP run (measured topology: the GPU's compute shared by both ranks, Gloo fitted here),
# against the measured 2-rank Gloo run above.
header "projection (2 logical ranks from 1)"
t0=$SECONDS
if [[ ! -f "$OUT/ddp-nccl-mlp-small.json" || ! -f "$OUT/ddp-gloo-mlp-small.json" ]]; then
  record projection WARN 0 "not run: a DDP run it needs failed"
elif ! t=$(step_timeout 30); then
  record projection WARN 0 "not run: time budget exhausted"
elif timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" project \
    "$OUT/ddp-nccl-mlp-small.json" --devices 2 --json "$OUT/projection-2.json" \
    > "$OUT/projection.log" 2>&1; then
  detail=$(python3 - "$OUT/projection-2.json" "$OUT/ddp-gloo-mlp-small.json" <<'PY' 2>&1
import json, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
pred = next(x for x in p["workloads"][0]["points"] if x["devices"] == 2)["ddp"]["step_ms"]
got = m["summary"]["step_time_ms"]["median"]
print(f"predicted {pred:.3f} ms, measured {got:.3f} ms, error {100 * (pred / got - 1):+.1f}%")
PY
)
  record projection PASS $((SECONDS - t0)) "$detail"
else
  record projection FAIL $((SECONDS - t0)) "$(tail -n 1 "$OUT/projection.log")"
fi

# A small suite end to end on CUDA: single, DP and DDP (NCCL) at world size 1 with the
# correctness check against single, the suite record and its HTML report.
header "suite (small, cuda)"
t0=$SECONDS
if [[ -n "$loader" ]]; then
  record suite INFO 0 "not run: binaries start through the bundled glibc loader (runs re-execute ddpbench)"
elif ! t=$(step_timeout 90); then
  record suite WARN 0 "not run: time budget exhausted"
else
  printf '{"workloads": ["%s", "%s"], "world_sizes": [1], "steps": 5, "warmup": 2}\n' \
    mlp-small "${stand_in[gpt2-small]:-gpt-tiny}" > "$OUT/suite-small.json"
  rm -rf "$OUT/suite"
  timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" suite "$OUT/suite-small.json" \
    --device "${device%%:*}" --out "$OUT/suite" > "$OUT/suite.log" 2>&1
  rc=$?
  tail -n 14 "$OUT/suite.log"
  if [[ $rc -ne 0 ]]; then
    record suite FAIL $((SECONDS - t0)) "$(timeout_text "$rc" "$t"): $(grep -m 1 -E 'FAIL|failed|error' "$OUT/suite.log" || tail -n 1 "$OUT/suite.log")"
  else
    record suite PASS $((SECONDS - t0)) "$(grep -c ' ok ' "$OUT/suite.log") runs ok; report $OUT/suite/report.html"
  fi
fi

# ---- compute-sanitizer: memcheck, then racecheck (shared-memory races in our kernels) ------
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
parity_bin=$(bin_path test_cuda_parity)
run_sanitizer() {  # TOOL FILTER
  local tool=$1 filter=$2 t rc summary t0=$SECONDS
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
    timeout -k 5 "$t" "${bin_prefix[@]+"${bin_prefix[@]}"}" "$sanitizer" --tool "$tool" --error-exitcode 86 \
      "$parity_bin" --gtest_filter="$filter" --gtest_color=no \
      > "$OUT/$tool.log" 2>&1
    rc=$?
    tail -n 15 "$OUT/$tool.log"
    summary=$(grep -m 1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/$tool.log")
    if [[ $rc == 124 || $rc == 137 ]]; then
      record "$tool" WARN $((SECONDS - t0)) "timed out after $t s (bounded; see $OUT/$tool.log)"
    elif [[ $rc == 86 ]] || grep -qE 'SUMMARY: [1-9]' <<<"$summary"; then
      record "$tool" FAIL $((SECONDS - t0)) "${summary:-$tool reported errors}"
    elif [[ $rc -ne 0 ]]; then
      record "$tool" FAIL $((SECONDS - t0)) "exit $rc under $tool (see $OUT/$tool.log)"
    else
      record "$tool" PASS $((SECONDS - t0)) "${summary:-no errors}"
    fi
  fi
}
run_sanitizer memcheck 'CudaParity.Arithmetic:CudaParity.Activations:CudaParity.Softmax:CudaParity.LayerNorm:CudaParity.Embedding:CudaParity.Attention:CudaParity.CrossEntropy:CudaParity.SgdStep:CudaParity.GemmUnalignedViewsUseTheFallbackCorrectly'
# The kernels that use shared memory (block reductions, attention tiles).
run_sanitizer racecheck 'CudaParity.Softmax:CudaParity.LayerNorm:CudaParity.Attention:CudaParity.CrossEntropy'

# ---- Summary -----------------------------------------------------------------------------
header "summary"
export GPU_CHECK_OUT="$OUT" GPU_CHECK_MODE="${prebuilt:+prebuilt $prebuilt}" GPU_CHECK_BUDGET="$budget"
export GPU_CHECK_ELAPSED=$((SECONDS - clock_start))
[[ -z "$GPU_CHECK_MODE" ]] && GPU_CHECK_MODE="build ${build_root:-?}"
if ! "${torch_py:-$PYTHON}" - <<'PY'
import json, os, pathlib, platform, statistics, datetime

out = pathlib.Path(os.environ["GPU_CHECK_OUT"])
def load(name):
    p = out / name
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None

steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, status, secs, detail = (line.split("\t") + ["", "", "", ""])[:4]
    steps.append({"step": name, "status": status, "seconds": int(secs or 0), "detail": detail})
ok = all(s["status"] != "FAIL" for s in steps)

def compute_ms(rec):
    """Median over measured steps of the step time minus the data phase."""
    v = [s["time_ms"] - s["phases_ms"].get("data", 0.0) for s in rec["steps"] if s.get("measured")]
    return statistics.median(v) if v else float("nan")

training = []
for tag in ["single-mlp-small", "single-mlp-wide", "single-gpt-tiny", "single-gpt2-small",
            "single-gpt2-small-tf32", "single-gpt2-small-bf16", "single-gpt2-small-flash",
            "single-gpt2-small-graph", "single-gpt-tiny-graph", "single-embed", "dp-mlp-small",
            "single-resnet50"]:
    r = load(tag + ".json")
    if not r:
        continue
    s = r["summary"]
    training.append({
        "run": tag, "workload": r["workload"]["name"], "mode": r["mode"]["name"],
        "devices": r["mode"]["devices"], "math": r["config"].get("precision", r["config"].get("math", "fp32")),
        "attention": r["config"].get("attention", "math"),
        "global_batch": r["config"]["global_batch"],
        "step_ms_median": s["step_time_ms"]["median"], "compute_ms_median": compute_ms(r),
        "samples_per_s": s["samples_per_s"], "tokens_per_s": s["tokens_per_s"],
        "tflops": s["achieved_flops_per_s"] / 1e12,
        "mfu": s.get("mfu", {}).get("mfu"), "mfu_source": s.get("mfu", {}).get("source"),
        "peak_mib": max(m["peak_bytes"] for m in r["memory"]) / 1048576.0,
        "first_loss": s["first_loss"], "last_loss": s["last_loss"],
        "phases_median_ms": {p["phase"]: p["median_ms"] for p in s["phases_median_ms"]},
    })

gemm = load("cuda_gemm_bench.json")
torch_rec = load("torch-gpt2-small.json")
vs_torch = []
if torch_rec:
    # (row label, ddpbench run, PyTorch precision): flash is ddpbench --attention flash in fp32.
    for label, tag, math in (("fp32", "single-gpt2-small", "fp32"),
                             ("tf32", "single-gpt2-small-tf32", "tf32"),
                             ("bf16", "single-gpt2-small-bf16", "bf16"),
                             ("flash", "single-gpt2-small-flash", "fp32")):
        ours = next((t for t in training if t["run"] == tag), None)
        row = {"math": label, "ddpbench_compute_ms": ours["compute_ms_median"] if ours else None,
               "ddpbench_step_ms": ours["step_ms_median"] if ours else None,
               "ddpbench_peak_mib": ours["peak_mib"] if ours else None}
        for r in torch_rec["results"]:
            if r["math"] == math:
                row[f"pytorch_{r['attention']}_ms"] = r["step_time_ms"]["median"]
                if ours:
                    row[f"ratio_vs_{r['attention']}"] = ours["compute_ms_median"] / r["step_time_ms"]["median"]
        vs_torch.append(row)

graph_rows = []
for eager_tag, graph_tag in (("single-gpt-tiny", "single-gpt-tiny-graph"),
                             ("single-gpt2-small", "single-gpt2-small-graph")):
    e = next((t for t in training if t["run"] == eager_tag), None)
    g = next((t for t in training if t["run"] == graph_tag), None)
    if e and g:
        # Replays must train like eager steps: every step's loss within 1e-3 (relative; not
        # bitwise, atomics make the embedding and some reductions order-dependent).
        el = [s["loss"] for s in load(eager_tag + ".json")["steps"]]
        gl = [s["loss"] for s in load(graph_tag + ".json")["steps"]]
        worst = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(el, gl)), default=float("inf"))
        same = len(el) == len(gl) and worst <= 1e-3
        graph_rows.append({"workload": e["workload"], "eager_ms": e["compute_ms_median"],
                           "graph_ms": g["compute_ms_median"],
                           "ratio": g["compute_ms_median"] / e["compute_ms_median"],
                           "losses_match": same, "worst_loss_rel_diff": worst})
        if not same:
            ok = False
            detail = f"{graph_tag}: losses differ from {eager_tag} by up to {worst:.2e} (relative)"
            steps.append({"step": "cuda-graph losses", "status": "FAIL", "seconds": 0,
                          "detail": detail})
            with open(out / "steps.tsv", "a") as f:  # the exit status reads steps.tsv
                f.write(f"cuda-graph losses\tFAIL\t0\t{detail}\n")

# The performance issue's GPU targets, each with what was measured: printed last, and in the
# JSON as "targets". status: met / not met / reported (no threshold) / not measured.
def by_run(tag):
    return next((t for t in training if t["run"] == tag), None)

targets = []
def target(name, goal, value, text, met=None):
    status = "not measured" if value is None else ("reported" if met is None else
                                                   ("met" if met else "not met"))
    targets.append({"target": name, "goal": goal, "value": value, "measured": text,
                    "status": status})

if gemm:
    for s in gemm["step_summary"]:
        target(f"GEMM step time vs cuBLAS, {s['workload']} {s['math']}", ">= 0.85",
               s["ratio"], f"{s['ratio']:.3f}", s["ratio"] >= 0.85)
else:
    target("GEMM step time vs cuBLAS", ">= 0.85", None, "-")
for r in vs_torch:
    v = r.get("ratio_vs_matmul")
    target(f"gpt2-small step vs PyTorch eager ({r['math']})", "<= 0.8", v,
           f"{v:.3f}" if v is not None else "-", None if v is None else v <= 0.8)
resnet, torch_resnet = by_run("single-resnet50"), load("torch-resnet50.json")
if resnet and torch_resnet:
    v = resnet["step_ms_median"] / torch_resnet["summary"]["step_time_ms"]["median"]
    target("resnet50 step vs PyTorch eager (fp32, 64 images)", "<= 1.0", v, f"{v:.3f}", v <= 1.0)
else:
    target("resnet50 step vs PyTorch eager (fp32, 64 images)", "<= 1.0", None, "-")
for tag in ("single-gpt2-small", "single-gpt2-small-tf32", "single-gpt2-small-bf16"):
    t = by_run(tag)
    mfu = t and t["mfu"]
    target(f"MFU, {tag}", "report", mfu, f"{100 * mfu:.1f}%" if mfu else "-")
single, ddp1 = by_run("single-mlp-small"), load("ddp-nccl-mlp-small.json")
if single and ddp1:
    over = compute_ms(ddp1) / single["compute_ms_median"] - 1
    target("DDP world size 1 (NCCL) overhead over single, mlp-small", "<= 2%", over,
           f"{100 * over:.1f}%", over <= 0.02)
else:
    target("DDP world size 1 (NCCL) overhead over single", "<= 2%", None, "-")
ddp2 = load("ddp-gloo-mlp-small.json")
comm = (ddp2 or {}).get("summary", {}).get("comm")
if comm:
    target("DDP 2 ranks on one GPU (Gloo): overlap ratio", "> 0.5", comm["overlap_ratio"],
           f"{comm['overlap_ratio']:.2f} (exposed {comm['comm_exposed_ms']:.2f} of "
           f"{comm['comm_ms']:.2f} ms)", comm["overlap_ratio"] > 0.5)
else:
    target("DDP 2 ranks on one GPU (Gloo): overlap ratio", "> 0.5", None, "-")
for g in graph_rows:
    target(f"--cuda-graph step / eager, {g['workload']}", "report", g["ratio"],
           f"{g['ratio']:.3f}" + ("" if g["losses_match"] else " (losses differ!)"))
flash, plain = by_run("single-gpt2-small-flash"), by_run("single-gpt2-small")
if flash and plain:
    target("flash attention: step and peak memory / math attention, gpt2-small", "report",
           flash["compute_ms_median"] / plain["compute_ms_median"],
           f"time {flash['compute_ms_median'] / plain['compute_ms_median']:.3f}, "
           f"peak {flash['peak_mib']:.0f} / {plain['peak_mib']:.0f} MiB")

def f(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"

print(f"{'step':<30} {'status':<6} {'s':>4}  detail")
for s in steps:
    print(f"{s['step']:<30} {s['status']:<6} {s['seconds']:>4}  {s['detail'][:110]}")
if training:
    cfg = load(training[0]["run"] + ".json")["config"]
    print(f"\ntraining ({cfg['steps']} measured steps after {cfg['warmup']} warm-up; medians; "
          "compute = step - data phase)")
    print(f"{'run':<24} {'math':<4} {'batch':>5} {'step ms':>9} {'compute':>9} {'samples/s':>10} "
          f"{'tokens/s':>10} {'TFLOP/s':>8} {'MFU %':>6} {'peak MiB':>9}  loss")
    for t in training:
        print(f"{t['run']:<24} {t['math']:<4} {t['global_batch']:>5} {t['step_ms_median']:>9.2f} "
              f"{t['compute_ms_median']:>9.2f} {t['samples_per_s']:>10.1f} {t['tokens_per_s']:>10.0f} "
              f"{t['tflops']:>8.2f} {f(t['mfu'] and 100 * t['mfu'], '6.1f'):>6} {t['peak_mib']:>9.0f}  "
              f"{t['first_loss']:.3f} -> {t['last_loss']:.3f}")
    sources = sorted({t["mfu_source"] for t in training if t["mfu_source"]})
    if sources:
        print("MFU = model training FLOPs/s over the datasheet peak: " + "; ".join(sources))
    for t in training:
        if t["mode"] == "dp":
            print(f"dp {t['workload']} on {t['devices']}: " +
                  " ".join(f"{k} {v:.2f}" for k, v in t["phases_median_ms"].items()) + " (median ms)")
if graph_rows:
    print("\n--cuda-graph: the steady-state step captured once and replayed (compute medians; "
          "the launch overhead a graph removes)")
    for r in graph_rows:
        print(f"{r['workload']:<11} eager {r['eager_ms']:9.2f} ms  graph {r['graph_ms']:9.2f} ms  "
              f"ratio {r['ratio']:.3f}  losses {'match' if r['losses_match'] else 'DIFFER'} "
              f"(worst {r['worst_loss_rel_diff']:.1e})")
if gemm:
    print("\nGEMM time of one training step, ddpb::ops::gemm vs cuBLAS (cuda_gemm_bench; ratio = throughput ddpbench/cuBLAS)")
    print(f"{'workload':<11} {'math':<4} {'ddpbench ms':>12} {'cuBLAS ms':>10} {'ddpb TF/s':>10} {'cuBLAS TF/s':>12} {'ratio':>6}")
    for s in gemm["step_summary"]:
        print(f"{s['workload']:<11} {s['math']:<4} {s['ddpbench_ms']:>12.3f} {s['cublas_ms']:>10.3f} "
              f"{s['ddpbench_tflops']:>10.2f} {s['cublas_tflops']:>12.2f} {s['ratio']:>6.3f}")
if vs_torch:
    print("\ngpt2-small batch 8, single GPU: ddpbench compute time / PyTorch eager step time (medians; < 1 = ddpbench faster)")
    print("(flash: ddpbench --attention flash, fp32, against PyTorch fp32)")
    print(f"{'math':<5} {'ddpbench ms':>12} {'peak MiB':>9} {'torch matmul':>13} {'ratio':>6} {'torch sdpa':>11} {'ratio':>6}")
    for r in vs_torch:
        print(f"{r['math']:<5} {f(r['ddpbench_compute_ms'], '12.2f'):>12} {f(r.get('ddpbench_peak_mib'), '9.0f'):>9} "
              f"{f(r.get('pytorch_matmul_ms'), '13.2f'):>13} "
              f"{f(r.get('ratio_vs_matmul'), '6.3f'):>6} {f(r.get('pytorch_sdpa_ms'), '11.2f'):>11} "
              f"{f(r.get('ratio_vs_sdpa'), '6.3f'):>6}")

print("\nperformance targets (GPU)")
print(f"{'target':<66} {'goal':<7} {'measured':<34} status")
for t in targets:
    print(f"{t['target'][:66]:<66} {t['goal']:<7} {t['measured'][:34]:<34} {t['status']}")

device = (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else ""
record = {
    "schema_version": 1,
    "kind": "gpu_check",
    "ok": ok,
    "context": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "host": platform.node(), "mode": os.environ["GPU_CHECK_MODE"], "device": device,
                "budget_s": int(os.environ["GPU_CHECK_BUDGET"]),
                "elapsed_s": int(os.environ["GPU_CHECK_ELAPSED"])},
    "steps": steps,
    "training": training,
    "cuda_graph": graph_rows,
    "targets": targets,
    "gemm": {"step_summary": gemm["step_summary"], "rows": gemm["rows"], "context": gemm["context"]} if gemm else None,
    "vs_pytorch": {"rows": vs_torch, "pytorch": torch_rec["context"] if torch_rec else None,
                   "attention_note": "matmul = q k^T, masked softmax, @ v (ddpbench's algorithm); "
                                     "sdpa = F.scaled_dot_product_attention(is_causal=True)"},
}
tmp = out / "gpu_check.json.tmp"
tmp.write_text(json.dumps(record, indent=2) + "\n")
tmp.replace(out / "gpu_check.json")
print(f"\ngpu_check: {'PASS' if ok else 'FAIL'}; wrote {out / 'gpu_check.json'}")
PY
then
  # No Python: the step table, and a minimal JSON from the same rows.
  column -t -s $'\t' "$OUT/steps.tsv" 2>/dev/null || cat "$OUT/steps.tsv"
  write_steps_json
  echo "gpu_check: wrote $OUT/gpu_check.json (no Python: steps only)"
fi

if grep -q $'\tFAIL\t' "$OUT/steps.tsv"; then
  echo "gpu_check: FAILED: $(awk -F'\t' '$2 == "FAIL" {printf "%s%s", sep, $1; sep=", "}' "$OUT/steps.tsv")" >&2
  exit 1
fi
exit 0
