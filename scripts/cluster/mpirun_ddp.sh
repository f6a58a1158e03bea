#!/usr/bin/env bash
# DDP with Open MPI's mpirun as the launcher: ranks read OMPI_COMM_WORLD_RANK,
# OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_RANK (see comm/rank_env.h); MPI is only the
# launcher, communication is NCCL (GPUs) or Gloo (CPUs) through the TCPStore on rank 0.
#
#   scripts/cluster/mpirun_ddp.sh HOSTFILE NUM_RANKS [extra ddpbench flags]
set -euo pipefail
hostfile=$1
np=$2
shift 2
export MASTER_ADDR=${MASTER_ADDR:-$(head -n 1 "$hostfile" | awk '{print $1}')}
export MASTER_PORT=${MASTER_PORT:-29500}
export DDPBENCH_STORE_TOKEN=${DDPBENCH_STORE_TOKEN:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
BIN=${DDPBENCH_BIN:-build/release/bench/ddpbench}
mpirun -np "$np" --hostfile "$hostfile" \
  -x MASTER_ADDR -x MASTER_PORT -x DDPBENCH_STORE_TOKEN -x NCCL_DEBUG \
  "$BIN" run --mode ddp --device cuda --world-size "$np" --workload gpt2-small \
  --global-batch $((8 * np)) --steps 50 --warmup 5 "$@"
