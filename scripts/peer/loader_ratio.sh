#!/usr/bin/env bash
# ddpbench's image loader against PyTorch's DataLoader (issue 26, §5): one image folder, the
# ImageNet training transform at 224 pixels, batches of 64, the same number of workers on both
# sides, in alternated pairs (ddpbench, then PyTorch, PAIRS times per worker count).
#   scripts/peer/loader_ratio.sh BUILD_DIR [WORKERS...]     (default workers: 1 2)
#   env: PAIRS (default 3), BATCHES (default 10), DATA (an image folder; default one made
#        here: 10 classes x 40 ImageNet-like JPEGs), PYTHON (default /usr/bin/python3),
#        STRICT=1 exits 3 when a worker count misses the target (scripts/pylib/perf_targets.py)
# ddpbench: `ddpbench data bench` (libjpeg-turbo, decode-time downscaling, threads); PyTorch:
# scripts/peer/loader_peer.py (torchvision's ImageFolder, PIL, worker processes).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: scripts/peer/loader_ratio.sh BUILD_DIR [WORKERS...]" >&2; exit 2; }
bin="$1/bench/ddpbench"
shift
workers=("${@:-1}")
[[ $# -gt 0 ]] || workers=(1 2)
[[ -x "$bin" ]] || { echo "loader_ratio: no $bin" >&2; exit 2; }
python="${PYTHON:-/usr/bin/python3}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=${DATA:-$tmp/images}
if [[ -z "${DATA:-}" ]]; then
  "$bin" data make imagefolder --out "$data" --classes 10 --images-per-class 40
fi
results="$tmp/results.txt"
for _ in $(seq 1 "${PAIRS:-3}"); do
  for w in "${workers[@]}"; do
    rate=$("$bin" data bench --data "$data" --workload resnet18 --global-batch 64 \
             --batches "${BATCHES:-10}" --num-workers "$w" | sed -nE 's/^loader: ([0-9.]+) samples.*/\1/p')
    echo "ddpbench $w $rate" >> "$results"
    rate=$(OPENBLAS_NUM_THREADS=1 "$python" "$here/loader_peer.py" --data "$data" --size 224 \
             --batch 64 --batches "${BATCHES:-10}" --num-workers "$w" |
           "$python" -c 'import json, sys; print(json.load(sys.stdin)["loader_images_per_s"])')
    echo "pytorch $w $rate" >> "$results"
  done
done
STRICT="${STRICT:-0}" "$python" "$here/../pylib/loader_ratio.py" "$results"
