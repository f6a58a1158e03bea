#!/usr/bin/env bash
# The GPU check is run once per lent GPU, so it must not break unnoticed. This test packs the
# build as scripts/gpu_bundle.sh does for the device, runs scripts/gpu_check.sh on the
# archive in SELFTEST mode (every step on the CPU with stand-ins), and checks that:
#   - the archive fits the 48 MiB that leave room for the working tree in a GPU call's 64;
#   - exactly the steps that need a GPU fail, and every other step passes (collectives-mpi
#     too: this machine's mpirun is Debian's Open MPI, the bundle's version);
#   - the summary JSON carries the training (three `ddpbench suite`s of named runs),
#     --cuda-graph and PyTorch tables, a row for every GPU target of the performance issue,
#     and a follow-up call naming every failed step;
#   - Note [GPU check order]: the CUDA tests, then the DDP/DP runs, then gpt2-small and
#     resnet50 in ddpbench and PyTorch, then GEMM;
#   - Note [GPU check evidence]: OUT holds exactly gpu_check.json, gpu_check.tgz, summary.txt
#     and failures.txt (no folder, each under 16 MiB), the archive holds the logs, run records
#     and console.log but no file of the suites' data/ folders, failures.txt has every failed
#     step and test_cuda_parity's first failing test, and the last 12,000 characters printed
#     hold the step table, the head of each failure and the follow-up command;
#   - the trap path: an early stop (a folder that is no bundle) and a SIGTERM in the middle of
#     the training each still leave the four files, with the runs finished so far; and a
#     SIGKILL of the whole check (no trap runs) leaves gpu_check.json and summary.txt of the
#     steps finished before it.
#   tests/scripts/gpu_check_selftest.sh BUILD_DIR     (exit 77: skipped, no CUDA build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
if ! find "$build" -name test_cuda_parity -type f -perm -u+x -print -quit | grep -q .; then
  echo "SKIPPED: $build is not a CUDA build (no test_cuda_parity)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT  # TMPDIR below keeps gpu_check's unpacked bundle in here too
LIMIT_MIB=48 "$root/scripts/gpu_bundle.sh" "$build" "$tmp/gpu-bundle" > "$tmp/bundle.log" 2>&1 || {
  cat "$tmp/bundle.log"
  echo "FAIL: gpu_bundle.sh"
  exit 1
}
set +e
GPU_CHECK_SELFTEST=1 OUT="$tmp/out" TMPDIR="$tmp" GPU_CHECK_WORK="$tmp/work" \
  "$root/scripts/gpu_check.sh" --prebuilt "$tmp/gpu-bundle.tar.gz" > "$tmp/check.log" 2>&1
rc=$?
set -e
if [[ $rc != 1 ]]; then
  tail -40 "$tmp/check.log"
  echo "FAIL: the selftest should exit 1 (its CUDA steps fail by design), got $rc"
  exit 1
