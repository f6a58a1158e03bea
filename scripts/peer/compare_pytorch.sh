#!/usr/bin/env bash
# ddpbench vs PyTorch (CPU, gloo) on the same configurations: a ratio table.
#
#   scripts/peer/compare_pytorch.sh [--bin DDPBENCH] [--pairs N] [--json FILE]
#                                   [--steps S] [--warmup W] [--targets]
#                                   [--workload W] [--batch B] [--configs LIST]
#                                   [--python PY]
#     --bin     default build/ci/bench/ddpbench (this script builds nothing)
#     --pairs   alternated (ddpbench, pytorch) pairs per configuration, default 5
#     --json    also write the table as JSON here
#     --steps   measured steps per run, default 30; --warmup default 5
#     --targets also the configurations the performance issue's other CPU targets need, run
#               by ddpbench alone in the same alternation (PyTorch has no --no-overlap and no
#               CPU DataParallel): ddp-w2 --no-overlap, single and DP over 2 CPU devices at
#               batch 256; then scripts/peer/gloo_ratio.sh on the build ddpbench came from;
#               and a table of every CPU target with its goal, the measured value and met /
#               not met
#     --workload  default mlp-small (any workload torch_reference.py knows, e.g. resnet-tiny);
#     --batch     per device, default 64 (32 suits resnet-tiny)
#     --configs   only these configurations, comma-separated (e.g. ddp-w2-mpi); not with
#                 --targets, which needs them all
#     --python    the interpreter of the PyTorch side (torch_reference.py) and of the table:
#                 default $PYTHON, else /usr/bin/python3 (Debian's PyTorch 1.13); a PyTorch 2.x
#                 from scripts/peer/setup_torch2.sh: --python "$(scripts/peer/setup_torch2.sh)"
#   env: PYTHON (see --python); RUN_TIMEOUT (s per run, default 300)
#
# Configurations (SGD lr 0.01 momentum 0.9 unless said, one thread per process, B = --batch):
#   single    --mode single, batch B
#   ddp-w2    --mode ddp --world-size 2, gloo, global batch 2B (B per rank)
#   ddp-w1    --mode ddp --world-size 1, gloo, batch B: what hooks + buckets cost over single
#   ddp-w2-mpi  ddp-w2 over MPI for ddpbench (started through mpirun), Gloo for PyTorch; only
#             where mpirun is installed
#   zero1     ZeRO-1, AdamW lr 0.001 (the optimizer whose state ZeRO shards), gloo, 2 ranks, B
#             per rank: ddpbench --mode ddp --zero-stage 1 (its default variant, paper:
#             gradients reduce-scattered, each rank steps its shard, parameters all-gathered)
#             against PyTorch's DDP + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW)
#             (AllReduce, each rank steps the parameters it owns, each broadcast from its
#             owner; parameters_as_bucket_view and overlap_with_ddp off, the defaults; the
#             --zero-stage 1 of torch_reference.py). The performance issue's target: ZeRO-1
#             step <= 0.8x PyTorch's (mlp-small, 64 per rank)
#   fsdp      FSDP full_shard, AdamW lr 0.001, gloo, 2 ranks, B per rank: ddpbench --mode fsdp
#             (each of the workload's blocks a unit, prefetch on) against PyTorch's FSDP2
#             (fully_shard on each block and on the root; torch_reference.py --mode fsdp,
#             scripts/peer/fsdp_peer.py). Only where --python's PyTorch has fully_shard (2.4 and
#             later; scripts/peer/setup_torch2.sh): with Debian's 1.13 one line says it is
#             skipped, and the other configurations run. The performance issue's target: FSDP
#             step <= 0.6x PyTorch's (mlp-small, 64 per rank)
# Every pair runs both programs back to back, alternating which goes first, so that drift of
# the machine (thermal, neighbours, other builds) hits both sides alike. Per run the number
# taken is the record's summary.step_time_ms.median; the table shows the median over pairs of
# those medians, ratio = ddpbench / pytorch (below 1: ddpbench faster). For DDP it also shows
# the median over pairs of each run's median per-step overlap ratio and exposed communication,
# and the overlap by PyTorch's logger definition on both sides ("span-ovl": the share of the
# first-launch .. last-completion span before backward ended; ddpbench's span_overlap_ratio)
# (steps[].mode.overlap_ratio / comm_exposed_ms of rank 0; for PyTorch these come from its DDP
# logger, see torch_reference.py), and the ddp-w1 / single ratio of each implementation.
# Step times cover the same phases on both sides (data + forward + backward(+comm) + optimizer;
# see torch_reference.py for where zero_grad sits).
# Exit status: 0 when every run succeeded, 2 when one failed or on a usage error.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin=build/ci/bench/ddpbench
pairs=5
json_out=""
targets=0
workload=mlp-small
batch=64
only_configs=""
steps=30
warmup=5
python="${PYTHON:-/usr/bin/python3}"
need_value() {
  if [[ $# -lt 2 || -z "$2" ]]; then echo "compare_pytorch: $1 needs a value" >&2; exit 2; fi
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --targets) targets=1; shift ;;
    --workload) workload="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --configs) only_configs="$2"; shift 2 ;;
    --python) need_value "$@"; python="$2"; shift 2 ;;
    -h|--help) sed -n '2,59p' "$0"; exit 0 ;;
    *) echo "compare_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$bin" ]]; then
  echo "compare_pytorch: no ddpbench binary at '$bin' (build it first, or pass --bin)" >&2
  exit 2
