#!/usr/bin/env bash
# cuDNN is opened at the first convolution (core/cuda/cuda_conv.cpp), never linked, so that a
# GPU machine without cuDNN starts every binary. Fails when a binary given lists libcudnn
# among its NEEDED entries (or is not a dynamic ELF at all).
#   tests/scripts/no_cudnn_link.sh BINARY...
set -euo pipefail
for b in "$@"; do
  needed=$(readelf -d "$b" | grep NEEDED) || { echo "FAIL: $b has no dynamic section"; exit 1; }
  if grep -q cudnn <<<"$needed"; then
    echo "FAIL: $b links cuDNN: $(grep cudnn <<<"$needed")"
    exit 1
  fi
done
echo "no_cudnn_link: $# binaries, none links cuDNN"
