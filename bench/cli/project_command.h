// `ddpbench project RESULTS_DIR|RUN.json --devices 8,64,512 [--topology PRESET|FILE.json]
// [--per-device-batch B] [--device-flops R] [--json OUT] [-o report.html|md]`: the calibrated
// what-if model (bench/project/projection.h), compute at the topology's device rate or R
// (bench/project/compute_rate.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ddpb::bench {

struct ProjectOptions {
  std::string input;
  std::vector<int> devices;
  std::string topology = "measured";
  std::string json_out;
  std::string report_out;
  int64_t per_device_batch = 0;
  double target_flops = 0;
  std::string device_memory;  // --device-memory, e.g. "80GiB"; empty: not asked
  std::string
      inter;  // --inter: a collectives record across hosts (Note [Inter-node link from a sweep])
  int node_size = 0;  // --node-size, with --inter
};

CLI::App* add_project_command(CLI::App& app, ProjectOptions& o);

// Prints the table; writes the record and the report when asked (their paths already
// checked by the CLI's checked_output). Returns the exit code; throws UsageError for bad
// input (the CLI exits 2).
int project_command(const ProjectOptions& o);

}  // namespace ddpb::bench
