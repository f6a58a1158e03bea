#include "bench/single_trainer.h"

#include <fmt/core.h>

#include <cmath>

#include "bench/context.h"
#include "bench/run_dump.h"
#include "bench/stats.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "reports/json_io.h"
#include "workloads/dataloader.h"
#include "workloads/model.h"
#include "workloads/state_dict.h"

namespace ddpb::bench {
namespace {

// Events at the phase boundaries of one step, on the compute stream. On CPU (Inline
// stream) an event is a host timestamp; on CUDA it is a GPU timestamp, so the phases
// measure device work, not host enqueue time.
struct StepEvents {
  enum Mark { kStart, kData, kForward, kBackward, kOptimizer, kCount };
  Event marks[kCount];
  explicit StepEvents(const Device& d) {
    for (auto& e : marks) e = Event::create(d);
  }
  void mark(Mark m, const Device& d) { marks[m].record(current_stream(d)); }
  double ms(Mark from, Mark to) const { return marks[from].elapsed_ms(marks[to]); }
};

}  // namespace

nlohmann::json run_single(const RunConfig& config) {
  const Device device = parse_device(config.device);
  require_device(device);
  DeviceGuard guard(device);
  ops::set_math_mode(config.math == "tf32" ? ops::MathMode::TF32 : ops::MathMode::FP32);
  const WorkloadSpec& spec = find_workload(config.workload);

  auto model = make_model(spec, device, config.seed);
  if (!config.init_from.empty()) load_state_dict(*model, config.init_from);
  auto params = model->parameters();
  int64_t n_params = 0;
  for (auto& p : params) n_params += p.data().numel();
  auto optimizer = optim::make_optimizer(config.optimizer, params);

  auto dataset = make_dataset(spec, config.seed);
  DDPB_USAGE_CHECK(config.global_batch <= dataset->size())
      << "--global-batch " << config.global_batch << " exceeds the dataset of " << dataset->size();
  DistributedSampler sampler(dataset->size(), /*num_replicas=*/1, /*rank=*/0, /*shuffle=*/true,
                             config.seed, /*drop_last=*/false);
  DataLoader loader(dataset, sampler, config.global_batch, device);

  std::unique_ptr<RunDump> dump;
  if (!config.dump.empty()) {
    dump = std::make_unique<RunDump>(config.dump);
    dump->save_init(*model);
  }

  fmt::print("ddpbench run: mode single, workload {} ({} parameters), device {}, batch {}\n",
             spec.name, n_params, device.str(), config.global_batch);
  device_allocator(device).reset_peak();

  nlohmann::json steps = nlohmann::json::array();
  std::vector<double> step_ms, measured_losses;
  double first_loss = 0, last_loss = 0;
  for (int64_t step = 1; step <= config.total_steps(); ++step) {
    StepEvents ev(device);
    ev.mark(StepEvents::kStart, device);
    Batch batch;
    {
      nvtx::Range r("data", nvtx::Category::Data);
      batch = loader.next();
    }
    ev.mark(StepEvents::kData, device);
    autograd::Var loss;
    {
      nvtx::Range r("forward", nvtx::Category::Forward);
      loss = model_loss(model->forward(batch.x), batch.y);
    }
    ev.mark(StepEvents::kForward, device);
    {
      nvtx::Range r("backward", nvtx::Category::Backward);
      optimizer->zero_grad();
      loss.backward();
    }
    ev.mark(StepEvents::kBackward, device);
    optimizer->step();
    ev.mark(StepEvents::kOptimizer, device);
    if (dump) dump->add_batch(step, batch);

    const float loss_value = loss.data().item();  // syncs with the device
    DDPB_CHECK(std::isfinite(loss_value)) << "loss became " << loss_value << " at step " << step;
    const double total = ev.ms(StepEvents::kStart, StepEvents::kOptimizer);
    const bool measured = step > config.warmup;
    if (step == 1) first_loss = loss_value;
    last_loss = loss_value;
    if (measured) step_ms.push_back(total);
    steps.push_back({{"step", step},
                     {"measured", measured},
                     {"loss", loss_value},
                     {"time_ms", total},
                     {"phases_ms",
                      {{"data", ev.ms(StepEvents::kStart, StepEvents::kData)},
                       {"forward", ev.ms(StepEvents::kData, StepEvents::kForward)},
                       {"backward", ev.ms(StepEvents::kForward, StepEvents::kBackward)},
                       {"optimizer", ev.ms(StepEvents::kBackward, StepEvents::kOptimizer)}}}});
    if (!config.quiet) {
      fmt::print("step {:>4}/{} loss {:.6f} time {:.2f} ms{}\n", step, config.total_steps(),
                 loss_value, total, measured ? "" : " (warm-up)");
    }
  }

  const Summary st = summarize(step_ms);
  const double samples_per_s = st.median > 0 ? config.global_batch * 1000.0 / st.median : 0.0;
  const double tokens_per_s = samples_per_s * static_cast<double>(model->tokens_per_sample());
  const double flops_per_s = samples_per_s * model->train_flops_per_sample();
  const MemoryStats mem = device_allocator(device).stats();

  fmt::print("summary: median step {:.3f} ms (p90 {:.3f}), {:.1f} samples/s", st.median, st.p90,
             samples_per_s);
  if (model->tokens_per_sample() > 1) fmt::print(", {:.0f} tokens/s", tokens_per_s);
  fmt::print(", {:.2f} GFLOP/s, loss {:.4f} -> {:.4f}, peak memory {:.1f} MiB\n", flops_per_s / 1e9,
             first_loss, last_loss, mem.peak_bytes / 1048576.0);

  nlohmann::json record = {
      {"schema_version", reports::kSchemaVersion},
      {"implementation", "ddpbench"},
      {"kind", "run"},
      {"context", build_context()},
      {"config", config.to_json()},
      {"workload",
       {{"name", spec.name},
        {"family", family_name(spec.family)},
        {"parameters", n_params},
        {"tokens_per_sample", model->tokens_per_sample()},
        {"train_flops_per_sample", model->train_flops_per_sample()}}},
      {"steps", steps},
      {"summary",
       {{"step_time_ms", st.to_json()},
        {"samples_per_s", samples_per_s},
        {"tokens_per_s", tokens_per_s},
        {"achieved_flops_per_s", flops_per_s},
        {"first_loss", first_loss},
        {"last_loss", last_loss}}},
      {"memory", {{"peak_bytes", mem.peak_bytes}, {"reserved_bytes", mem.reserved_bytes}}}};
  if (dump) dump->finish(*model, {{"config", config.to_json()}, {"workload", record["workload"]}});
  return record;
}

}  // namespace ddpb::bench
