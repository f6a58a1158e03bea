# Sourced by scripts/test.sh. side_by_side LABEL JOBS CMD...: runs the command lines JOBS at a
# time, each into a log of its own, and prints one line per command as it ends. A failed
# command's log is printed whole; returns 1 if any failed, after every command has ended (a
# sanitizer pass reports all its failures, not the first).
side_by_side() {
  local label=$1 jobs=$2 dir i=0 failed=0
  shift 2
  dir=$(mktemp -d)
  local -A running=()
  side_by_side_reap() {
    local pid rc=0 entry
    wait -n -p pid || rc=$?
    entry=${running[$pid]}
    unset "running[$pid]"
    if [[ $rc == 0 ]]; then
      echo "-- ${entry#*|} ($label): passed"
    else
      failed=1
      echo "-- ${entry#*|} ($label): FAILED (exit $rc); its output:"
      cat "$dir/${entry%%|*}.log"
    fi
  }
  for cmd in "$@"; do
    while ((${#running[@]} >= jobs)); do side_by_side_reap; done
    bash -c "$cmd" >"$dir/$i.log" 2>&1 &
    running[$!]="$i|$cmd"
    i=$((i + 1))
  done
  while ((${#running[@]} > 0)); do side_by_side_reap; done
  rm -rf "$dir"
  return "$failed"
}
