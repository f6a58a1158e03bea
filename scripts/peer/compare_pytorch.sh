#!/usr/bin/env bash
# ddpbench vs PyTorch 1.13 (CPU, gloo) on the same configurations: a ratio table.
#
#   scripts/peer/compare_pytorch.sh [--bin DDPBENCH] [--pairs N] [--json FILE]
#                                   [--steps S] [--warmup W]
#     --bin     default build/bench/ddpbench (this script builds nothing)
#     --pairs   alternated (ddpbench, pytorch) pairs per configuration, default 5
#     --json    also write the table as JSON here
#     --steps   measured steps per run, default 30; --warmup default 5
#   env: PYTHON (default /usr/bin/python3, Debian's PyTorch); RUN_TIMEOUT (s per run, default 300)
#
# Configurations (mlp-small, SGD lr 0.01 momentum 0.9, one thread per process):
#   single    --mode single, batch 64
#   ddp-w2    --mode ddp --world-size 2, gloo, global batch 128 (64 per rank)
#   ddp-w1    --mode ddp --world-size 1, gloo, batch 64: what hooks + buckets cost over single
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
bin=build/bench/ddpbench
pairs=5
json_out=""
steps=30
warmup=5
python="${PYTHON:-/usr/bin/python3}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "compare_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$bin" ]]; then
  echo "compare_pytorch: no ddpbench binary at '$bin' (build it first, or pass --bin)" >&2
  exit 2
fi
if ! [[ "$pairs" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare_pytorch: --pairs must be a positive integer, got '$pairs'" >&2
  exit 2
fi
export OPENBLAS_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

common=(--workload mlp-small --steps "$steps" --warmup "$warmup" --optimizer sgd --lr 0.01
        --momentum 0.9 --quiet)
declare -A cfg_args=(
  [single]="--mode single --global-batch 64"
  [ddp-w2]="--mode ddp --world-size 2 --backend gloo --global-batch 128"
  [ddp-w1]="--mode ddp --world-size 1 --backend gloo --global-batch 64"
)
configs=(single ddp-w2 ddp-w1)

run_side() {  # side config pair
  local side="$1" cfg="$2" i="$3" out="$tmp/$1.$2.$3.json" log="$tmp/$1.$2.$3.log"
  # shellcheck disable=SC2206
  local args=(${cfg_args[$cfg]} "${common[@]}" --out "$out")
  local cmd
  if [[ "$side" == ddpbench ]]; then
    cmd=("$bin" run "${args[@]}")
  else
    cmd=("$python" "$here/torch_reference.py" "${args[@]}")
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
  echo "compare_pytorch: pair $i/$pairs done ($((SECONDS - start)) s)" >&2
done

# One function builds the table; the text and the JSON are two renderings of it.
"$python" - "$tmp" "$pairs" "$steps" "$warmup" "$json_out" <<'PY'
import json
import statistics
import sys

tmp, pairs, steps, warmup, json_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
configs = ["single", "ddp-w2", "ddp-w1"]
sides = ["ddpbench", "pytorch"]


def run_numbers(path):
    r = json.load(open(path))
    modes = [s["mode"] for s in r["steps"] if s.get("measured") and "mode" in s]
    out = {"step_ms": r["summary"]["step_time_ms"]["median"]}
    if modes:
        out["overlap"] = statistics.median(m["overlap_ratio"] for m in modes)
        out["comm_ms"] = statistics.median(m["comm_ms"] for m in modes)
        out["exposed_ms"] = statistics.median(m["comm_exposed_ms"] for m in modes)
        # PyTorch's logger definition (first launch .. last completion span); ddpbench records
        # it as span_overlap_ratio, PyTorch's overlap_ratio already is it.
        out["span_overlap"] = statistics.median(m.get("span_overlap_ratio", m["overlap_ratio"]) for m in modes)
    return out


def build():
    table = {"workload": "mlp-small", "pairs": pairs, "steps": int(steps), "warmup": int(warmup),
             "statistic": "median over pairs of each run's median", "configs": {}}
    for cfg in configs:
        row = {}
        for side in sides:
            runs = [run_numbers(p.strip()) for p in open(f"{tmp}/records.{side}.{cfg}")]
            row[side] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            row[side]["runs_step_ms"] = [r["step_ms"] for r in runs]
        row["ratio"] = row["ddpbench"]["step_ms"] / row["pytorch"]["step_ms"]
        table["configs"][cfg] = row
    c = table["configs"]
    table["ddp_w1_over_single"] = {s: c["ddp-w1"][s]["step_ms"] / c["single"][s]["step_ms"] for s in sides}
    return table


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


t = build()
print(f"mlp-small, SGD momentum 0.9, one thread per process, {t['pairs']} alternated pairs of "
      f"{t['steps']} measured steps; median over pairs of each run's median")
print(f"{'config':<8} {'ddpbench ms':>11} {'pytorch ms':>10} {'ratio':>6}   "
      f"{'overlap d/p':>11}   {'span-ovl d/p':>12}   {'comm ms d/p':>13}   {'exposed ms d/p':>14}")
for cfg, row in t["configs"].items():
    d, p = row["ddpbench"], row["pytorch"]
    line = f"{cfg:<8} {d['step_ms']:>11.2f} {p['step_ms']:>10.2f} {row['ratio']:>6.3f}"
    if "overlap" in d:
        line += (f"   {d['overlap']:>5.2f}/{p.get('overlap', 0):<5.2f}"
                 f"   {d['span_overlap']:>5.2f}/{p.get('span_overlap', 0):<5.2f} "
                 f"   {d['comm_ms']:>6.2f}/{p.get('comm_ms', 0):<6.2f}"
                 f"   {d['exposed_ms']:>6.2f}/{p.get('exposed_ms', 0):<6.2f}")
    print(line)
o = t["ddp_w1_over_single"]
print(f"DDP hooks+buckets overhead (ddp-w1 / single): ddpbench {o['ddpbench']:.3f}, pytorch {o['pytorch']:.3f}")
if json_out:
    with open(json_out, "w") as f:
        json.dump(t, f, indent=1)
    print(f"wrote {json_out}")
PY
