// `ddpbench collectives`: nccl-tests' interface over gloo and nccl (bench/collectives/).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "bench/collectives/collectives.h"
#include "comm/process_group.h"

namespace ddpb::bench {

struct CollectivesCommandOptions {
  CollectivesOptions sweep;
  std::string min_bytes = "8", max_bytes = "32M", step_bytes;  // -b, -e, -i: 8, 1K, 128M, 1G
  std::string ops = "allreduce";                               // -o: a comma-separated list
  std::string dtype = "f32";                                   // -d
  std::optional<comm::CommBackend> backend;                    // default: nccl on cuda, gloo on cpu
  std::string device = "cpu";
  int world_size = 2;
  bool world_size_given =
      false;  // -g on the command line (a launcher's world wins, and must agree)
  int nnodes = 1, node_rank = 0;  // as run's: this launcher is one node of a job
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int node_size = 0;  // --node-size: also the sweeps within and between nodes; 0: none
  double timeout_s = 300;
  std::string json_out;  // -J
};

CLI::App* add_collectives_command(CLI::App& app, CollectivesCommandOptions& o);

// Without a launcher's environment: starts --world-size ranks of this command through
// ddpbench's launcher and returns their exit code. As a rank (ddpbench's launcher, mpirun,
// srun, torchrun): joins the others, runs the sweep, and rank 0 prints nccl-tests' table per
// operation and writes -J. Throws UsageError for bad flags before anything starts.
int collectives_command(CollectivesCommandOptions o, int argc, char** argv);

}  // namespace ddpb::bench
