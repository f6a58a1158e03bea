// The training loop shared by every mode of `ddpbench run`. A ModeRunner owns the model(s)
// and performs one step; the loop owns data, optimizer, dumps, timing statistics and the
// record, so that single, DP and DDP are measured the same way.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run_config.h"
#include "core/optim.h"
#include "workloads/model.h"

namespace ddpb::bench {

struct StepOutcome {
  float loss = 0;
  double step_ms = 0;
  std::vector<std::pair<std::string, double>> phases_ms;  // in step order
  nlohmann::json extra;                                    // mode-specific per-step data
};

class ModeRunner {
 public:
  virtual ~ModeRunner() = default;
  // The module whose parameters are trained and dumped (DP: the master on device 0).
  virtual Model& model() = 0;
  // Where the data loader puts batches (the device for single; host memory for DP).
  virtual Device data_device() const = 0;
  virtual std::vector<Device> devices() const = 0;
  virtual StepOutcome step(const Batch& batch, optim::Optimizer& optimizer) = 0;
  // Mode-specific description for the record (transport, logical replicas, ...).
  virtual nlohmann::json describe() const { return nlohmann::json::object(); }
};

std::unique_ptr<ModeRunner> make_single_runner(const RunConfig& config, const WorkloadSpec& spec);
std::unique_ptr<ModeRunner> make_dp_runner(const RunConfig& config, const WorkloadSpec& spec);

// Runs the training described by `config` (already validated) and returns its record.
// Prints per-step losses (unless quiet) and a summary to stdout.
nlohmann::json run_training(const RunConfig& config);

}  // namespace ddpb::bench
