#!/usr/bin/env bash
# The soak benchmark (issue 25, §6; not a CI test): long runs under abuse, with what each
# process holds at the start and the end, so that a leak shows as growth.
#   1. DDP on 3 ranks for STEPS (default 20000) steps of embed-tiny, while scripts/pylib/soak.py
#      abuses rank 0's TCPStore port (churned, idle, garbage and oversized connections) for the
#      whole run: each rank's resident memory and open descriptors, and the flight recorder's
#      dump size (SIGUSR1), early in the run and at its end.
#   2. SUITES (default 50) suites back to back, each in a folder of its own: each suite's
#      duration and peak memory, and what is left behind (processes, flight folders in TMPDIR).
#   3. Part 1 across two emulated hosts (scripts/bench/soak_hosts.py: 4 ranks, 2 a host, the
#      store on host 0 attacked from host 1), where network namespaces can be made: each
#      rank's memory, descriptors and threads.
# Bounds (docs/performance.md, "Soak"): no rank's RSS grows by more than 10% plus 2 KiB a step
# (each step's record, which the run keeps for its record's steps[]), no rank holds more
# descriptors at the end than at the start (+2), the flight dump stays within its 2000-entry
# ring, no process or folder is left behind. Exit 1 when one is broken.
#   scripts/bench/soak.sh [BUILD_DIR]     (default build/ci)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/ci}/bench/ddpbench
[[ -x "$bin" ]] || { echo "soak: no $bin (build first: scripts/test.sh)" >&2; exit 2; }
steps=${STEPS:-20000} suites=${SUITES:-50}
py=/usr/bin/python3
soak_py="$root/scripts/pylib/soak.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpb-soak.XXXXXX")
trap 'pkill -f "ddpb-soak-marker" 2>/dev/null || true; rm -rf "$work"' EXIT
broken=0
fail() { echo "soak: BOUND BROKEN: $*"; broken=1; }

# ---- 1. DDP under store abuse -------------------------------------------------------------
port=$((30000 + RANDOM % 20000))
marker="--seed 7$$"  # ddpb-soak-marker: this soak's processes
echo "== DDP: 3 ranks, $steps steps of embed-tiny, store on port $port under attack"
t0=$SECONDS
"$bin" run --mode ddp --world-size 3 --workload embed-tiny --global-batch 24 --steps "$steps" \
  --warmup 5 --master-port "$port" --flight-dir "$work/flight" $marker \
  > "$work/ddp.log" 2>&1 &
launcher=$!
for _ in $(seq 1 100); do
  ranks=$(pgrep -f -- "run --mode ddp .*$marker" | grep -v "^$launcher\$" || true)
  [[ $(wc -w <<<"$ranks") -ge 3 ]] && break
  sleep 0.1
done
sleep 5  # past start-up: the allocator's caches are warm
rank0=$(for p in $ranks; do grep -qz '^RANK=0$' "/proc/$p/environ" 2>/dev/null && echo "$p"; done; true)
"$py" "$soak_py" attack "$port" 100000 > "$work/attack.json" 2>/dev/null &
attacker=$!
start=$("$py" "$soak_py" sample $ranks)
kill -USR1 "$rank0"; sleep 0.5
dump_start=$(stat -c %s "$work/flight/rank0.json" 2>/dev/null || echo 0)
# The attack stops at 95% of the steps; the end sample is taken after it, while the ranks still
# train, so that it shows what they kept, not the attacker's connections still open.
last=$start dump_end=$dump_start
while kill -0 "$launcher" 2>/dev/null; do
  step=$(tail -c 300 "$work/ddp.log" | grep -oE 'step +[0-9]+' | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  if [[ -n "$attacker" ]] && (( step >= steps * 95 / 100 )); then
    kill "$attacker" 2>/dev/null; wait "$attacker" 2>/dev/null || true
    attacker=""
    sleep 2
    last=$("$py" "$soak_py" sample $ranks)
    kill -USR1 "$rank0" 2>/dev/null && sleep 0.5
    dump_end=$(stat -c %s "$work/flight/rank0.json" 2>/dev/null || echo 0)
  fi
  sleep 1
done
wait "$launcher" && ddp_rc=0 || ddp_rc=$?
[[ -z "$attacker" ]] || { kill "$attacker" 2>/dev/null; wait "$attacker" 2>/dev/null || true; }
echo "exit $ddp_rc after $((SECONDS - t0)) s; attack: $(cat "$work/attack.json" 2>/dev/null || echo '(killed before its summary)')"
"$py" "$soak_py" bounds "$start" "$last" "$dump_start" "$dump_end" "$steps" ||
  fail "a rank grew past its bounds over $steps steps"
[[ $ddp_rc == 0 ]] || fail "the DDP run under attack exited $ddp_rc ($(tail -n 2 "$work/ddp.log"))"

# ---- 2. Suites back to back ----------------------------------------------------------------
echo "== $suites suites back to back"
cat > "$work/suite.json" <<'JSON'
{"workloads": ["embed-tiny"], "modes": ["single", "ddp"], "world_sizes": [1, 2], "steps": 2,
 "warmup": 0, "per_device_batch": {"embed-tiny": 8}, "bucket_sweep_mb": [],
 "bucket_autotune": false, "overlap_off": false, "comm_hooks": [], "flags": [],
 "timeout_s": 30}
JSON
tmp_before=$(ls "${TMPDIR:-/tmp}" | grep -c ddpbench-flight || true)
durations=()
for i in $(seq 1 "$suites"); do
  t=$SECONDS
  "$bin" suite "$work/suite.json" --device cpu --out "$work/suite-$i" > "$work/suite-$i.log" 2>&1 ||
    fail "suite $i exited $? ($(tail -n 1 "$work/suite-$i.log"))"
  durations+=($((SECONDS - t)))
done
left=$(pgrep -f -- "$work/suite-" | wc -l || true)
tmp_after=$(ls "${TMPDIR:-/tmp}" | grep -c ddpbench-flight || true)
echo "  durations (s): first ${durations[0]}, last ${durations[-1]}; processes left: $left;" \
     "flight folders in TMPDIR: $tmp_before -> $tmp_after"
[[ $left == 0 ]] || fail "$left processes of the suites outlived them"
(( durations[-1] <= 2 * durations[0] + 5 )) || fail "the last suite took ${durations[-1]} s, the first ${durations[0]} s"

# ---- 3. DDP across two emulated hosts ------------------------------------------------------
echo "== DDP across two emulated hosts: 4 ranks, $steps steps of embed-tiny, store under attack"
hosts_rc=0
"$py" "$root/scripts/bench/soak_hosts.py" "$(dirname "$(dirname "$bin")")" "$steps" || hosts_rc=$?
[[ $hosts_rc == 0 || $hosts_rc == 77 ]] || fail "the soak across hosts broke a bound or failed"
[[ $broken == 0 ]] && echo "soak: every bound held" || exit 1