fi
if ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "compare_pytorch: '$python' cannot import torch (--python: the PyTorch side's interpreter)" >&2
  exit 2
fi
if ! [[ "$pairs" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare_pytorch: --pairs must be a positive integer, got '$pairs'" >&2
  exit 2
fi
export OPENBLAS_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! [[ "$batch" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare_pytorch: --batch must be a positive integer, got '$batch'" >&2
  exit 2
fi
"$bin" workloads --json > "$tmp/workloads.json"  # the presets torch_reference.py builds
common=(--workload "$workload" --steps "$steps" --warmup "$warmup" --quiet)
# The optimizer, per configuration (ddpbench refuses an option given twice).
sgd="--optimizer sgd --lr 0.01 --momentum 0.9"
adamw="--optimizer adamw --lr 0.001"
declare -A cfg_args=(
  [single]="--mode single --global-batch $batch $sgd"
  [ddp-w2]="--mode ddp --world-size 2 --backend gloo --global-batch $((2 * batch)) $sgd"
  [ddp-w1]="--mode ddp --world-size 1 --backend gloo --global-batch $batch $sgd"
  [ddp-w2-mpi]="--mode ddp --world-size 2 --backend mpi --global-batch $((2 * batch)) $sgd"
  [zero1]="--mode ddp --world-size 2 --backend gloo --global-batch $((2 * batch)) --zero-stage 1 $adamw"
  [fsdp]="--mode fsdp --world-size 2 --backend gloo --global-batch $((2 * batch)) $adamw"
  [ddp-w2-noovl]="--mode ddp --world-size 2 --backend gloo --global-batch $((2 * batch)) --no-overlap $sgd"
  [single-b256]="--mode single --global-batch 256 $sgd"
  [dp-w2-b256]="--mode dp --world-size 2 --global-batch 256 $sgd"
)
configs=(single ddp-w2 ddp-w1 zero1)
# ddpbench over MPI where mpirun is installed, against PyTorch over Gloo (Debian's torch has no
# MPI backend, and Gloo is the best it offers on CPU).
if command -v mpirun >/dev/null; then configs+=(ddp-w2-mpi); fi
configs+=(fsdp)
# FSDP2 (fully_shard) is PyTorch 2.x's: on a PyTorch without it the fsdp row is skipped, in
# one line (torch_reference.py's own, which exits 3 on such a PyTorch).
fsdp_skip=$(PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" -c \
  'import fsdp_peer; print("" if fsdp_peer.fully_shard_api() else fsdp_peer.skip_line("fsdp"))' \
  2>/dev/null || echo "torch_reference: skipped: --mode fsdp: '$python' cannot load fsdp_peer.py")
solo_configs=()  # ddpbench only
if ((targets)); then solo_configs=(ddp-w2-noovl single-b256 dp-w2-b256); fi
if [[ -n "$only_configs" ]]; then  # solo_configs stays empty: --targets is refused here
  if ((targets)); then
    echo "compare_pytorch: --targets needs every configuration; drop --configs" >&2
    exit 2
  fi
  IFS=, read -ra wanted <<<"$only_configs"
  for cfg in "${wanted[@]}"; do
    if [[ " ${configs[*]} " != *" $cfg "* ]]; then
      echo "compare_pytorch: --configs: '$cfg' is not one of: ${configs[*]} (ddp-w2-mpi needs mpirun)" >&2
      exit 2
    fi
  done
  configs=("${wanted[@]}")
fi
if [[ -n "$fsdp_skip" && " ${configs[*]} " == *" fsdp "* ]]; then
  echo "compare_pytorch: fsdp skipped: ${fsdp_skip#torch_reference: skipped: }" >&2
  kept=()
  for cfg in "${configs[@]}"; do if [[ "$cfg" != fsdp ]]; then kept+=("$cfg"); fi; done
  configs=("${kept[@]+"${kept[@]}"}")
  if ((${#configs[@]} == 0)); then exit 0; fi
fi

run_side() {  # side config pair
  local side="$1" cfg="$2" i="$3" out="$tmp/$1.$2.$3.json" log="$tmp/$1.$2.$3.log"
  # shellcheck disable=SC2206
  local args=(${cfg_args[$cfg]} "${common[@]}" --out "$out")
  local cmd
  if [[ "$side" == ddpbench ]]; then
    cmd=("$bin" run "${args[@]}")
  else
    for k in "${!args[@]}"; do [[ "${args[$k]}" == mpi ]] && args[$k]=gloo; done
    cmd=("$python" "$here/torch_reference.py" --workloads-json "$tmp/workloads.json" "${args[@]}")
  fi
  if ! timeout "${RUN_TIMEOUT:-300}" "${cmd[@]}" >"$log" 2>&1 || [[ ! -s "$out" ]]; then
    echo "compare_pytorch: $side run $i of $cfg failed: ${cmd[*]}" >&2
    cat "$log" >&2
    exit 2
  fi
  echo "$out" >>"$tmp/records.$side.$cfg"
}

start=$SECONDS
for ((i = 1; i <= pairs; ++i)); do
  for cfg in "${configs[@]}"; do
    if ((i % 2)); then
      run_side ddpbench "$cfg" "$i"; run_side pytorch "$cfg" "$i"
    else
      run_side pytorch "$cfg" "$i"; run_side ddpbench "$cfg" "$i"
    fi
  done
  for cfg in "${solo_configs[@]+"${solo_configs[@]}"}"; do run_side ddpbench "$cfg" "$i"; done
  echo "compare_pytorch: pair $i/$pairs done ($((SECONDS - start)) s)" >&2
done

gloo_ratio=""
if ((targets)); then
  build_dir=$(cd "$(dirname "$bin")/.." && pwd)
  if [[ -x "$build_dir/bench/micro/gloo_raw_bench" ]]; then
    echo "compare_pytorch: scripts/peer/gloo_ratio.sh $build_dir" >&2
    gloo_ratio=$("$here/gloo_ratio.sh" "$build_dir" 2>&1 | tee "$tmp/gloo.log" |
      sed -nE 's/^ratio PG\/raw \(median time\): ([0-9.]+).*/\1/p' || true)
  else
    echo "compare_pytorch: no gloo_raw_bench in $build_dir: the Gloo target is not measured" >&2
  fi
fi

# The table and its JSON: scripts/pylib/compare_table.py.
"$python" "$here/../pylib/compare_table.py" "$tmp" "$pairs" "$steps" "$warmup" "$json_out" "$targets" \
  "$gloo_ratio" "$workload"
