#!/usr/bin/env bash
# Packs a CUDA build into a self-contained folder for a GPU machine that has the CUDA
# toolkit and driver but none of our Debian packages (fmt, OpenBLAS, gloo, ...):
#
#   scripts/gpu_bundle.sh BUILD_DIR BUNDLE_DIR      (also writes BUNDLE_DIR.tar.gz)
#   then, there:  scripts/gpu_check.sh --prebuilt BUNDLE_DIR.tar.gz   (or the folder)
#
# BUILD_DIR is a build configured with -DDDPBENCH_CUDA=ON (CMAKE_CUDA_ARCHITECTURES "80;90",
# the default). BUNDLE_DIR is emptied of what this script owns (bin/, lib/, scripts/,
# MANIFEST.txt) and refilled:
#   bin/          ddpbench, test_cuda_parity, test_dp, test_dataloader, test_process_group_nccl,
#                 cuda_gemm_bench,
#                 cuda_bn_bench (those that exist;
#                 ddpbench is required), stripped of their symbol tables
#   lib/          every shared library they load (ldd, transitive) except
#                   - the CUDA libraries (libcuda, libcudart, libcublas*, libnccl, ...): the
#                     GPU machine has its own, matched to its driver;
#                   - glibc and the C++ runtime, which go to lib/glibc and lib/compat below;
#   lib/compat/   libstdc++.so.6 and libgcc_s.so.1 of this build machine. Not on the default
#                 path: gpu_check.sh adds it only when the GPU machine's libstdc++ is too old
#                 for our binaries (a "GLIBCXX_x not found" error). Putting it first always
#                 would *downgrade* a newer system libstdc++, which can break other libraries
#                 that the CUDA stack loads.
#   lib/glibc/    the glibc family and its loader (ld-linux-x86-64.so.2), for a GPU machine
#                 whose glibc is older than ours (a "GLIBC_x not found" error): gpu_check.sh
#                 then starts each binary through the bundled loader. Never on any path.
#   scripts/      gpu_check.sh, its steps and summary (gpu_check/), the record and target
#                 modules they read (pylib/), and the Python peers it runs
#                 (torch_reference.py, models.py, measure.py, workload_table.py)
#   MANIFEST.txt  what was built (commit, date, CUDA architectures), the Open MPI version of
#                 the bundled libmpi ("open mpi:" line: gpu_check.sh runs its MPI step only under
#                 an mpirun of that version) and what needs what
# It prints the size per folder, packs the folder into BUNDLE_DIR.tar.gz (what the device
# tool carries) and fails when the archive exceeds LIMIT_MIB (default 48: with the working
# tree it must travel within the 64 MiB a GPU call carries).
#
# Environment: LIMIT_MIB (default 48), NO_STRIP=1 keeps symbol tables (bigger; nicer host
# backtraces under compute-sanitizer).
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: scripts/gpu_bundle.sh BUILD_DIR BUNDLE_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
bundle=$(cd "$2" && pwd)
limit_mib=${LIMIT_MIB:-48}

# ---- Binaries ----------------------------------------------------------------------------
# The first executable file called NAME under the build tree (targets may sit in bench/,
# bench/micro/, tests/, tests/impl_dp/ or the root, depending on where they are declared).
# The bundle itself may sit inside the build tree: never pick its copies.
find_binary() {
  find "$build" -path "$bundle" -prune -o -path '*/CMakeFiles' -prune -o \
    -type f -name "$1" -perm -u+x -print 2>/dev/null | sort | head -n 1
}

wanted=(ddpbench test_cuda_parity test_dp test_dataloader test_process_group_nccl cuda_gemm_bench cuda_bn_bench)
bins=()
for name in "${wanted[@]}"; do
  path=$(find_binary "$name")
  if [[ -z "$path" ]]; then
    [[ "$name" == ddpbench ]] && { echo "gpu_bundle: no ddpbench under $build (build it first)" >&2; exit 1; }
    echo "gpu_bundle: note: no $name under $build; the bundle will not have it"
    continue
  fi
  bins+=("$path")
done
# grep reads all of ldd's output (no -q): under pipefail, ldd killed by SIGPIPE after an early
# match would fail the pipeline and call a CUDA build "not a CUDA build".
if ! ldd "${bins[0]}" | grep 'libcudart' >/dev/null; then
  echo "gpu_bundle: $build is not a CUDA build (ddpbench does not load libcudart); configure with -DDDPBENCH_CUDA=ON" >&2
  exit 1
