// --mode dp: DataParallel over --world-size devices (impl_dp/).
#include "bench/run/step_outcome.h"
#include "bench/run/trainer.h"
#include "core/check.h"
#include "core/memory_category.h"
#include "impl_dp/data_parallel.h"

namespace ddpb::bench {
namespace {

class DpRunner final : public ModeRunner {
 public:
  DpRunner(const RunConfig& config, const WorkloadSpec& spec) {
    auto devices = dp::resolve_dp_devices(config.device, config.world_size, config.devices);
    DDPB_USAGE_CHECK(config.global_batch >= static_cast<int64_t>(devices.size()))
        << "--global-batch " << config.global_batch << " is smaller than the " << devices.size()
        << " DP devices: every device needs at least one sample";
    dp::DpOptions options;
    options.broadcast_bytes = static_cast<size_t>(config.dp_broadcast_mb * 1048576.0);
    DDPB_USAGE_CHECK(options.broadcast_bytes > 0) << "--dp-broadcast-mb must be positive";
    dp::ReplicaSpec replica;
    replica.make = [&spec, seed = config.seed](const Device& device) {
      return std::unique_ptr<nn::Module>(make_model(spec, device, seed));
    };
    replica.forward = [](nn::Module& m, const Tensor& x) {
      return static_cast<Model&>(m).forward(x);
    };
    replica.loss = [](const autograd::Var& out, const Tensor& y) { return model_loss(out, y); };
    // Every replica's parameters (Note [Memory categories]).
    MemoryCategoryScope parameters(MemoryCategory::Parameters);
    dp_ = std::make_unique<dp::DataParallel>(std::move(replica), devices, options);
    place_.data_device = Device::cpu();  // DP scatters from host memory
    place_.data = {1, 0, config.global_batch};
  }
  // The replicas are Models: ReplicaSpec::make above builds them.
  Model& model() override { return static_cast<Model&>(dp_->module()); }
  std::vector<Device> devices() const override { return dp_->devices(); }

  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    const Batch batch = next_batch();
    dp::DpStepStats s = dp_->step(batch.x, batch.y, optimizer);
    StepOutcome out = step_outcome(s, static_cast<int>(dp_->devices().size()));
    reports::StepModeData& mode = *out.mode;
    mode.devices.emplace();
    for (size_t r = 0; r < s.devices.size(); ++r) {
      const auto& d = s.devices[r];
      if (d.forward_start_ns > 0) {
        const std::string track =
            "replica " + std::to_string(r) + " (" + dp_->devices()[r].str() + ")";
        out.spans.push_back({"forward",
                             track,
                             d.forward_start_ns,
                             (d.forward_end_ns - d.forward_start_ns) / 1e6,
                             {{"rows", d.rows}}});
        out.spans.push_back({"backward",
                             track,
                             d.backward_start_ns,
                             (d.backward_end_ns - d.backward_start_ns) / 1e6,
                             {{"rows", d.rows}}});
      }
      mode.devices->push_back({dp_->devices()[r].str(), d.rows, d.busy_ms, d.idle_ms});
    }
    mode.bytes = reports::NamedValues<int64_t>{{"scatter", s.scatter_bytes},
                                               {"replicate", s.replicate_bytes},
                                               {"gather", s.gather_bytes},
                                               {"reduce", s.reduce_bytes}};
    mode.unit_bytes =
        reports::NamedValues<int64_t>{{"parameters", s.parameter_bytes},
                                      {"buffers", s.buffer_bytes},
                                      {"input_per_sample", s.input_bytes_per_sample},
                                      {"output_per_sample", s.output_bytes_per_sample}};
    return out;
  }

  nlohmann::json describe() const override {
    const bool has_buffers = !dp_->module().named_buffers().empty();
    return {{"transport", dp_->transport_name()},
            {"buffers",
             has_buffers ? "replicated from device 0 every step; running-statistic updates are "
                           "kept from device 0's replica only (torch.nn.DataParallel's semantics)"
                         : "none"},
            {"logical_replicas", dp::has_logical_replicas(dp_->devices())},
            {"note",
             dp::has_logical_replicas(dp_->devices())
                 ? "several replicas share one GPU: this verifies the mechanics, it is not scaling"
                 : ""}};
  }

 private:
  std::unique_ptr<dp::DataParallel> dp_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_dp_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<DpRunner>(config, spec);
}

}  // namespace ddpb::bench
