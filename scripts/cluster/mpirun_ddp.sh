#!/usr/bin/env bash
# DDP with Open MPI's mpirun as the launcher: ranks read OMPI_COMM_WORLD_RANK,
# OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_RANK (see comm/rank_env.h); MPI is only the
# launcher, communication is NCCL (GPUs) or Gloo (CPUs) through the TCPStore on rank 0.
#
#   scripts/cluster/mpirun_ddp.sh HOSTFILE NUM_RANKS [ddpbench run flags]
#
# Without run flags it trains gpt2-small on the GPUs (8 sequences per rank, 50 steps); any
# flag given replaces that default set, e.g. `--device cpu --workload mlp-small
# --global-batch 16 --steps 5`. MPIRUN_FLAGS adds mpirun options (tests use
# "--oversubscribe", and "--allow-run-as-root" where they run as root).
set -euo pipefail
hostfile=$1
np=$2
shift 2
export MASTER_ADDR=${MASTER_ADDR:-$(head -n 1 "$hostfile" | awk '{print $1}')}
export MASTER_PORT=${MASTER_PORT:-29500}
export DDPBENCH_STORE_TOKEN=${DDPBENCH_STORE_TOKEN:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
BIN=${DDPBENCH_BIN:-build/release/bench/ddpbench}
run_flags=("$@")
if [[ ${#run_flags[@]} -eq 0 ]]; then
  run_flags=(--device cuda --workload gpt2-small --global-batch $((8 * np)) --steps 50 --warmup 5)
fi
# The interface each rank binds to, where set, goes to every host (mpirun passes only what -x names).
pass_env=()
for v in DDPBENCH_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME; do
  [[ -n ${!v:-} ]] && pass_env+=(-x "$v")
done
# shellcheck disable=SC2086  # MPIRUN_FLAGS is a list of options
mpirun -np "$np" --hostfile "$hostfile" ${MPIRUN_FLAGS:-} "${pass_env[@]}" \
  -x MASTER_ADDR -x MASTER_PORT -x DDPBENCH_STORE_TOKEN -x NCCL_DEBUG \
  "$BIN" run --mode ddp --world-size "$np" "${run_flags[@]}"