fi

rm -rf "${bundle:?}/bin" "${bundle:?}/lib" "${bundle:?}/scripts" "${bundle:?}/MANIFEST.txt"
mkdir -p "$bundle/bin" "$bundle/lib/compat" "$bundle/lib/glibc" "$bundle/scripts/peer"

for b in "${bins[@]}"; do
  cp "$b" "$bundle/bin/"
  [[ "${NO_STRIP:-0}" == 1 ]] || strip "$bundle/bin/$(basename "$b")"
done

# ---- Shared libraries --------------------------------------------------------------------
# Provided by the GPU machine (the CUDA toolkit/driver, matched to its driver).
is_cuda_lib() {
  [[ "$1" =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|nvrtc|nvJitLink|nvToolsExt|cufft|curand|cusparse|cusolver|cudnn|nvidia-.*)\.so ]]
}
# glibc proper (must all come from one glibc build, together with the loader).
is_glibc() {
  [[ "$1" =~ ^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libmvec)\.so\. || "$1" =~ ^ld-linux ]]
}
is_cxx_runtime() {
  [[ "$1" =~ ^(libstdc\+\+|libgcc_s)\.so\. ]]
}

declare -A seen=()
missing=()
while read -r line; do
  # "libfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
  # "libfoo.so.1 => not found"
  if [[ "$line" =~ ^([^[:space:]]+)\ =\>\ not\ found ]]; then
    missing+=("${BASH_REMATCH[1]}")
    continue
  fi
  if [[ "$line" =~ ^([^[:space:]]+)\ =\>\ ([^[:space:]]+)\ \( ]]; then
    name=${BASH_REMATCH[1]}
    path=${BASH_REMATCH[2]}
  elif [[ "$line" =~ ^(/[^[:space:]]+)\ \( ]]; then
    path=${BASH_REMATCH[1]}
    name=$(basename "$path")
  else
    continue  # linux-vdso
  fi
  [[ -n "${seen[$name]:-}" ]] && continue
  seen[$name]=$path
done < <(for b in "${bins[@]}"; do ldd "$b"; done)

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "gpu_bundle: ldd cannot resolve: ${missing[*]} (fix the build machine first)" >&2
  exit 1
fi

bundled=() compat=() glibc=() provided=()
for name in $(printf '%s\n' "${!seen[@]}" | sort); do
  path=${seen[$name]}
  if is_cuda_lib "$name"; then
    provided+=("$name")
  elif is_glibc "$name"; then
    cp -L "$path" "$bundle/lib/glibc/$name"
    glibc+=("$name")
  elif is_cxx_runtime "$name"; then
    cp -L "$path" "$bundle/lib/compat/$name"
    compat+=("$name")
  else
    cp -L "$path" "$bundle/lib/$name"
    bundled+=("$name")
  fi
done
# The loader is named by its absolute path in the binaries; keep its usual name too.
loader=$(ls "$bundle/lib/glibc"/ld-linux-x86-64.so.* 2>/dev/null | head -n 1 || true)
if [[ -z "$loader" ]]; then
  echo "gpu_bundle: warning: no ld-linux loader found; the old-glibc fallback is unavailable"
fi

# The cache holds the architectures only when they were given on the command line; the
# project's default ("80;90") is a plain variable, so fall back to the compile flags.
archs=$(grep -E '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" | cut -d= -f2 || true)
if [[ -z "$archs" && -f "$build/build.ninja" ]]; then
  archs=$(grep -oE 'code=\[?compute_[0-9]+,sm_[0-9]+' "$build/build.ninja" | grep -oE 'sm_[0-9]+' \
    | sort -u | sed 's/sm_//' | paste -sd ';' || true)
fi
if [[ ";$archs;" != *";90"* && "$archs" != all* && "$archs" != native ]]; then
  echo "gpu_bundle: warning: CUDA architectures '$archs' have no 90: an H100/H200 would JIT from PTX or fail"
fi

# ---- Scripts -----------------------------------------------------------------------------
cp "$root/scripts/gpu_check.sh" "$bundle/scripts/"
mkdir -p "$bundle/scripts/pylib" "$bundle/scripts/gpu_check"
cp "$root"/scripts/gpu_check/*.py "$bundle/scripts/gpu_check/"
cp "$root/scripts/pylib/perf_targets.py" "$root/scripts/pylib/run_record.py" \
   "$root/scripts/pylib/collectives_vs_raw.py" "$bundle/scripts/pylib/"
cp "$root/scripts/peer/torch_reference.py" "$root/scripts/peer/torch_allreduce.py" \
   "$root/scripts/peer/models.py" "$root/scripts/peer/measure.py" \
   "$root/scripts/peer/workload_table.py" "$bundle/scripts/peer/"

# ---- Manifest ----------------------------------------------------------------------------
# The Open MPI of the bundled libmpi: Debian's ompi_info when it reports on that very library,
# else the version string libmpi carries. The GPU machine's mpirun starts our ranks, and its
# daemons must be of the same version (scripts/gpu_check/tools.py: mpi_refusal).
mpi_version() {
  local lib=$1 v=""
  if command -v ompi_info >/dev/null &&
     [[ $(ldd "$(command -v ompi_info)" 2>/dev/null | awk '/libmpi\.so/ {print $3}') -ef "${seen[$(basename "$lib")]}" ]]; then
    v=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p' | head -n 1)
  fi
  [[ -n "$v" ]] || v=$(strings -a "$lib" | grep -m 1 -xE 'v?[0-9]+\.[0-9]+\.[0-9]+' | sed 's/^v//')
  echo "${v:-unknown}"
}
mpi_lib=$(ls "$bundle"/lib/libmpi.so.* 2>/dev/null | head -n 1 || true)
if [[ -n "$mpi_lib" ]]; then
  mpi_line="$(mpi_version "$mpi_lib") (lib/$(basename "$mpi_lib"))"
else
  mpi_line="none (no libmpi bundled)"
fi
need_version() {  # highest symbol version of family $2 (GLIBC, GLIBCXX, CXXABI) needed by $1
  objdump -T "$1" 2>/dev/null | grep -o "$2_[0-9.]*" | sort -uV | tail -n 1
}
{
  echo "ddpbench GPU bundle"
  echo "created:   $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit:    $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "build:     $build ($(grep -E '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" | cut -d= -f2 || true))"
  echo "cuda arch: $archs"
  echo "nvcc:      $(grep -E '^CMAKE_CUDA_COMPILER:' "$build/CMakeCache.txt" | cut -d= -f2 || true)"
  echo "binaries:  $(cd "$bundle/bin" && echo *)"
  echo "open mpi:  $mpi_line"
  echo "lib:       ${bundled[*]}"
  echo "lib/compat (only if the system libstdc++ is too old): ${compat[*]}"
  echo "lib/glibc  (only if the system glibc is too old, via the bundled loader): ${glibc[*]}"
  echo "expected on the GPU machine (CUDA toolkit/driver): ${provided[*]} libcuda.so.1"
  echo "needs:"
  for b in "$bundle"/bin/* "$bundle"/lib/*.so*; do
    echo "  $(basename "$b"): $(need_version "$b" GLIBC) $(need_version "$b" GLIBCXX) $(need_version "$b" CXXABI)"
  done
} > "$bundle/MANIFEST.txt"

# ---- Size --------------------------------------------------------------------------------
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
size_of() { du -sb "$1" | cut -f1; }
total=$(size_of "$bundle")
echo "gpu_bundle: $bundle"
printf '  %-11s %7s MiB\n' bin "$(mib "$(size_of "$bundle/bin")")"
printf '  %-11s %7s MiB\n' lib "$(mib "$(find "$bundle/lib" -maxdepth 1 -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')")"
for d in lib/compat lib/glibc scripts; do
  printf '  %-11s %7s MiB\n' "$d" "$(mib "$(size_of "$bundle/$d")")"
done
printf '  %-11s %7s MiB unpacked\n' total "$(mib "$total")"
echo "  lib: ${bundled[*]}"
echo "  from the GPU machine: ${provided[*]}"
# What travels is BUNDLE_DIR.tar.gz (the device tool carries at most 64 MiB; OpenBLAS alone is
# 35 MiB unpacked): gpu_check.sh --prebuilt takes the archive and unpacks it there.
archive="$bundle.tar.gz"
tar -C "$(dirname "$bundle")" -czf "$archive" "$(basename "$bundle")"
packed=$(size_of "$archive")
printf '  %-11s %7s MiB (limit %s MiB): %s\n' archive "$(mib "$packed")" "$limit_mib" "$archive"
if (( packed > limit_mib * 1048576 )); then
  echo "gpu_bundle: the archive is $(mib "$packed") MiB, over the $limit_mib MiB limit" >&2
  exit 1
fi
