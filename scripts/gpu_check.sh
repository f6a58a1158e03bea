#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, runs the CUDA tests (failing if any skip),
# the training runs (three `ddpbench suite`s), PyTorch side by side, the GEMM and batch-norm
# benchmarks, the projection, the collectives and compute-sanitizer, and writes the evidence.
#
#   scripts/gpu_check.sh                  configure + build with CUDA in build/gpu, then check
#   scripts/gpu_check.sh --prebuilt DIR   use a bundle made by scripts/gpu_bundle.sh, the folder
#                                         or its .tar.gz, which is unpacked first (no build;
#                                         for a GPU machine without our Debian packages)
# Options: --call-limit SECONDS (default $CALL_LIMIT_S or 420): the limit of the call that runs
#          this check (the device tool kills it there); the budget is at most this less 90 s
#          (unpacking, the libraries, the summary and the packing), and a line says so when
#          it caps a larger --budget.
#          --budget SECONDS (default $BUDGET_S, else the call limit less 90: 330): the whole
#          check after the build; every step runs under a timeout capped by what is left, and
#          a step the budget leaves out is WARN (not run), not FAIL. Steps run in the order of
#          their value (Note [GPU check order] in gpu_check/plan.py): the CUDA tests, DDP and
#          DP against single, gpt2-small and resnet50 in ddpbench and PyTorch, GEMM, the rest.
#          The last lines printed are the follow-up command: this script with --only and the
#          tags of what failed or did not run.
#          --only TAG,...: only these steps (globs on: test_cuda_parity, test_dp_cuda,
#          test_dataloader_cuda, test_process_group_nccl, the training runs' names such as
#          single-resnet50 or 'ddp-*' (scripts/gpu_check/plan.py), suite (the world-size-1
#          matrix), gemm, bn-bench, pytorch, pytorch-resnet50, projection, collectives,
#          collectives-mpi, nccl-vs-pytorch, memcheck, racecheck), for a short second call
#          after fixes; libraries and device always run.
# Environment: PYTHON (default python3; the PyTorch steps take the first of $PYTHON, python3,
#   python, /usr/bin/python3 that imports torch); BUILD_DIR (default build/gpu), JOBS;
#   OUT (default ./gpu_check_out); GPU_CHECK_WORK (default $TMPDIR/gpu_check, emptied first).
#   GPU_CHECK_SELFTEST=1 tests this script on a machine without a GPU: no device probe, every
#   run on the CPU with small stand-ins, 2 steps. Its numbers mean nothing and it still fails
#   (the CUDA tests skip, the CUDA runs and benchmarks find no device): it exercises the paths.
#
# What is bash here: the bundle's libraries and loader, the build, the device probe and the
# evidence. The steps are scripts/gpu_check/check.py (steps.py: budget, timeouts, steps.tsv;
# plan.py: the order, the suite files of the training runs; tools.py: what mpirun's and
# compute-sanitizer's output says); summary.py writes the evidence's content.
#   libraries  (--prebuilt) resolves the bundle's shared libraries against this machine: the
#              bundle's lib/ first, then $LD_LIBRARY_PATH and the usual CUDA folders; a soname
#              still missing is looked for in the lib/ folders of pip's nvidia.* packages and
#              torch (gpu_check/libdirs.py asks Python where they are), then by a bounded walk
#              of site-packages, /usr and /opt; lib/compat only if the system libstdc++ is too
#              old, the bundled glibc loader only if the system glibc is. Only our binaries get
#              this path, never Python, mpirun or compute-sanitizer's own libraries.
#   device     nvidia-smi, then a one-step ddpbench run on cuda:0 (retried with the CUDA
#              forward-compatibility driver when the driver is too old). When that run fails
#              but nvidia-smi lists a GPU, the step is FAIL (its output in device-probe.log)
#              and the tests go on, to say more; without a GPU that nvidia-smi sees, the
#              check stops here: one line on stderr, exit 1.
# Exit: 0 when every step passed, 1 otherwise (2: bad arguments).
set -uo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$script_dir/.." && pwd)
prebuilt="" budget=${BUDGET_S:-} call_limit=${CALL_LIMIT_S:-420} only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) prebuilt=${2:?--prebuilt needs a bundle directory or .tar.gz}; shift 2 ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --call-limit) call_limit=${2:?--call-limit needs seconds}; shift 2 ;;
    --only) only=${2:?--only needs step tags, comma-separated}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "${budget:-0}" =~ ^[0-9]+$ ]] || { echo "gpu_check: --budget takes whole seconds" >&2; exit 2; }
