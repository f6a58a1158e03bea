// `ddpbench suite`: runs the matrix of bench/suite/suite_spec.h, one `ddpbench run` child process
// per entry, into one results folder (docs/suite-format.md), with a progress bar, per-run
// failure records, Ctrl-C handling and --resume.
#pragma once

#include <string>

namespace ddpb::bench {

struct SuiteOptions {
  std::string file;         // SUITE.json overriding the default matrix
  std::string out;          // results folder (default ddpbench-results/suite-<time>)
  std::string device;       // cpu | cuda; empty: cuda when a GPU is usable, else cpu
  int max_world_size = -1;  // -1: no cap
  bool quick = false;
  bool with_pytorch = false;
  bool validate_projection = false;  // add world size 3 and check the projection against it
  std::string resume;                // results folder of an interrupted suite
  std::string hosts;                 // --hosts FILE (Note [Runs across hosts])
  std::string launch;                // --launch CMD, with {host}; empty: ssh
};

// Returns the process exit code: 0 when every run succeeded and computed the right thing,
// 1 when a run failed or a correctness check failed, 130/143 when interrupted.
int run_suite(const SuiteOptions& options);

}  // namespace ddpb::bench
