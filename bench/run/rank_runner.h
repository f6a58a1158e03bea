// What the runners whose ranks are processes share (runner_ddp.cpp, runner_fsdp.cpp).
//
// Note [Runners whose ranks are processes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank is a process of its own (the launcher's, mpirun's or torchrun's): it joins the job
// (RankProcess: the rendezvous, the store, the flight recorder), takes its device, and builds
// its model there under the parameters category (Note [Memory categories]) before the design
// wraps it. Each keeps its injected fault (--inject-fault), its step count and the measured
// steps' ready times for the blame (Note [Bucket blame]), and gathers the trace to rank 0.
// The design's own wrapping, step and record are the derived runner's.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/ddp_blame.h"
#include "bench/run/fault_injection.h"
#include "bench/run/rank_process.h"
#include "bench/run/trainer.h"
#include "workloads/model.h"

namespace ddpb::bench {

class ProcessRankRunner : public ModeRunner, public RankedRun {
 public:
  Model& model() override { return *model_; }
  std::vector<Device> devices() const override { return {device_}; }
  RankedRun* ranked() override { return this; }
  std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> gather_trace(
      nlohmann::json mine) override {
    return process_.gather_trace(std::move(mine));
  }

 protected:
  // Joins the job and builds the model on this rank's device.
  ProcessRankRunner(const RunConfig& config, const WorkloadSpec& spec);

  RunConfig config_;
  FaultSpec fault_;
  int64_t step_ = 0;
  BucketReadyLog ready_log_;  // the measured steps' ready times, for the blame
  RankProcess process_;
  comm::RankEnv env_;
  Device device_;
  std::unique_ptr<Model> model_;
};

}  // namespace ddpb::bench