[[ "$call_limit" =~ ^[0-9]+$ ]] || { echo "gpu_check: --call-limit takes whole seconds" >&2; exit 2; }
budget_cap=$(( call_limit > 90 ? call_limit - 90 : 0 )) budget_note=""
if [[ -z "$budget" ]]; then
  budget=$budget_cap
elif (( budget > budget_cap )); then
  budget_note="gpu_check: budget capped at $budget_cap s (asked $budget s): the call's limit of"
  budget_note+=" $call_limit s less 90 s for the start, the summary and the packing"
  budget=$budget_cap
fi
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || { echo "gpu_check: no $PYTHON (the steps and the summary are Python)" >&2; exit 2; }
export PYTHONUNBUFFERED=1  # the steps' lines in console.log in the order they happened

OUT=${OUT:-./gpu_check_out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
# Note [GPU check evidence]: every step writes into the scratch folder $work; at the end, and
# on any early exit (the EXIT trap), deliver puts exactly four files into $OUT (no folders):
# gpu_check.json, summary.txt, failures.txt and gpu_check.tgz (all of $work but the suites'
# data/ folders, JPEGs a suite makes anew from its seed, and parameter dumps), because a GPU
# call returns at most 8 files of 16 MiB each, 2 folders deep, and the last 12,000 characters
# of output. The last screen is the targets table, the step table, each failure's head and
# the follow-up command. A hard kill (SIGKILL at the call's limit) runs no trap, so after
# every step's line gpu_check.json, summary.txt and failures.txt of the steps so far are
# refreshed in $OUT (summary.py's refresh, after record here and each step of check.py),
# each by a rename of a temp file in $work, so that $OUT never holds a partial file (on
# another filesystem a dotfile .NAME.partial in $OUT is renamed instead; deliver removes any
# left). The console's output (this script's and check.py's) is teed into $work/console.log.
work=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/gpu_check}
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
rm -f "$OUT"/{gpu_check.json,summary.txt,failures.txt,gpu_check.tgz} "$OUT"/.*.partial
: > "$work/steps.tsv"
# The tees ignore the signals that stop the check, so that deliver's lines still reach them.
exec 3>&1 4>&2
exec > >(trap '' INT TERM HUP; exec tee -a "$work/console.log")
tee_out=$!
exec 2> >(trap '' INT TERM HUP; exec tee -a "$work/console.log" >&2)
tee_err=$!
[[ -n "$budget_note" ]] && echo "$budget_note"
steps_pid=""
clock_start=$SECONDS
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}  # NCCL's warnings, not its INFO chatter, in every log
selftest=${GPU_CHECK_SELFTEST:-0}
device=cuda:0
[[ $selftest == 1 ]] && device=cpu