fi
python3 - "$tmp/out/gpu_check.json" <<'PY' || { tail -60 "$tmp/check.log"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
cuda_only = {"test_cuda_parity", "test_dp_cuda", "test_dataloader_cuda", "test_process_group_nccl",
             "ddp-gloo-mlp-small", "ddp-nccl-mlp-small", "ddp-powersgd-gloo",
             "ddp-powersgd-nccl", "ddp-zero2-nccl", "ddp-zero1-gloo", "fsdp-nccl-gpt",
             "fsdp-gloo-mlp-small", "gemm", "bn-bench"}
failed = {s["step"] for s in r["steps"] if s["status"] == "FAIL"}
problems = []
if failed != cuda_only:
    problems.append(f"failed steps {sorted(failed)}, expected exactly {sorted(cuda_only)}")
if not any(s["step"] == "collectives" and s["status"] == "PASS" for s in r["steps"]):
    problems.append("the collectives step (Gloo on 2 CPU ranks in the selftest) did not pass")
runs = {t["run"] for t in r["training"]}
for want in ("single-gpt2-small", "single-gpt2-small-bf16", "single-gpt2-small-flash",
             "single-gpt2-small-graph", "single-gpt-tiny-graph", "dp-mlp-small",
             "single-resnet50", "single-resnet50-files"):
    if want not in runs:
        problems.append(f"no training row {want}")
if len(r.get("cuda_graph") or []) != 2 or not all(g["losses_match"] for g in r["cuda_graph"]):
    problems.append(f"cuda_graph rows: {r.get('cuda_graph')}")
resnet_target = next((t for t in r.get("targets", []) if "resnet50" in t["target"]), {})
if resnet_target.get("value") is None:
    problems.append(f"resnet50 vs PyTorch not measured: {resnet_target}")
if not r["vs_pytorch"]["rows"]:
    problems.append("no vs-PyTorch rows")
names = " ".join(t["target"] for t in r.get("targets", []))
for want in ("GEMM step time vs cuBLAS", "gpt2-small step vs PyTorch eager", "MFU",
             "DDP world size 1", "DDP 2 ranks on one GPU", "--cuda-graph", "flash attention",
             "resnet50 step vs PyTorch eager", "resnet50 step on JPEGs"):
    if want not in names:
        problems.append(f"no target row '{want}'")
missing = failed - set(r.get("follow_up_tags") or [])
if missing or not r.get("follow_up"):
    problems.append(f"the follow-up call ({r.get('follow_up')}) misses {sorted(missing)}")
for p in problems:
    print("FAIL:", p)
if not problems:
    print(f"gpu_check selftest: {len(r['steps'])} steps, failures exactly the CUDA-only ones")
sys.exit(1 if problems else 0)
PY

# ---- Note [GPU check evidence] ---------------------------------------------------------------
# check_out DIR: exactly the four files, no folder, each under 16 MiB, and a readable archive.
check_out() {
  local dir=$1 names
  names=$(cd "$dir" && find . -mindepth 1 -printf '%y %P\n' | sort | tr '\n' ' ')
  if [[ "$names" != "f failures.txt f gpu_check.json f gpu_check.tgz f summary.txt " ]]; then
    echo "FAIL: $dir holds '$names', expected exactly the four files"
    return 1
  fi
  local f
  for f in "$dir"/*; do
    (( $(stat -c %s "$f") < 16 * 1048576 )) || { echo "FAIL: $f is over 16 MiB"; return 1; }
  done
  tar -tzf "$dir/gpu_check.tgz" > "$tmp/listing" || { echo "FAIL: $dir/gpu_check.tgz unreadable"; return 1; }
  grep -q 'steps.tsv$' "$tmp/listing" || { echo "FAIL: the archive has no steps.tsv"; return 1; }
}
check_out "$tmp/out" || exit 1
for want in suite/vs-pytorch/runs/single-resnet50.json suite/vs-pytorch/logs/single-resnet50.log \
            suite/rest/runs/single-resnet50-files.json test_cuda_parity.log console.log \
            suite/{ddp-dp,vs-pytorch,rest}/suite.json suite/{ddp-dp,vs-pytorch,rest}/report.html; do
  grep -q "$want\$" "$tmp/listing" || { echo "FAIL: gpu_check.tgz has no $want"; exit 1; }
done
# The JPEGs of single-resnet50-files stay out: their recipe in suite.json is enough.
if grep -E '/suite/[^/]+/data/.|\.(jpe?g|JPE?G)$' "$tmp/listing"; then
  echo "FAIL: gpu_check.tgz holds the files above of a suite's data/ folder"
  exit 1
fi
console=$(tar -xOzf "$tmp/out/gpu_check.tgz" work/console.log)
for want in '== libraries' '  needs libcudart' 'mpirun: .*Open MPI' '-- test_cuda_parity: FAIL'; do
  grep -qE -- "$want" <<<"$console" || { echo "FAIL: console.log lacks '$want'"; exit 1; }
done
for step in test_cuda_parity gemm bn-bench; do
  grep -q "^== $step: " "$tmp/out/failures.txt" ||
    { echo "FAIL: failures.txt has no section for $step"; exit 1; }
done
parity=$(awk '/^== test_cuda_parity: /,/^$/' "$tmp/out/failures.txt")
for want in '^-- first failing test \(SKIPPED\):$' '^\[ RUN      \] CudaParity\.' \
            '^\[  SKIPPED \] CudaParity\.' '^-- first CUDA/cuDNN/NCCL error: .*cudaError'; do
  grep -qE -- "$want" <<<"$parity" || { echo "FAIL: failures.txt's test_cuda_parity lacks '$want'"; exit 1; }
done
screen=$(tail -c 12000 "$tmp/check.log")
for want in '== steps' 'step +status' 'test_cuda_parity +FAIL' '== failures' '== bn-bench: ' \
            'performance targets' '== follow-up: '; do
  grep -qE -- "$want" <<<"$screen" || { echo "FAIL: the last screen lacks '$want'"; exit 1; }
done
# The follow-up call: this script, the same bundle, --only every step that failed.
again=$(grep -A 1 '^== follow-up: ' <<<"$screen" | tail -n 1)
[[ "$again" == "$root/scripts/gpu_check.sh --prebuilt $tmp/gpu-bundle.tar.gz --only "* ]] ||
  { echo "FAIL: the follow-up command is '$again'"; exit 1; }
for step in $(awk -F'\t' '$2 == "FAIL" && $1 !~ /^suite:/ {print $1}' "$tmp/work/steps.tsv"); do
  [[ ",${again##* --only }," == *",$step,"* ]] || { echo "FAIL: the follow-up omits $step: $again"; exit 1; }
done
# Note [GPU check order]: each of these steps' lines comes after the one before it.
prev=0
for step in test_cuda_parity test_process_group_nccl dp-mlp-small ddp-nccl-mlp-small \
            single-gpt2-small single-resnet50 pytorch pytorch-resnet50 gemm single-resnet50-files \
            bn-bench collectives racecheck; do
  at=$(awk -F'\t' -v s="$step" '$1 == s {print NR; exit}' "$tmp/work/steps.tsv")
  if (( ${at:-0} <= prev )); then
    cut -f1 "$tmp/work/steps.tsv"
    echo "FAIL: $step is not where Note [GPU check order] puts it"
    exit 1
  fi
  prev=$at
done

# An early stop: --prebuilt on a folder that is no bundle.
mkdir -p "$tmp/not-a-bundle"
set +e
OUT="$tmp/out-early" GPU_CHECK_WORK="$tmp/work-early" \
  "$root/scripts/gpu_check.sh" --prebuilt "$tmp/not-a-bundle" > "$tmp/early.log" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || { cat "$tmp/early.log"; echo "FAIL: an early stop should exit 1, got $rc"; exit 1; }
check_out "$tmp/out-early" || exit 1
# step_status FILE STEP: the status gpu_check.json gives the step ("" when it has none).
step_status() {
  python3 -c 'import json, sys
print(next((s["status"] for s in json.load(open(sys.argv[1]))["steps"] if s["step"] == sys.argv[2]), ""))' "$1" "$2"
}
[[ $(step_status "$tmp/out-early/gpu_check.json" libraries) == FAIL ]] ||
  { echo "FAIL: the early stop's gpu_check.json lacks the libraries step"; exit 1; }

# A SIGTERM in the middle of a step (the launcher's timeout, a lost machine).
GPU_CHECK_SELFTEST=1 OUT="$tmp/out-term" TMPDIR="$tmp" GPU_CHECK_WORK="$tmp/work-term" \
  "$root/scripts/gpu_check.sh" --prebuilt "$tmp/gpu-bundle.tar.gz" --only 'single-*' \
  > "$tmp/term.log" 2>&1 &
pid=$!
# The first training run recorded as ok in suite.json (written atomically; its own record file
# appears earlier, before the suite has taken its numbers): the suite is in its second run.
first_run_ok() {
  python3 -c 'import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
sys.exit(0 if any(r["id"] == "single-mlp-small" and r.get("status") == "ok" for r in runs) else 1)' \
    "$tmp/work-term/suite/ddp-dp/suite.json" 2>/dev/null
}
for _ in $(seq 1 600); do
  first_run_ok && break
  sleep 0.1
done
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc != 0 ]] || { echo "FAIL: a check stopped by SIGTERM exited 0"; exit 1; }
check_out "$tmp/out-term" || exit 1
[[ $(step_status "$tmp/out-term/gpu_check.json" single-mlp-small) == PASS ]] ||
  { tail -20 "$tmp/term.log"; echo "FAIL: after SIGTERM gpu_check.json lacks the finished run"; exit 1; }
if [[ -n $(step_status "$tmp/out-term/gpu_check.json" test_cuda_parity) ]]; then
  echo "FAIL: --only 'single-*' ran test_cuda_parity"
  exit 1
fi

# A SIGKILL of the whole check (the device tool's kill at the call's limit): no trap runs, so
# OUT holds what the refresh after each step left. The check runs in a process group of its
# own (setsid), which the kill takes whole.
# The processes such a kill leaves (each step runs in a session of its own) by their
# environment: GPU_CHECK_WORK names the killed check's folder, and only its processes have it.
kill_leftovers() {
  local p
  for p in /proc/[0-9]*; do
    grep -qxzF "GPU_CHECK_WORK=$1" "$p/environ" 2>/dev/null && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  return 0
}
GPU_CHECK_SELFTEST=1 OUT="$tmp/out-kill" TMPDIR="$tmp" GPU_CHECK_WORK="$tmp/work-kill" \
  setsid "$root/scripts/gpu_check.sh" --prebuilt "$tmp/gpu-bundle.tar.gz" \
  --only 'test_cuda_parity,single-resnet50' > "$tmp/kill.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do  # test_cuda_parity's line in OUT: the suite of single-resnet50 is next
  [[ $(step_status "$tmp/out-kill/gpu_check.json" test_cuda_parity 2>/dev/null) == FAIL ]] && break
  sleep 0.1
done
{ kill -KILL -- "-$pid"; wait "$pid"; } 2>/dev/null || true  # without bash's "Killed" notice
kill_leftovers "$tmp/work-kill"
sleep 0.5
kill_leftovers "$tmp/work-kill"
names=$(cd "$tmp/out-kill" && find . -mindepth 1 -printf '%P ' | tr ' ' '\n' | sort | tr '\n' ' ')
[[ "$names" == "failures.txt gpu_check.json summary.txt " ]] ||
  { tail -20 "$tmp/kill.log"; echo "FAIL: after SIGKILL OUT holds '$names', not the 3 refreshed files"; exit 1; }
for step in libraries device test_cuda_parity; do
  [[ -n $(step_status "$tmp/out-kill/gpu_check.json" "$step") ]] ||
    { echo "FAIL: after SIGKILL gpu_check.json lacks $step"; exit 1; }
done
grep -q -- "--only test_cuda_parity,single-resnet50\$" "$tmp/out-kill/summary.txt" ||
  { echo "FAIL: after SIGKILL summary.txt's follow-up does not name what was left"; exit 1; }
echo "gpu_check selftest: evidence checks passed (four files after a full run, an early stop and"\
     "SIGTERM; three after SIGKILL)"

