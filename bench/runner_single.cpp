// --mode single: one device, the baseline.
#include "bench/trainer.h"
#include "core/nvtx.h"
#include "core/stream.h"

namespace ddpb::bench {
namespace {

class SingleRunner final : public ModeRunner {
 public:
  SingleRunner(const RunConfig& config, const WorkloadSpec& spec)
      : device_(parse_device(config.device)) {
    require_device(device_);
    DeviceGuard guard(device_);
    model_ = make_model(spec, device_, config.seed);
  }
  Model& model() override { return *model_; }
  Device data_device() const override { return device_; }
  std::vector<Device> devices() const override { return {device_}; }

  // Events at the phase boundaries on the compute stream: host timestamps on CPU, GPU
  // timestamps on CUDA, so phases measure device work rather than enqueue time.
  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    const Batch batch = next_batch();
    DeviceGuard guard(device_);
    Stream& s = current_stream(device_);
    Event marks[4];
    for (auto& e : marks) e = Event::create(device_);
    marks[0].record(s);
    autograd::Var loss;
    {
      nvtx::Range r("forward", nvtx::Category::Forward);
      loss = model_loss(model_->forward(batch.x), batch.y);
    }
    marks[1].record(s);
    {
      nvtx::Range r("backward", nvtx::Category::Backward);
      optimizer.zero_grad();
      loss.backward();
    }
    marks[2].record(s);
    optimizer.step();
    marks[3].record(s);
    StepOutcome out;
    out.loss = loss.data().item();  // synchronises with the device
    out.phases_ms = {{"forward", marks[0].elapsed_ms(marks[1])},
                     {"backward", marks[1].elapsed_ms(marks[2])},
                     {"optimizer", marks[2].elapsed_ms(marks[3])}};
    out.step_ms = marks[0].elapsed_ms(marks[3]);
    return out;
  }

 private:
  Device device_;
  std::unique_ptr<Model> model_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_single_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<SingleRunner>(config, spec);
}

}  // namespace ddpb::bench
