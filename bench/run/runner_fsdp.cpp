// --mode fsdp, fsdp-grad-op, fsdp-no-shard, fsdp-hybrid: one process per rank (started by
// comm/launcher or an external launcher), FullyShardedDataParallel over the workload's blocks
// (Note [FSDP's step] in impl_fsdp/fully_sharded_data_parallel.h).
#include <fmt/core.h>

#include "bench/run/ddp_blame.h"
#include "bench/run/ddp_checks.h"
#include "bench/run/fault_injection.h"
#include "bench/run/fsdp_config.h"
#include "bench/run/rank_process.h"
#include "bench/run/rank_runner.h"
#include "bench/run/trainer.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/memory_category.h"
#include "impl_fsdp/fully_sharded_data_parallel.h"

namespace ddpb::bench {
namespace {

// An FSDP rank: its groups, its FullyShardedDataParallel, and per step its phases and
// collectives.
class FsdpRunner final : public ProcessRankRunner {
 public:
  FsdpRunner(const RunConfig& config, const WorkloadSpec& spec) : ProcessRankRunner(config, spec) {
    DeviceGuard guard(device_);
    const std::vector<fsdp::FsdpUnitSpec> units = fsdp_units(config, spec, *model_);
    fsdp::FsdpGroups groups = fsdp_groups(config, process_, process_.take_group());
    {
      // The shards are the parameters' only persistent copy (Note [Flat parameters]).
      MemoryCategoryScope parameters(MemoryCategory::Parameters);
      fsdp_ = std::make_unique<fsdp::FullyShardedDataParallel>(
          *model_, [this](const Tensor& x) { return model_->forward(x); }, std::move(groups), units,
          fsdp_options(config));
    }
    place_ = process_.place(config.global_batch);
    fmt::print("fsdp rank {}/{} on {} ({} backend, launched by {}), {}, {} units over {} ranks\n",
               env_.rank, env_.world_size, device_.str(), fsdp_->groups().world->backend(),
               env_.source, enum_name(fsdp_->options().strategy), fsdp_->units().size(),
               fsdp_->groups().shard->size());
  }

  // Note [The runner seam]: the optimizer over this rank's shards.
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config) override {
    return fsdp_->make_optimizer(config);
  }
  // Collective: the parameters gathered, copied out (they are released after), then buffers.
  std::vector<NamedTensor> full_state_dict() override {
    DeviceGuard guard(device_);
    std::vector<NamedTensor> state;
    fsdp_->with_full_params([&] {
      for (const NamedTensor& t : state_dict(*model_)) state.push_back({t.name, t.tensor.clone()});
    });
    return state;
  }
  // Collective: --init-from written into the gathered parameters, then into the shards.
  void load_full_state_dict(const std::function<void(Model&)>& load) override {
    DeviceGuard guard(device_);
    fsdp_->with_full_params([&] { load(*model_); }, /*writeback=*/true);
  }
  int shard_ranks(int) const override { return fsdp_->groups().shard->size(); }
  std::vector<std::pair<std::string, int64_t>> transient_model_state_bytes() const override {
    constexpr int64_t kF32 = sizeof(float);
    return {{"parameters", fsdp_->peak_unsharded_numel() * kF32},
            {"gradients", fsdp_->peak_unsharded_grad_numel() * kF32}};
  }
  std::vector<std::pair<std::string, std::vector<NamedTensor>>> dump_extras() const override {
    return {};
  }

  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    DeviceGuard guard(device_);
    const int64_t start_ns = steady_now_ns();
    ++step_;
    inject_store_fault(fault_, env_.rank, step_, process_.store());
    fsdp::FsdpStepOptions options;
    options.accumulate = config_.accumulate;
    options.in_first_forward = [this] { maybe_inject_fault(fault_, env_.rank, step_); };
    const fsdp::FsdpStepStats stats = fsdp_->step(
        [&] {
          Batch b = next_batch();
          return fsdp::MicroBatch{b.x, b.y};
        },
        model_loss, optimizer, options);
    if (step_ > config_.warmup) ready_log_.add(unit_ready_ms(stats, start_ns));
    return fsdp_step_outcome(stats, env_.world_size, env_.rank);
  }

  // With --epochs: every rank runs out together or the run fails naming them (FSDP has no
  // Join: a rank without input cannot shadow its peers' gathers).
  bool another_step(bool have_input, int64_t step) override {
    return all_or_none_have_input(ranks_with_input(have_input), step);
  }

  reports::RunRecord finalize_record(reports::RunRecord record) override {
    fsdp_->check_replicas_consistent();
    record = process_.merge_records(std::move(record));
    ready_log_.attach_blame(process_, record, "fsdp", "units", /*critical_path=*/false);
    if (env_.rank != 0) return record;
    record.mode.details =
        fsdp_mode_details(config_, env_, *fsdp_, !model_->named_buffers().empty());
    fmt::print("fsdp: merged records of {} ranks (straggler skew {:.3f})\n", env_.world_size,
               record.summary.straggler_skew.value_or(0));
    return record;
  }

 private:
  // Which ranks have input for the next step: one flag each, all-gathered over the world.
  std::vector<bool> ranks_with_input(bool have_input) const {
    DeviceGuard guard(device_);
    comm::ProcessGroup& world = *fsdp_->groups().world;
    const Tensor mine = Tensor::from_floats({have_input ? 1.0f : 0.0f}, {1}, device_);
    const Tensor all = Tensor::empty({world.size()}, DType::F32, device_);
    world.allgather(all, mine)->wait();
    std::vector<bool> have;
    for (float flag : all.to_floats()) have.push_back(flag > 0.5f);
    return have;
  }

  // Note [Bucket blame] for units: each of a unit's collectives (its all-gathers, its
  // reduce-scatter) is ready when this rank issues it, in ms from the start of this rank's
  // step, less the time it had waited for the others by then: FSDP's forward gathers hold
  // every rank to the slowest, so a late rank shows only on its own clock. Every rank issues
  // them in one order.
  static std::vector<double> unit_ready_ms(const fsdp::FsdpStepStats& stats, int64_t start_ns) {
    const double zero_ms = static_cast<double>(stats.clock_zero_ns - start_ns) / 1e6;
    std::vector<double> ready;
    for (const fsdp::UnitCollective& c : stats.units)
      if (c.op != "allreduce") ready.push_back(zero_ms + c.launch_ms - c.waited_before_ms);
    return ready;
  }

  std::unique_ptr<fsdp::FullyShardedDataParallel> fsdp_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_fsdp_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<FsdpRunner>(config, spec);
}

}  // namespace ddpb::bench
