// --mode ddp: one process per rank (started by comm/launcher or an external launcher),
// DistributedDataParallel through impl_ddp's Reducer.
#include <fmt/core.h>

#include "bench/run/bucket_tuner.h"
#include "bench/run/ddp_blame.h"
#include "bench/run/ddp_checks.h"
#include "bench/run/ddp_config.h"
#include "bench/run/ddp_record.h"
#include "bench/run/fault_injection.h"
#include "bench/run/rank_process.h"
#include "bench/run/rank_runner.h"
#include "bench/run/trainer.h"
#include "comm/flight_recorder.h"
#include "comm/rendezvous.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/memory_category.h"
#include "impl_ddp/distributed_data_parallel.h"

namespace ddpb::bench {
namespace {

// A DDP rank: its process group, its DistributedDataParallel, and per step the phases and the
// bucket records of its Reducer.
class DdpRunner final : public ProcessRankRunner {
 public:
  DdpRunner(const RunConfig& config, const WorkloadSpec& spec) : ProcessRankRunner(config, spec) {
    DeviceGuard guard(device_);
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(
        *model_, [this](const Tensor& x) { return model_->forward(x); }, process_.take_group(),
        ddp_options(config));
    if (config.bucket_cap_auto) search_ = make_ddp_bucket_search(*ddp_, *model_);
    place_ = process_.place(config.global_batch);
    fmt::print("ddp rank {}/{} on {} ({} backend, launched by {}), {} buckets\n", env_.rank,
               env_.world_size, device_.str(), ddp_->process_group().backend(), env_.source,
               ddp_->reducer().num_buckets());
  }

  // Note [The runner seam]: with a ZeRO stage, the optimizer over this rank's shard.
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config) override {
    return ddp_->make_optimizer(config);
  }
  std::vector<std::pair<std::string, std::vector<NamedTensor>>> dump_extras() const override {
    return ddp_dump_extras(*ddp_);
  }
  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    DeviceGuard guard(device_);
    const int64_t start_ns = steady_now_ns();
    ++step_;
    inject_ddp_step_fault(fault_, env_.rank, step_, ddp_->reducer(), process_.store());
    ddp::DdpStepOptions options;
    options.accumulate = config_.accumulate;
    options.in_first_forward = [this] { maybe_inject_fault(fault_, env_.rank, step_); };
    const ddp::DdpStepStats stats = ddp_->step(
        [&] {
          Batch b = next_batch();
          return ddp::MicroBatch{b.x, b.y};
        },
        model_loss, optimizer, options);
    StepOutcome out = ddp_step_outcome(stats, env_.world_size, env_.rank);
    if (search_) after_tuned_step(out.step_ms);
    hook_warning_.after_step(out, config_.comm_hook, step_, env_.rank);
    if (step_ > config_.warmup) ready_log_.add(stats, start_ns);
    return out;
  }

  // The warm-up search sees the step, and rank 0 says what it chose.
  void after_tuned_step(double step_ms) {
    search_->after_step(step_, step_ms);
    if (!search_->tuner().done() || reported_choice_) return;
    reported_choice_ = true;
    if (env_.rank == 0)
      fmt::print("ddp: --bucket-cap-mb auto chose {:g} MB ({} candidates in {} warm-up steps)\n",
                 search_->tuner().chosen_mb(), search_->tuner().candidates().size(), step_);
  }

  bool another_step(bool have_input, int64_t step) override {
    if (config_.uneven_join) {
      if (have_input) return true;
      fmt::print(
          "ddp rank {}: joined after {} steps of input, then shadowed {} iteration(s) of "
          "its peers (--uneven-inputs join)\n",
          env_.rank, step - 1, ddp_->join_finish());
      return false;
    }
    return all_or_none_have_input(ddp_->ranks_with_input(have_input), step);
  }

  reports::RunRecord finalize_record(reports::RunRecord record) override {
    ddp_->check_replicas_consistent();
    record = process_.merge_records(std::move(record));
    ready_log_.attach_blame(process_, record);
    if (env_.rank != 0) return record;
    record.mode.details =
        ddp_mode_details(config_, env_, *ddp_, !model_->named_buffers().empty(), search_.get());
    // The report is complete only when every rank got here: say so on rank 0's exit path.
    fmt::print("ddp: merged records of {} ranks (straggler skew {:.3f})\n", env_.world_size,
               record.summary.straggler_skew.value_or(0));
    return record;
  }

 private:
  std::unique_ptr<WarmupBucketSearch> search_;  // --bucket-cap-mb auto
  bool reported_choice_ = false;
  HookComputeWarning hook_warning_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_ddp_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<DdpRunner>(config, spec);
}

}  // namespace ddpb::bench
