# Sourced by scripts/test.sh and scripts/bench.sh: the one Release build both commands share
# (build/ci unless BUILD_DIR says otherwise), configured the same way by either, so that running
# them in either order builds each object once: bench.sh builds the `ddpbench` target of it,
# test.sh everything.
#   main_build_dir ROOT            prints the build directory
#   main_build_configure ROOT DIR  configures DIR (CUDA code compiled wherever nvcc exists)
#   main_build_link ROOT DIR       points ROOT/ddpbench at DIR's binary: the stable path the
#                                  README names
main_build_dir() {
  echo "${BUILD_DIR:-$1/build/ci}"
}

main_build_configure() {
  local root=$1 dir=$2 cuda_archs="80;90"
  # Without a GPU the CUDA code compiles for one architecture: that checks that it builds and
  # links, in half the time of the two a GPU machine gets.
  nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null || cuda_archs=90
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPB_WERROR=ON \
    -DDDPB_UNITY_LIBS=ON -DDDPBENCH_CUDA="${DDPBENCH_CUDA:-AUTO}" \
    "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-$cuda_archs}" >/dev/null
}

main_build_link() {
  local root=$1 dir=$2
  # A relative link inside the checkout when the build is there, so a moved checkout keeps it.
  local target=$dir/bench/ddpbench
  [[ $target == "$root"/* ]] && target=${target#"$root"/}
  ln -sfn "$target" "$root/ddpbench"
}
