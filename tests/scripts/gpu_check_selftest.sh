#!/usr/bin/env bash
# The GPU check is run once per lent GPU, so it must not break unnoticed. This test packs the
# build as scripts/gpu_bundle.sh does for the device, runs scripts/gpu_check.sh on the
# archive in SELFTEST mode (every step on the CPU with stand-ins), and checks that:
#   - the archive fits the device tool's 64 MiB carry;
#   - exactly the steps that need a GPU fail, and every other step passes;
#   - the summary JSON carries the training, --cuda-graph and PyTorch tables and a row for
#     every GPU target of the performance issue.
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
LIMIT_MIB=64 "$root/scripts/gpu_bundle.sh" "$build" "$tmp/gpu-bundle" > "$tmp/bundle.log" 2>&1 || {
  cat "$tmp/bundle.log"
  echo "FAIL: gpu_bundle.sh"
  exit 1
}
set +e
GPU_CHECK_SELFTEST=1 OUT="$tmp/out" TMPDIR="$tmp" \
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
cuda_only = {"test_cuda_parity", "test_dp_cuda", "test_process_group_nccl",
             "ddp gloo 2 ranks on cuda:0", "ddp nccl world 1", "ddp powersgd gloo 2 ranks",
             "ddp powersgd nccl world 1", "gemm"}
failed = {s["step"] for s in r["steps"] if s["status"] == "FAIL"}
problems = []
if failed != cuda_only:
    problems.append(f"failed steps {sorted(failed)}, expected exactly {sorted(cuda_only)}")
runs = {t["run"] for t in r["training"]}
for want in ("single-gpt2-small", "single-gpt2-small-bf16", "single-gpt2-small-flash",
             "single-gpt2-small-graph", "single-gpt-tiny-graph", "dp-mlp-small",
             "single-resnet50"):
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
             "resnet50 step vs PyTorch eager"):
    if want not in names:
        problems.append(f"no target row '{want}'")
for p in problems:
    print("FAIL:", p)
if not problems:
    print(f"gpu_check selftest: {len(r['steps'])} steps, failures exactly the CUDA-only ones")
sys.exit(1 if problems else 0)
PY
