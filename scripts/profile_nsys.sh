#!/usr/bin/env bash
# Profiles a ddpbench run under Nsight Systems: one report per rank, capturing only the
# measured steps (ddpbench calls cudaProfilerStart/Stop around them), with ddpbench's NVTX
# ranges (domain "ddpbench": data, forward, backward, comm, optimizer, dp; communication
# ranges carry their bytes as payload), CUDA API/kernels and OS runtime calls.
#
#   scripts/profile_nsys.sh [-o OUTDIR] -- RUN ARGS...
#   e.g. scripts/profile_nsys.sh -o prof -- --mode ddp --world-size 2 --workload gpt2-small --device cuda
#
# DDP: the ranks are profiled, not the launcher. This script starts the ranks itself
# (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DDPBENCH_STORE_TOKEN, as ddpbench's
# launcher or torchrun would) with each rank under its own `nsys profile`, writing
# OUTDIR/ddpbench.rank<R>.nsys-rep through nsys's %q{RANK} expansion.
#
# Options that matter (see `nsys profile --help`):
#   -t cuda,nvtx,osrt               what to trace; add cublas or cudnn for library calls
#   --capture-range=cudaProfilerApi only between cudaProfilerStart and Stop: the measured steps
#   --capture-range-end=stop        stop at cudaProfilerStop
#   --cuda-memory-usage=true        track allocations (slower)
# Environment:
#   NSYS_NVTX_PROFILER_REGISTER_ONLY=0  nsys otherwise keeps only NVTX ranges whose messages
#                                       are registered strings; ddpbench registers its fixed
#                                       names but names buckets dynamically ("bucket 3")
#   NSYS=/path/to/nsys                  when nsys is not on PATH
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=prof
if [[ ${1:-} == -o ]]; then out=$2; shift 2; fi
[[ ${1:-} == -- ]] && shift
[[ $# -gt 0 ]] || { echo "usage: $0 [-o OUTDIR] -- RUN ARGS..." >&2; exit 2; }
nsys=${NSYS:-nsys}
command -v "$nsys" >/dev/null || { echo "profile_nsys: nsys not found (install Nsight Systems or set NSYS)" >&2; exit 2; }
bin=${DDPBENCH:-$root/build/release/bench/ddpbench}
[[ -x $bin ]] || bin=$root/build/ci/bench/ddpbench
mkdir -p "$out"
export NSYS_NVTX_PROFILER_REGISTER_ONLY=0

world=1
mode=single
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --world-size) world=${args[i + 1]} ;;
    --mode) mode=${args[i + 1]} ;;
  esac
done
profile=("$nsys" profile -t cuda,nvtx,osrt --capture-range=cudaProfilerApi --capture-range-end=stop
  --force-overwrite=true -o "$out/ddpbench.rank%q{RANK}")

if [[ $mode != ddp ]]; then
  RANK=0 "${profile[@]}" "$bin" run "$@"
  exit
fi
export MASTER_ADDR=127.0.0.1 WORLD_SIZE=$world
MASTER_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DDPBENCH_STORE_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export MASTER_PORT DDPBENCH_STORE_TOKEN
pids=()
for ((r = 0; r < world; r++)); do
  RANK=$r LOCAL_RANK=$r "${profile[@]}" "$bin" run "$@" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
echo "profile_nsys: reports in $out/ (open ddpbench.rank*.nsys-rep in Nsight Systems)"
exit $status
