// The training loop shared by every mode of `ddpbench run`. A ModeRunner owns the model(s)
// and performs one step; the loop owns data, optimizer, dumps, timing statistics and the
// record, so that single, DP and DDP are measured the same way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure/trace.h"
#include "bench/run/run_config.h"
#include "core/optim.h"
#include "reports/run_record.h"
#include "workloads/model.h"
#include "workloads/safetensors.h"
#include "workloads/state_dict.h"

namespace ddpb::bench {

struct StepOutcome {
  float loss = 0;
  double step_ms = 0;
  std::vector<std::pair<std::string, double>> phases_ms;  // in step order
  std::optional<reports::StepModeData> mode;              // steps[].mode: per mode
  std::vector<TraceSpan> spans;                           // for --trace: replicas, buckets
};

// Fetches the next batch from the loader (timed as the data phase, and dumped with --dump).
using BatchFn = std::function<Batch()>;

// Which share of the data this process reads: DDP ranks read 1/world_size each.
struct DataPlan {
  int num_replicas = 1;
  int rank = 0;
  int64_t batch_size = 0;  // per step of this process (per micro-step with --accumulate)
};

// Where a runner's process stands in the run. Single and DP are one process: rank 0 of 1.
struct RunnerPlace {
  int rank = 0, world_size = 1;
  Device data_device;  // where the data loader puts batches (the device; host memory for DP)
  DataPlan data;
  std::string batches_file = "batches.safetensors";  // --dump's batch file of this process
  // Rank 0 of DDP (and every single/DP process) writes the record, the trace and the dumps.
  bool primary() const { return rank == 0; }
};

// What a run whose ranks are processes (DDP) adds to the loop: everything that needs the
// other ranks, and the dump files only it has.
class RankedRun {
 public:
  virtual ~RankedRun() = default;
  // More tensors for --dump, as file name -> tensors (PowerSGD's random Q draws).
  virtual std::vector<std::pair<std::string, std::vector<NamedTensor>>> dump_extras() const = 0;
  // Rank 0 merges every rank's record; others return theirs unchanged.
  virtual reports::RunRecord finalize_record(reports::RunRecord record) = 0;
  // --trace: this rank's events go in; rank 0 gets every rank's events and each rank's clock
  // offset onto rank 0's (others get nothing back).
  virtual std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> gather_trace(
      nlohmann::json mine) = 0;
  // With --epochs: whether this rank takes step `step`. Uneven inputs fail by default (every
  // rank says which ranks ran out, and all throw naming them); with --uneven-inputs join a rank
  // out of input shadows its peers until every rank is out (Note [DDP Join]) and returns false.
  // Collective.
  virtual bool another_step(bool have_input, int64_t step) = 0;
};

// Note [The runner seam]
// A ModeRunner is what every design has: the trained model, the devices, one step, a
// description for the record, its optimizer and its full state dict; where its process
// stands (place()) is data, set once by the constructor. The design makes the optimizer and
// hands back the state dict (and takes --init-from's) because a sharded design steps and
// holds only its shard: the loop never reaches past the runner for any of them. What only
// designs whose ranks are processes have sits behind ranked(), so the loop asks for it by
// name rather than every design carrying empty overrides.
class ModeRunner {
 public:
  virtual ~ModeRunner() = default;
  // The module whose parameters are trained and dumped (DP: the master on device 0).
  virtual Model& model() = 0;
  virtual std::vector<Device> devices() const = 0;
  // One training step; calls next_batch() once per batch it consumes.
  virtual StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) = 0;
  // Mode-specific description for the record (transport, logical replicas, ...).
  virtual nlohmann::json describe() const { return nlohmann::json::object(); }
  // The design makes its optimizer, over the parameters its process steps: every design's
  // today is its model's; a sharded design's is its shard.
  virtual std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config) {
    return optim::make_optimizer(config, model().parameters());
  }
  // The full state dict, for --save-params and --dump: the model's; a sharded design gathers
  // it first, and then every rank calls this (a collective).
  virtual std::vector<NamedTensor> full_state_dict() { return state_dict(model()); }
  // --init-from: `load` writes the file's tensors into model(); a sharded design calls it while
  // the full parameters are gathered and copies them back into its shards, and then every
  // rank calls this (a collective).
  virtual void load_full_state_dict(const std::function<void(Model&)>& load) { load(model()); }
  // Bytes of model state the design holds at its peak beyond Note [Model-state memory]'s
  // formula, by category ("parameters", "gradients"): FSDP's units gathered while they run
  // and their full gradients before the reduce-scatter (Note [FSDP's step]). Added to the
  // record's promised memory.
  virtual std::vector<std::pair<std::string, int64_t>> transient_model_state_bytes() const {
    return {};
  }
  // The ranks a sharded design divides its model state over (Note [Model-state memory]): the
  // world, or FSDP's shard group (hybrid_shard shards within a node).
  virtual int shard_ranks(int world_size) const { return world_size; }
  // Non-null when the ranks are processes (DDP).
  virtual RankedRun* ranked() { return nullptr; }

  const RunnerPlace& place() const { return place_; }

 protected:
  RunnerPlace place_;
};

std::unique_ptr<ModeRunner> make_single_runner(const RunConfig& config, const WorkloadSpec& spec);
std::unique_ptr<ModeRunner> make_dp_runner(const RunConfig& config, const WorkloadSpec& spec);
std::unique_ptr<ModeRunner> make_ddp_runner(const RunConfig& config, const WorkloadSpec& spec);
std::unique_ptr<ModeRunner> make_fsdp_runner(const RunConfig& config, const WorkloadSpec& spec);

// Runs the training described by `config` (already validated) and returns its record.
// Prints per-step losses (unless quiet) and a summary to stdout.
reports::RunRecord run_training(const RunConfig& config);

}  // namespace ddpb::bench
