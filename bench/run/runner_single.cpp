// --mode single: one device, the baseline.
#include "bench/run/trainer.h"
#include "core/memory_category.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/step_phase.h"
#include "core/stream.h"

namespace ddpb::bench {
namespace {

class SingleRunner final : public ModeRunner {
 public:
  SingleRunner(const RunConfig& config, const WorkloadSpec& spec)
      : device_(parse_device(config.device)), graph_mode_(config.cuda_graph) {
    require_device(device_);
    DeviceGuard guard(device_);
    {
      MemoryCategoryScope parameters(MemoryCategory::Parameters);  // Note [Memory categories]
      model_ = make_model(spec, device_, config.seed);
    }
    place_.data_device = device_;
    place_.data = {1, 0, config.global_batch};
  }
  Model& model() override { return *model_; }
  std::vector<Device> devices() const override { return {device_}; }

  // Events at the phase boundaries on the compute stream: host timestamps on CPU, GPU
  // timestamps on CUDA, so phases measure device work rather than enqueue time.
  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    const Batch batch = next_batch();
    // --cuda-graph: the first step runs eagerly (it creates the optimizer state, the GEMM
    // plans and the allocator's blocks), the second captures, and every step from then on
    // replays.
    if (graph_mode_ && eager_steps_ >= 1) return graph_step(batch, optimizer);
    ++eager_steps_;
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
    out.phases_ms = {{step_phase_name(StepPhase::Forward), marks[0].elapsed_ms(marks[1])},
                     {step_phase_name(StepPhase::Backward), marks[1].elapsed_ms(marks[2])},
                     {step_phase_name(StepPhase::Optimizer), marks[2].elapsed_ms(marks[3])}};
    out.step_ms = marks[0].elapsed_ms(marks[3]);
    return out;
  }

 private:
  // Copies the batch into the graph's static inputs and replays the captured step (forward,
  // loss, backward and the optimizer step); captures it first if there is no graph yet.
  // The whole step is one phase: events inside a graph do not time its parts.
  StepOutcome graph_step(const Batch& batch, optim::Optimizer& optimizer) {
    DeviceGuard guard(device_);
    Stream& s = current_stream(device_);
    if (!graph_) capture(batch, optimizer, s);
    Event start = Event::create(device_), end = Event::create(device_);
    start.record(s);
    ops::copy(batch.x, static_x_);
    ops::copy(batch.y, static_y_);
    {
      nvtx::Range r("graph replay", nvtx::Category::Forward);
      graph_->replay(s);
    }
    end.record(s);
    StepOutcome out;
    out.loss = static_loss_.item();  // synchronises with the device
    out.step_ms = start.elapsed_ms(end);
    out.phases_ms = {{"graph", out.step_ms}};
    return out;
  }

  // Captures on a stream of its own, not the device's default stream: other threads use
  // that one meanwhile (the data loader records its batch events there), and in a capture
  // their work would be recorded instead of run. The capture stream's GEMM workspace and
  // memory pool are the graph's; `capture_stream_` outlives `graph_`.
  void capture(const Batch& batch, optim::Optimizer& optimizer, Stream& s) {
    static_x_ = Tensor::empty(batch.x.shape(), batch.x.dtype(), device_);
    static_y_ = Tensor::empty(batch.y.shape(), batch.y.dtype(), device_);
    // Gradients are dropped so that the captured backward allocates (and the graph owns)
    // them; every replay then writes the same buffers, which the optimizer step reads.
    optimizer.zero_grad();
    s.synchronize();  // the eager step's work is done before the graph's may replay over it
    capture_stream_ = make_stream(device_, "graph-capture", StreamKind::Inline);
    StreamGuard on_capture_stream(capture_stream_);
    capture_stream_->begin_capture();
    try {
      nvtx::Range r("graph capture", nvtx::Category::Forward);
      autograd::Var loss = model_loss(model_->forward(static_x_), static_y_);
      loss.backward();
      optimizer.step();
      static_loss_ = loss.data();
    } catch (...) {
      try {
        capture_stream_->end_capture();  // leaves capture mode; the step's error is reported
      } catch (...) {
      }
      throw;
    }
    graph_ = capture_stream_->end_capture();
  }

  Device device_;
  std::unique_ptr<Model> model_;
  bool graph_mode_ = false;
  int eager_steps_ = 0;
  StreamPtr capture_stream_;  // declared before graph_: destroyed after it
  std::unique_ptr<StreamGraph> graph_;
  Tensor static_x_, static_y_, static_loss_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_single_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<SingleRunner>(config, spec);
}

}  // namespace ddpb::bench
