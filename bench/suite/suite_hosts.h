// `ddpbench suite --hosts FILE [--launch CMD]`: the suite's runs whose ranks are processes,
// spread over hosts.
//
// Note [Runs across hosts]
// The suite runs on the first host in FILE: it holds the results folder and starts node 0 of
// every run itself, as a child like any other run. Nodes 1.. start through the launch
// command, `ssh -o BatchMode=yes {host}` by default ({host} replaced by a host's name; for
// the emulated hosts `scripts/cluster/netns_cluster.sh rsh {host}`; `srun -N1 -n1 -w {host}
// sh -c` in an allocation). As ssh does, the command takes one shell line as its last
// argument: `read` the job's store token from standard input (never on a command line, where
// `ps` shows it), export the interface and thread variables set here (ssh carries no
// environment), `cd` to the results folder's absolute path and exec ddpbench with the run's
// flags and `--nnodes N --node-rank K --master-addr A --master-port P`. Every node checks the
// folders its flags name, so the results folder must be on a file system every host shares,
// and ddpbench at the same path on each, as mpirun needs.
// A run fills hosts in order, `slots` ranks each (mpirun's by-slot): a run of W ranks takes the
// fewest hosts N >= ceil(W / slots) that hold W / N ranks each. A run on one host, every design
// whose ranks are not processes (DP), and an MPI run (its launcher is mpirun here) run here,
// on the first host.
// When node 0 ends, the other nodes have as long as the collective timeout to follow (a node
// whose peers are gone fails within it), then are stopped. Stopping ssh stops only the
// client: a rank left on a host that ssh reaches ends at its own collective timeout.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "bench/suite/child_process.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

struct SuiteHost {
  std::string name;
  std::string address;  // dotted IPv4: given in FILE, else the name's
  int slots = 1;        // ranks a run may place on it
};

struct SuiteHosts {
  std::vector<SuiteHost> hosts;  // empty: every run on this machine
  std::string launch = "ssh -o BatchMode=yes {host}";
  bool empty() const { return hosts.empty(); }
  // How many hosts a run of `world` ranks of a design with processes per rank spans: 1 without
  // hosts or when the first host's slots hold it. Throws UsageError when the ranks cannot be
  // spread evenly over the hosts (Note [Runs across hosts]).
  int nodes_for(int world) const;
};

// Reads a hosts file: a line per host, "NAME [ADDRESS] [slots=K]", '#' starting a comment, as
// `netns_cluster.sh hosts` prints them. Every host has the same slots. Checks that the first
// host is this machine (one of its interface addresses), and that the launch command names
// {host}. Throws UsageError naming the file and line.
SuiteHosts read_suite_hosts(const std::string& path, const std::string& launch);

// The hosts as suite.json keeps them, and back (--resume: checked as read_suite_hosts checks).
std::vector<reports::SuiteHostInfo> host_infos(const SuiteHosts& hosts);
SuiteHosts hosts_from_record(const std::vector<reports::SuiteHostInfo>& infos,
                             const std::string& launch, const std::string& what);

// What a node of a run across hosts left: its host, log and exit code.
struct NodeOutcome {
  std::string host;
  std::string log;  // path
  int exit_code = 0;
};

// Runs `node0` (a ChildSpec of the run, its argv without node flags) on `nnodes` hosts: node 0
// here, the others through the launch command (Note [Runs across hosts]), each with its own
// log next to node 0's ("<log>-node<K>.log"). Returns node 0's result; `others` gets the rest.
ChildResult run_across_hosts(ChildSpec node0, const SuiteHosts& hosts, int nnodes,
                             double collective_timeout_s, std::vector<NodeOutcome>* others);

}  // namespace ddpb::bench
