#!/usr/bin/env bash
# Installs the Debian packages ddpbench builds and tests with. Idempotent: installs only
# what is missing. Never touches CUDA (the toolkit is expected to be installed already, or
# absent for a CPU-only build). Works as root or through sudo.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libopenblas-dev libgloo-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libbenchmark-dev
  libdnnl-dev  # oneDNN: the CPU convolutions
  python3-torch python3-torchvision  # the PyTorch cross-checks (torchvision: ResNet)
  clang-format  # scripts/check_format.sh: every C++/CUDA source follows .clang-format
  chromium  # the report test renders the HTML report headless to PNG (about 16 s, 130 MB)
  openmpi-bin  # tests/scripts/cluster_scripts_test.sh runs scripts/cluster/mpirun_ddp.sh
  libopenmpi-dev  # comm/ProcessGroupMpi: the MPI backend
  libturbojpeg0-dev  # data/: JPEG decoding of image folders
  iproute2 util-linux  # scripts/cluster/netns_cluster.sh: emulated hosts (ip netns, tc, unshare)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
