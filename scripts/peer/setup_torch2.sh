#!/usr/bin/env bash
# A PyTorch 2.x beside Debian's 1.13, for the peer scripts: a virtual environment outside the
# repository with PyPI's torch 2.x and numpy in it.
#
#   scripts/peer/setup_torch2.sh [--index auto|cpu|pypi] [--pypi] [--torch SPEC]
#                                [--python PY] [DIR]
#     DIR       where the environment goes (default $DDPB_TORCH2_VENV, else
#               ~/.cache/ddpbench/torch2)
#     --index   where torch comes from: cpu, PyTorch's CPU-only wheel index
#               (https://download.pytorch.org/whl/cpu, a ~200 MiB wheel); pypi, the default
#               index (on Linux x86_64 its torch is the CUDA build and pulls the nvidia-*
#               packages, several GiB); auto (the default), cpu where that index answers, else
#               pypi with a note
#     --pypi    the same as --index pypi
#     --torch   the pip requirement (default 'torch>=2,<3')
#     --python  the interpreter the environment is made from (default /usr/bin/python3)
#
# Idempotent: when DIR's interpreter already imports torch 2.x and numpy it installs nothing.
# `python3 -m venv` needs Debian's python3-venv: installed with apt-get when missing and this
# runs as root, else the script says so. numpy comes from the default index.
# The last line on stdout is the environment's interpreter, for
#   compare_pytorch.sh --python "$(scripts/peer/setup_torch2.sh)" ...
#   "$(scripts/peer/setup_torch2.sh)" scripts/peer/torch_reference.py ...
# Everything else goes to stderr. Exit status: 0 ready, 1 a step failed (one line says which),
# 2 a usage error.
set -euo pipefail

cpu_index=https://download.pytorch.org/whl/cpu
index=auto
spec='torch>=2,<3'
base=/usr/bin/python3
dir="${DDPB_TORCH2_VENV:-$HOME/.cache/ddpbench/torch2}"
dir_given=0

usage() { echo "setup_torch2: $1 (see --help)" >&2; exit 2; }
fail() { echo "setup_torch2: $1" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || usage "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --index) need_value "$@"; index="$2"; shift 2 ;;
    --index=*) index="${1#*=}"; shift ;;
    --pypi) index=pypi; shift ;;
    --torch) need_value "$@"; spec="$2"; shift 2 ;;
    --torch=*) spec="${1#*=}"; shift ;;
    --python) need_value "$@"; base="$2"; shift 2 ;;
    --python=*) base="${1#*=}"; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    -*) usage "unknown option '$1'" ;;
    *)
      ((dir_given == 0)) || usage "one DIR only, got '$dir' and '$1'"
      dir="$1"; dir_given=1; shift ;;
  esac
done
case "$index" in auto|cpu|pypi) ;; *) usage "--index takes auto, cpu or pypi, got '$index'" ;; esac
[[ -n "$dir" ]] || usage "DIR is empty"
dir="$(realpath -m -- "$dir")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
if [[ "$dir" == "$repo" || "$dir" == "$repo"/* ]]; then
  usage "DIR '$dir' is inside the repository; put the environment outside it"
fi

py="$dir/bin/python"
# torch 2.x and numpy both import: then there is nothing to do.
ready() {
  [[ -x "$py" ]] && "$py" - >/dev/null 2>&1 <<'EOF'
import numpy, torch
assert int(torch.__version__.split(".")[0]) >= 2
torch.ones(2).numpy()
EOF
}
describe() {
  "$py" -c 'import torch; print("torch", torch.__version__, "(CUDA build: %s)" % (torch.version.cuda or "none"))' \
    2>/dev/null || echo "torch"
}

if ready; then
  echo "setup_torch2: $(describe) already in $dir" >&2
  echo "$py"
  exit 0
fi

command -v "$base" >/dev/null || fail "no interpreter '$base' (pass --python)"
# venv and ensurepip (Debian ships them in python3-venv).
if ! "$base" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    fail "'$base -m venv' needs the package python3-venv: apt-get install python3-venv (as root)"
  fi
  minor="$("$base" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  echo "setup_torch2: installing python3-venv (python$minor-venv) with apt-get" >&2
  apt-get update -qq >&2 || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2 ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$minor-venv" >&2 ||
    fail "apt-get could not install python3-venv"
  "$base" -c 'import venv, ensurepip' >/dev/null 2>&1 ||
    fail "python3-venv is installed but '$base' still has no venv/ensurepip (a python$minor-venv package may be missing)"
fi

if [[ -e "$dir" && ! -f "$dir/pyvenv.cfg" ]] && [[ -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
  fail "'$dir' exists and is not a virtual environment; refusing to install into it"
fi
if [[ ! -x "$py" ]]; then
  echo "setup_torch2: creating a virtual environment in $dir" >&2
  mkdir -p "$(dirname "$dir")" || fail "cannot create $(dirname "$dir")"
  "$base" -m venv "$dir" >&2 || fail "'$base -m venv $dir' failed"
fi
[[ -x "$py" ]] || fail "the virtual environment in $dir has no bin/python"

if [[ "$index" == auto ]]; then
  if "$py" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=15)" \
      "$cpu_index" >/dev/null 2>&1; then
    index=cpu
  else
    echo "setup_torch2: the CPU-only index $cpu_index does not answer from here; using the" \
         "default index, whose Linux torch is the CUDA build (several GiB with its nvidia-* packages)" >&2
    index=pypi
  fi
fi

pip=("$py" -m pip install --progress-bar off)
echo "setup_torch2: pip install '$spec' from the $index index into $dir" >&2
if [[ "$index" == cpu ]]; then
  # The CPU index holds torch's dependencies too; only that index, so that no CUDA build with
  # a higher version on the default index can win.
  "${pip[@]}" --index-url "$cpu_index" "$spec" >&2 ||
    fail "pip could not install '$spec' from $cpu_index (its output is above; --pypi uses the default index)"
else
  "${pip[@]}" "$spec" >&2 || fail "pip could not install '$spec' from the default index (its output is above)"
fi
if ! "$py" -c 'import numpy' >/dev/null 2>&1; then
  "${pip[@]}" numpy >&2 || fail "pip could not install numpy (its output is above)"
fi
ready || fail "the environment in $dir does not import torch 2.x and numpy after the install"
echo "setup_torch2: $(describe) ready in $dir" >&2
echo "$py"
