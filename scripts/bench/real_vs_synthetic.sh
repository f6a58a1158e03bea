#!/usr/bin/env bash
# A step on files against the same step on synthetic data (issue 26, §5): is the loader off the
# critical path? resnet-tiny on an ImageFolder of ImageNet-like JPEGs (decoded, cropped,
# flipped and normalized by the loader's workers) against resnet-tiny on synthetic images, in
# alternated pairs.
#   scripts/bench/real_vs_synthetic.sh BUILD_DIR
#   env: PAIRS (default 3), STEPS (default 20), WORKERS (loader threads, default 1),
#        WORKLOAD (default resnet-tiny), BATCH (default 32), DATA (an image folder; default
#        one made here: 10 classes x 40 JPEGs), STRICT=1 exits 3 when the target is missed
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: scripts/bench/real_vs_synthetic.sh BUILD_DIR" >&2; exit 2; }
bin="$1/bench/ddpbench"
[[ -x "$bin" ]] || { echo "real_vs_synthetic: no $bin" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=${DATA:-$tmp/images}
[[ -n "${DATA:-}" ]] || "$bin" data make imagefolder --out "$data" --classes 10 --images-per-class 40
run=(run --workload "${WORKLOAD:-resnet-tiny}" --global-batch "${BATCH:-32}" --steps "${STEPS:-20}"
     --warmup 3 --quiet)
records=()
for i in $(seq 1 "${PAIRS:-3}"); do
  "$bin" "${run[@]}" --out "$tmp/synthetic$i.json"
  "$bin" "${run[@]}" --data "$data" --num-workers "${WORKERS:-1}" --out "$tmp/real$i.json"
  records+=("$tmp/synthetic$i.json" "$tmp/real$i.json")
done
STRICT="${STRICT:-0}" python3 "$here/../pylib/real_vs_synthetic.py" "${records[@]}"