header() { echo; echo "== $1  (elapsed $((SECONDS - clock_start)) s of $budget s)"; }
# The summary's arguments: how the binaries came, the budget, and the follow-up command (this
# script as it was called, with the same bundle argument; summary.py adds --only TAGS).
again="$0${prebuilt:+ --prebuilt $(printf '%q' "$prebuilt")}"
summary_args=()
set_summary_args() {
  local mode="build ${build_root:-?}"
  [[ -n "$prebuilt" ]] && mode="prebuilt $prebuilt"
  summary_args=(--mode "$mode" --budget "$budget" --elapsed $((SECONDS - clock_start))
                --only "$only" --again "$again")
}
# The evidence of the steps so far into $OUT (Note [GPU check evidence]).
refresh_out() {
  set_summary_args
  "$PYTHON" "$script_dir/gpu_check/summary.py" "$work" "${summary_args[@]}" --publish "$OUT" \
    2>> "$work/summary.log" || echo "gpu_check: refreshing $OUT failed (summary.log)" >&2
}
# record NAME STATUS SECONDS DETAIL [LOG]: a line of steps.tsv (scripts/gpu_check/steps.py).
record() {
  local detail=${4//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${detail//$'\n'/; }" "${5:-}" >> "$work/steps.tsv"
  echo "-- $1: $2${4:+ ($detail)}"
  refresh_out
}
fail_fast() { echo "gpu_check: $1" >&2; exit 1; }

# The temp file that becomes $OUT/NAME by a rename: in $work where one filesystem holds both
# (nothing partial is ever in $OUT), else a dotfile in $OUT that deliver removes if left.
out_tmp() {
  if [[ $(stat -c %d "$work") == "$(stat -c %d "$OUT")" ]]; then echo "$work/.publish-$1"
  else echo "$OUT/.$1.partial"; fi
}
publish() {
  local tmp
  tmp=$(out_tmp "$(basename "$1")")
  cp "$1" "$tmp" && mv -f "$tmp" "$OUT/$(basename "$1")"
}
# gpu_check.tgz: every log and record; not the suites' data/ folders (15 MiB of JPEGs that do
# not compress; the suite makes them from its seed, and its log says how) nor their parameter
# dumps (megabytes of floats that the correctness verdict in suite.json already judged);
# should that still pass the per-file limit, without the files over 1 MiB.
pack() {
  local tmp name
  name=$(basename "$work")
  tmp=$(out_tmp gpu_check.tgz)
  tar -C "$(dirname "$work")" --exclude="$name/suite/*/data" --exclude='*.safetensors' \
    --exclude='.publish-*' -czf "$tmp" "$name" 2>/dev/null
  if (( $(stat -c %s "$tmp" 2>/dev/null || echo 0) > 15 * 1048576 )); then
    (cd "$(dirname "$work")" &&
       find "$name" -path "$name/suite/*/data" -prune -o -type f -size -1048577c \
         ! -name '*.safetensors' ! -name '.publish-*' -print0 | tar --null -T - -czf "$tmp")
  fi
  mv -f "$tmp" "$OUT/gpu_check.tgz"
}
# Back to the console itself, and a bounded wait for the tees to write their last lines.
close_console() {
  exec 1>&3 2>&4 3>&- 4>&-
  local _
  for _ in $(seq 1 50); do
    kill -0 "$tee_out" 2>/dev/null || kill -0 "$tee_err" 2>/dev/null || return 0
    sleep 0.1
  done
}

# The EXIT trap (Note [GPU check evidence]): stop the steps, summarize, pack, publish.
deliver() {
  local rc=$? summary_rc=1 f
  trap - EXIT
  trap '' PIPE  # a console reader gone must not end the delivery
  if [[ -n "$steps_pid" ]]; then kill -TERM "$steps_pid" 2>/dev/null; wait "$steps_pid"; fi
  echo
  set_summary_args
  "$PYTHON" "$script_dir/gpu_check/summary.py" "$work" "${summary_args[@]}" 2> "$work/summary.log"
  summary_rc=$?
  if [[ ! -s "$work/summary.txt" ]]; then  # the summary itself failed: the steps as they are
    echo "gpu_check: the summary failed: $(tail -n 1 "$work/summary.log")" >&2
    cp "$work/steps.tsv" "$work/summary.txt"
    echo "the summary failed; see summary.txt (steps.tsv) and gpu_check.tgz" > "$work/failures.txt"
    cat "$work/steps.tsv"
  fi
  cat "$work/summary.log" >&2
  touch "$work/gpu_check.json"
  for f in gpu_check.json summary.txt failures.txt; do publish "$work/$f"; done
  pack
  rm -f "$OUT"/.*.partial
  (( rc == 0 && summary_rc != 0 )) && rc=1
  grep -q $'\tFAIL\t' "$work/steps.tsv" && rc=1
  echo "gpu_check: exit $rc; wrote $(cd "$OUT" && ls | tr '\n' ' ')in $OUT"
  close_console
  exit "$rc"
}
trap deliver EXIT
trap 'exit 1' INT TERM HUP

# ---- Binaries and their environment ------------------------------------------------------
# run_bin runs our binaries: plain for a local build; with LD_LIBRARY_PATH=$ld_path for a
# bundle; through the bundled glibc loader when this machine's glibc is too old.
ld_path="" loader="" loader_dirs="" bin_prefix=()
run_bin() {
  if [[ -n "$loader" ]]; then bin_prefix=("$loader" --library-path "$loader_dirs:$ld_path")
  elif [[ -n "$ld_path" ]]; then bin_prefix=(env "LD_LIBRARY_PATH=$ld_path")
  else bin_prefix=(); fi
  [[ $# -gt 0 ]] && "${bin_prefix[@]+"${bin_prefix[@]}"}" "$@"
}
# Unresolved sonames of the binaries under $1 with the current ld_path.
missing_libs() {
  local b
  for b in "$1"/*; do LD_LIBRARY_PATH="$ld_path" ldd "$b" 2>/dev/null; done |
    awk '/=> not found/ {print $1}' | sort -u | tr '\n' ' '
}
# find_sonames NAME...: where these sonames are, a path a line: first straight in the lib/
# folders of pip's nvidia.* packages and torch (gpu_check/libdirs.py asks Python's import
# machinery, importing neither), then, for those still missing, one bounded walk of
# site-packages and the system's folders, so that a machine without them fails in seconds.
find_sonames() {
  local d lib left=() names=() roots=() dirs=()
  mapfile -t dirs < <(timeout 10 "$PYTHON" "$script_dir/gpu_check/libdirs.py" 2>/dev/null)
  for lib in "$@"; do
    for d in "${dirs[@]}"; do
      [[ -e "$d/$lib" ]] && { echo "$d/$lib"; continue 2; }
    done
    left+=("$lib")
  done
  (( ${#left[@]} > 0 )) || return 0
  mapfile -t roots < <(timeout 10 "$PYTHON" "$script_dir/gpu_check/libdirs.py" --site 2>/dev/null)
  roots+=(/usr/local /usr/lib /usr/lib64 /opt)
  for lib in "${left[@]}"; do names+=(-o -name "$lib"); done
  timeout 6 find "${roots[@]}" -maxdepth 6 \( -false "${names[@]}" \) \( -type f -o -type l \) \
    -print 2>/dev/null
}

# Sonames neither the bundle nor the loader's default paths provide (CUDA in an unusual place,
# or only inside a pip wheel): found, their folders join ld_path; else the check stops. The
# CUDA 12 runtime is looked for too, to say so when it is all this machine has.
resolve_missing_libs() {
  local dir=$1 t0=$2 found lib missing wanted=()
  missing=$(missing_libs "$dir/bin")
  [[ -n "${missing// }" ]] || return 0
  read -r -a wanted <<<"$missing libcudart.so.12"
  while IFS= read -r found; do
    lib=$(basename "$found")
    [[ " $missing " == *" $lib "* ]] || continue
    echo "found $lib in $(dirname "$found")"
    [[ ":$ld_path:" == *":$(dirname "$found"):"* ]] || ld_path="$ld_path:$(dirname "$found")"
  done < <(find_sonames "${wanted[@]}" | tee "$work/found-libs.txt")
  missing=$(missing_libs "$dir/bin")
  if [[ -n "${missing// }" ]]; then
    grep -q 'libcudart.so.12' "$work/found-libs.txt" && [[ "$missing" == *".so.13"* ]] &&
      echo "this machine has CUDA 12 libraries only; the bundle needs CUDA 13's"
    record libraries FAIL $((SECONDS - t0)) "not found on this machine: $missing"
    fail_fast "shared libraries not found: $missing(set LD_LIBRARY_PATH to their folder)"
  fi
}

# cuDNN is opened at the first convolution (dlopen; core/cuda/cuda_conv.cpp), so ldd does not
# list it: look for libcudnn.so.9 on the path, else where PyTorch's wheels keep theirs.
find_cudnn() {
  local d dirs cudnn=""
  IFS=: read -r -a dirs <<<"$ld_path"
  for d in "${dirs[@]}"; do [[ -e "$d/libcudnn.so.9" ]] && cudnn="$d/libcudnn.so.9"; done
  [[ -z "$cudnn" ]] || return 0
  ldconfig -p 2>/dev/null | grep 'libcudnn.so.9 ' >/dev/null && return 0
  cudnn=$(find_sonames libcudnn.so.9 | head -n 1)
  if [[ -n "$cudnn" ]]; then
    echo "found libcudnn.so.9 in $(dirname "$cudnn")"
    ld_path="$ld_path:$(dirname "$cudnn")"
  else
    echo "libcudnn.so.9 not found: the resnet runs will say so"
  fi
}

setup_prebuilt() {
  local dir=$1 t0=$SECONDS d
  header "libraries (bundle $dir)"
  chmod u+x "$dir"/bin/* "$dir"/lib/glibc/ld-linux* 2>/dev/null || true  # a copy may lose them
  if [[ ! -x "$dir/bin/ddpbench" ]]; then
    record libraries FAIL 0 "$dir/bin/ddpbench missing: not a bundle from scripts/gpu_bundle.sh"
    fail_fast "$dir is not a bundle (no bin/ddpbench)"
  fi
  [[ -f "$dir/MANIFEST.txt" ]] && sed -n '1,6p; /^open mpi:/p' "$dir/MANIFEST.txt"
  ld_path="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d "$d" && ":$ld_path:" != *":$d:"* ]] && ld_path="$ld_path:$d"
  done
  resolve_missing_libs "$dir" "$t0"
  find_cudnn
  LD_LIBRARY_PATH="$ld_path" ldd "$dir/bin/ddpbench" 2>/dev/null |
    awk '/cuda|cublas|cudnn|nccl|nvToolsExt|nvrtc/ {print "  needs " $1 " => " $3}' | sort -u
  # Symbol versions: a too-old libstdc++ takes lib/compat; a too-old glibc, the bundled loader.
  local err
  err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null)
  if grep -qE "(GLIBCXX|CXXABI)_[0-9.]+' not found" <<<"$err"; then
    echo "this machine's libstdc++ is too old for the bundle: using $dir/lib/compat"
    ld_path="$dir/lib:$dir/lib/compat:${ld_path#"$dir/lib:"}"
    err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null)
  fi
  if grep -qE "GLIBC_[0-9.]+' not found" <<<"$err"; then
    loader=$(ls "$dir"/lib/glibc/ld-linux-x86-64.so.* 2>/dev/null | head -n 1)
    loader_dirs="$dir/lib/glibc:$dir/lib/compat"
    [[ -n "$loader" ]] && echo "this machine's glibc is too old for the bundle: starting binaries with $loader"
  fi
  if ! err=$(run_bin "$dir/bin/ddpbench" workloads 2>&1 >/dev/null); then
    record libraries FAIL $((SECONDS - t0)) "ddpbench does not start: $(head -n 1 <<<"$err")"
    fail_fast "the bundle's ddpbench does not start here: $(head -n 1 <<<"$err")"
  fi
  record libraries PASS $((SECONDS - t0)) "LD_LIBRARY_PATH=$ld_path${loader:+ (bundled loader $loader)}"
}

build_local() {
  build_root=${BUILD_DIR:-$root/build/gpu}
  header "build (CUDA, $build_root)"
  local t0=$SECONDS targets=(ddpbench test_cuda_parity test_dp test_dataloader test_process_group_nccl cuda_gemm_bench cuda_bn_bench)
  if ! cmake -S "$root" -B "$build_root" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPBENCH_CUDA=ON \
      > "$work/build.log" 2>&1 ||
     ! timeout 3600 cmake --build "$build_root" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" \
      >> "$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log"
    record build FAIL $((SECONDS - t0)) "the CUDA build failed (see build.log)" "$work/build.log"
    fail_fast "CUDA build failed (see $work/build.log)"
  fi
  record build INFO $((SECONDS - t0)) "built ${targets[*]}"
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
  bin_of() { echo "$prebuilt/bin/$1"; }
else
  build_local
  clock_start=$SECONDS  # the budget covers the checks, not the build
  bin_of() { find "$build_root" -path '*/CMakeFiles' -prune -o -type f -name "$1" -perm -u+x -print | sort | head -n 1; }
fi
DDPBENCH=$(bin_of ddpbench)

# ---- Device ------------------------------------------------------------------------------
header "device"
t0=$SECONDS gpu_count=0 smi_note="" cuda_why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  smi_note="nvidia-smi not installed"
elif smi=$(timeout 20 nvidia-smi -L 2>&1); then
  echo "$smi" | tee "$work/device.txt"
  gpu_count=$(grep -c '^GPU [0-9]' <<<"$smi")
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv 2>/dev/null | tee -a "$work/device.txt"
else
  smi_note="nvidia-smi -L failed: $(head -n 1 <<<"$smi")"
fi
# One training step on the device: the cheapest proof that our binaries can use it. Each try's
# command and whole output go to device-probe.log.
probe_device() {
  local argv rc
  run_bin  # sets bin_prefix
  argv=("${bin_prefix[@]+"${bin_prefix[@]}"}" "$DDPBENCH" run --mode single --workload mlp-small
        --device "$device" --steps 1 --warmup 0 --quiet)
  probe=$(timeout 90 "${argv[@]}" 2>&1)
  rc=$?
  printf '$ %s\n%s\n(exit %s)\n' "${argv[*]}" "$probe" "$rc" >> "$work/device-probe.log"
  return "$rc"
}
probe_device
probe_rc=$?
if [[ $probe_rc -ne 0 ]]; then
  # The CUDA runtime's own reason, as the parity tests' skip message carries it.
  parity_out=$(timeout 30 "${bin_prefix[@]+"${bin_prefix[@]}"}" "$(bin_of test_cuda_parity)" \
                 --gtest_filter=CudaParity.FillAndZero 2>&1)
  printf '$ test_cuda_parity --gtest_filter=CudaParity.FillAndZero\n%s\n' "$parity_out" >> "$work/device-probe.log"
  cuda_why=$(grep -m 1 '^no CUDA device:' <<<"$parity_out" | sed 's/^no CUDA device: //')
  # A driver older than our CUDA 13 runtime: retry with the toolkit's forward-compatibility
  # libcuda (data-center GPUs support it) when this machine has one.
  if [[ "$cuda_why" == *InsufficientDriver* && -z "$loader" ]]; then
    for d in /usr/local/cuda/compat /usr/local/cuda-13*/compat; do
      [[ -e "$d/libcuda.so.1" ]] || continue
      echo "driver too old for CUDA 13 ($cuda_why): retrying with the forward-compatibility driver in $d"
      saved_ld=$ld_path
      ld_path="$d${ld_path:+:$ld_path}"
      [[ -z "$prebuilt" ]] && ld_path="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      if probe_device; then probe_rc=0; break; fi
      ld_path=$saved_ld
    done
  fi
fi
if [[ $probe_rc -ne 0 ]]; then
  why=$(grep -m 1 -E 'error|failed' <<<"$probe" || tail -n 1 <<<"$probe")
  [[ $probe_rc == 124 ]] && why="timed out after 90 s"
  [[ -n "$cuda_why" ]] && why="$why; CUDA runtime: $cuda_why"
  if (( gpu_count == 0 )); then
    record device FAIL $((SECONDS - t0)) "no usable GPU: ${smi_note:+$smi_note; }ddpbench on cuda:0: $why" \
      "$work/device-probe.log"
    fail_fast "no usable NVIDIA GPU (${smi_note:+$smi_note; }ddpbench on cuda:0: $why)"
  fi
  # nvidia-smi sees a GPU: the tests and the rest say more about what fails than this one run.
  record device FAIL $((SECONDS - t0)) \
    "nvidia-smi lists $gpu_count GPU(s), but ddpbench on cuda:0 failed: $why; the steps go on" \
    "$work/device-probe.log"
else
  (( gpu_count > 0 )) || gpu_count=1  # nvidia-smi missing, but ddpbench ran on cuda:0
  [[ $selftest == 1 ]] && echo "gpu_check: SELFTEST on the CPU: exercises the script only; the results mean nothing"
  record device PASS $((SECONDS - t0)) \
    "$gpu_count GPU(s): $(head -n 1 "$work/device.txt" 2>/dev/null || echo "$device usable")" \
    "$work/device-probe.log"
fi

# ---- The steps (scripts/gpu_check/check.py), in the background so that a signal reaches
# this shell at once: the trap then stops them, and deliver summarizes what they left.
set_summary_args
steps_args=(--work "$work" --budget "$budget" --elapsed $((SECONDS - clock_start)) --only "$only"
            --gpus "$gpu_count" --device "$device" --python "$PYTHON"
            --ld-path "$ld_path" --loader "$loader" --loader-dirs "$loader_dirs"
            --out "$OUT" --mode "${summary_args[1]}" --again "$again")
[[ $selftest == 1 ]] && steps_args+=(--selftest)
if [[ -n "$prebuilt" ]]; then steps_args+=(--bin-dir "$prebuilt/bin"); else steps_args+=(--build-root "$build_root"); fi
"$PYTHON" "$script_dir/gpu_check/check.py" "${steps_args[@]}" &
steps_pid=$!
wait "$steps_pid"
steps_rc=$?
steps_pid=""
exit "$steps_rc"  # deliver (the EXIT trap) summarizes, packs and sets the exit status
