#!/usr/bin/env bash
# A cluster on one machine: N emulated hosts, each a network namespace with its own hostname,
# joined by a bridge, every link shaped to a bandwidth with tc tbf.
#
#   netns_cluster.sh up N [--rate 1gbit] [--node-size K]
#   netns_cluster.sh run HOST CMD...     run CMD on HOST (h0, h1, ... or its full name)
#   netns_cluster.sh addr HOST           print HOST's address
#   netns_cluster.sh hosts               print one line per host: name address
#   netns_cluster.sh link HOST up|down   take HOST's link down or bring it back
#   netns_cluster.sh rsh HOST CMD...     as ssh does: CMD is one shell line, HOST a name or an
#                                        address. Open MPI's launch agent across these hosts:
#                                        mpirun --mca plm_rsh_agent "netns_cluster.sh rsh"
#   netns_cluster.sh with N [up flags] -- CMD...
#                                        up, run CMD on this machine with DDPB_CLUSTER_HOSTS set
#                                        to the hosts file, down on any exit
#   netns_cluster.sh down                remove every host, link and the bridge
#
# Host i is the namespace ${DDPB_CLUSTER_PREFIX}h<i> (prefix "ddpb" by default; give clusters
# that live at the same time different prefixes), hostname the same, address 10.<net>.0.<i+1>/24
# on eth0. --node-size K is written into the hosts file as "slots=K" for mpirun, and as the
# ranks each host runs.
#
# What this kernel cannot do: it has tbf and htb but no netem, so links get a bandwidth and
# never a latency or loss. A veth pair carries about 7-9 Gbit/s on a 2-core machine, so keep
# emulated links at or below 2 Gbit/s or the CPU, not the link, sets the pace.
#
# Needs root and iproute2. `up` checks both and says which is missing (exit 2); a failure
# half-way through `up` removes what it made.
set -Eeuo pipefail  # -E: the ERR trap of `up` also fires inside the functions it calls

prefix=${DDPB_CLUSTER_PREFIX:-ddpb}
state_dir=${DDPB_CLUSTER_STATE:-/run/ddpbench-cluster}
state=$state_dir/$prefix
bridge=${prefix}br

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "netns_cluster: $*" >&2; exit 1; }
usage_error() { echo "netns_cluster: $*" >&2; exit 2; }

# A prefix's own subnet, so that two clusters never share addresses in the kernel's tables.
subnet() { echo "10.$((200 + $(printf '%s' "$prefix" | cksum | cut -d' ' -f1) % 50))"; }

can_make_namespaces() {
  [[ $(id -u) == 0 ]] || { echo "not root"; return 1; }
  command -v ip >/dev/null || { echo "no 'ip' (iproute2)"; return 1; }
  command -v tc >/dev/null || { echo "no 'tc' (iproute2)"; return 1; }
  command -v unshare >/dev/null || { echo "no 'unshare' (util-linux)"; return 1; }
  local probe=${prefix}probe$$
  ip netns add "$probe" 2>/dev/null || { echo "'ip netns add' fails here"; return 1; }
  ip netns del "$probe"
}

namespace_of() {
  local host=$1
  [[ $host == "$prefix"* ]] || host=$prefix$host
  [[ -e /run/netns/$host ]] || die "no host '$1' (the cluster '$prefix' has: $(hosts_list | tr '\n' ' '))"
  echo "$host"
}

hosts_list() { ls /run/netns 2>/dev/null | grep -E "^${prefix}h[0-9]+$" | sort -V || true; }

# tbf's bucket: 2 ms at RATE, at least 32 KiB. A real link has no bucket, and every byte the
# bucket lets through at once after an idle gap is a byte that crossed for free: with a 256 KiB
# bucket at 200 Mbit/s, DDP's two gpt-tiny buckets arrived 20% sooner than the rate allows
# (each refilled during the compute before it). Below about 2 ms the timer, not the rate,
# sets the pace (32 KiB at 1 Gbit/s held 72% of the rate).
burst_bytes() {
  local rate=$1 n=${1%%[kmg]bit} scale=1
  case $rate in *kbit) scale=1000 ;; *mbit) scale=1000000 ;; *gbit) scale=1000000000 ;; esac
  local bytes=$((n * scale / 4000))
  echo $((bytes > 32768 ? bytes : 32768))
}

