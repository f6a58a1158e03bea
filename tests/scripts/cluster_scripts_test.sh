#!/usr/bin/env bash
# The multi-node job scripts, run for real on this machine with 2 CPU ranks:
#   - scripts/cluster/mpirun_ddp.sh under Open MPI's mpirun (a hostfile of 127.0.0.1);
#   - scripts/cluster/slurm_ddp.sbatch under a fake `srun` and `scontrol` on PATH, which set
#     the Slurm variables a real allocation would and start the ranks;
# and each run's final parameters must equal those of ddpbench's own launcher on the same
# configuration, bit for bit.
#   tests/scripts/cluster_scripts_test.sh BUILD_DIR   (exit 77: skipped, no mpirun)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)/bench/ddpbench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The same training everywhere: 2 ranks on CPU, a few SGD steps.
run_flags=(--device cpu --workload mlp-small --global-batch 16 --steps 3 --warmup 0 --seed 5
  --timeout 60 --quiet)
port=$((29700 + $$ % 200))

same_params() {  # A B: every tensor equal
  /usr/bin/python3 - "$1" "$2" "$root/scripts/peer" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import safetensors_lite
a, _ = safetensors_lite.load(sys.argv[1])
b, _ = safetensors_lite.load(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
bad = [k for k in a if not bool((a[k] == b[k]).all())]
assert not bad, f"parameters differ: {bad}"
print(f"{len(a)} tensors equal")
PY
}

"$bin" run --mode ddp --world-size 2 "${run_flags[@]}" --save-params "$tmp/own.safetensors" \
  > "$tmp/own.log" 2>&1 || { cat "$tmp/own.log"; exit 1; }

# --- Open MPI ------------------------------------------------------------------------------
if command -v mpirun > /dev/null; then
  echo "127.0.0.1 slots=2" > "$tmp/hosts"
  mpi_flags="--oversubscribe"
  [[ $(id -u) -eq 0 ]] && mpi_flags+=" --allow-run-as-root"  # CI runs as root
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DDPBENCH_BIN=$bin MPIRUN_FLAGS=$mpi_flags \
    timeout 180 "$root/scripts/cluster/mpirun_ddp.sh" "$tmp/hosts" 2 "${run_flags[@]}" \
    --save-params "$tmp/mpi.safetensors" > "$tmp/mpi.log" 2>&1 || { cat "$tmp/mpi.log"; exit 1; }
  grep -q "launched by mpirun" "$tmp/mpi.log" || { cat "$tmp/mpi.log"; echo "not launched by mpirun"; exit 1; }
  same_params "$tmp/own.safetensors" "$tmp/mpi.safetensors"
  echo "PASS: mpirun_ddp.sh"
else
  echo "SKIPPED: no mpirun (apt install openmpi-bin)"
  exit 77
fi

# --- Slurm, faked ---------------------------------------------------------------------------
mkdir "$tmp/fake"
cat > "$tmp/fake/scontrol" <<'SH'
#!/usr/bin/env bash
# `scontrol show hostnames LIST`: this machine's loopback stands for every node.
[[ "$1 $2" == "show hostnames" ]] || { echo "fake scontrol: unsupported: $*" >&2; exit 2; }
echo 127.0.0.1
SH
cat > "$tmp/fake/srun" <<'SH'
#!/usr/bin/env bash
# srun inside an allocation: SLURM_NTASKS tasks of the command, each with SLURM_PROCID and
# SLURM_LOCALID; --kill-on-bad-exit=1 stops the others when one fails.
args=()
for a in "$@"; do [[ $a == --kill-on-bad-exit=* ]] || args+=("$a"); done
pids=()
for ((r = 0; r < SLURM_NTASKS; ++r)); do
  SLURM_PROCID=$r SLURM_LOCALID=$r "${args[@]}" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  if ! wait "$p"; then rc=1; kill "${pids[@]}" 2> /dev/null || true; fi
done
exit $rc
SH
chmod +x "$tmp/fake/scontrol" "$tmp/fake/srun"
PATH="$tmp/fake:$PATH" SLURM_NTASKS=2 SLURM_JOB_NODELIST=node[1-2] SLURM_JOB_ID=77 \
  MASTER_PORT=$((port + 1)) DDPBENCH_BIN=$bin \
  timeout 180 bash "$root/scripts/cluster/slurm_ddp.sbatch" "${run_flags[@]}" \
  --save-params "$tmp/slurm.safetensors" > "$tmp/slurm.log" 2>&1 || { cat "$tmp/slurm.log"; exit 1; }
grep -q "launched by slurm" "$tmp/slurm.log" || { cat "$tmp/slurm.log"; echo "not launched by slurm"; exit 1; }
same_params "$tmp/own.safetensors" "$tmp/slurm.safetensors"
echo "PASS: slurm_ddp.sbatch"