shape() {  # shape DEV RATE [NETNS]: tbf at RATE, a bucket of burst_bytes, 50 ms of queue
  local dev=$1 rate=$2 ns=${3:-}
  local run=(); [[ -n $ns ]] && run=(ip netns exec "$ns")
  "${run[@]}" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$(burst_bytes "$rate")" \
    latency 50ms
}

cmd_down() {
  local h
  for h in $(hosts_list); do
    ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip link del "${h}v" 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$state"
}

cmd_up() {
  [[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -ge 1 && $1 -le 64 ]] || usage_error "up needs a host count from 1 to 64, got '${1:-}'"
  local n=$1 rate=1gbit node_size=1
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate) rate=${2:?--rate needs a value such as 1gbit or 200mbit}; shift 2 ;;
      --node-size) node_size=${2:?--node-size needs a count}; shift 2 ;;
      *) usage_error "unknown option to up: '$1'" ;;
    esac
  done
  [[ $rate =~ ^[0-9]+(k|m|g)?bit$ ]] || usage_error "--rate must look like 200mbit or 1gbit, got '$rate'"
  [[ $node_size =~ ^[1-9][0-9]*$ ]] || usage_error "--node-size must be a positive count, got '$node_size'"
  local why
  why=$(can_make_namespaces) || usage_error "cannot make network namespaces: $why"
  [[ -z $(hosts_list) ]] || die "the cluster '$prefix' is already up: run 'down' first"
  trap 'cmd_down' ERR
  mkdir -p "$state"
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
  local net i h
  net=$(subnet)
  : >"$state/hosts"
  for ((i = 0; i < n; i++)); do
    h=${prefix}h$i
    ip netns add "$h"
    ip link add "${h}v" type veth peer name eth0 netns "$h"
    ip link set "${h}v" master "$bridge" up
    ip netns exec "$h" ip link set lo up
    ip netns exec "$h" ip addr add "$net.0.$((i + 1))/24" dev eth0
    ip netns exec "$h" ip link set eth0 up
    shape "${h}v" "$rate"       # what the host receives
    shape eth0 "$rate" "$h"     # what the host sends
    echo "$h $net.0.$((i + 1)) slots=$node_size" >>"$state/hosts"
  done
  echo "$rate" >"$state/rate"
  trap - ERR
  cat "$state/hosts"
}

cmd_run() {
  [[ $# -ge 2 ]] || usage_error "run needs a host and a command"
  local ns
  ns=$(namespace_of "$1")
  shift
  # Its own UTS namespace gives the host its own hostname, as a real host has.
  exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

cmd_rsh() {
  [[ $# -ge 2 ]] || usage_error "rsh needs a host and a command"
  local host=$1 ns
  shift
  ns=$(awk -v h="$host" '$1 == h || $2 == h || $1 == "'"$prefix"'" h {print $1}' "$state/hosts")
  [[ -n $ns ]] || die "no host '$host' in $state/hosts"
  cmd_run "$ns" sh -c "$*"
}

cmd_addr() {
  local ns
  ns=$(namespace_of "${1:?addr needs a host}")
  awk -v h="$ns" '$1 == h {print $2}' "$state/hosts"
}

cmd_link() {
  local ns
  ns=$(namespace_of "${1:?link needs a host}")
  [[ ${2:-} == up || ${2:-} == down ]] || usage_error "link needs up or down, got '${2:-}'"
  ip link set "${ns}v" "$2"
}

cmd_with() {
  local up_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do up_args+=("$1"); shift; done
  [[ $# -ge 2 ]] || usage_error "with needs: N [up flags] -- CMD..."
  shift
  cmd_up "${up_args[@]}" >/dev/null  # a failed up cleans up after itself, and nothing else
  trap 'cmd_down' EXIT INT TERM
  DDPB_CLUSTER_HOSTS=$state/hosts "$@"
}

[[ $# -ge 1 ]] || usage
sub=$1
shift
case $sub in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  run) cmd_run "$@" ;;
  rsh) cmd_rsh "$@" ;;
  addr) cmd_addr "$@" ;;
  link) cmd_link "$@" ;;
  hosts) [[ -f $state/hosts ]] && cat "$state/hosts" ;;
  with) cmd_with "$@" ;;
  check) why=$(can_make_namespaces) && echo ok || { echo "$why"; exit 2; } ;;
  -h|--help|help) usage ;;
  *) usage_error "unknown command '$sub' (up, run, rsh, addr, hosts, link, with, down, check)" ;;
esac
