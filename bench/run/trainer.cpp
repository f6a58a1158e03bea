#include "bench/run/trainer.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "base/printable.h"
#include "bench/measure/comm_summary.h"
#include "bench/measure/context.h"
#include "bench/measure/critical_path.h"
#include "bench/measure/mfu.h"
#include "bench/measure/stats.h"
#include "bench/run/designs.h"
#include "bench/run/fault_injection.h"
#include "bench/run/run_dump.h"
#include "bench/run/step_watchdog.h"
#include "bench/run/training_data.h"
#include "comm/flight_recorder.h"
#include "comm/peer_probe.h"
#include "comm/process_group.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/conv_plans.h"
#include "core/cpu/cpu_backend.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/progress.h"
#include "core/step_phase.h"
#include "data/dataloader.h"
#include "data/transforms.h"
#include "reports/json_io.h"
#include "reports/memory_model.h"
#include "reports/schema_validator.h"
#include "workloads/family.h"
#include "workloads/state_dict.h"

namespace ddpb::bench {
namespace {

// Note [Model-state memory]: what the design promises a rank holds; DP's devices differ
// (device 0 alone holds the optimizer state), so it promises nothing.
std::optional<reports::NamedValues<int64_t>> promised_model_state(const RunConfig& config,
                                                                  int64_t params, int shard_ranks) {
  const reports::DesignInfo& design = design_of(config).info;
  const auto state_bytes = reports::optimizer_state_bytes_per_parameter(config.optimizer.name,
                                                                        config.optimizer.momentum);
  if ((design.parallel && !design.processes_per_rank) || !state_bytes) return std::nullopt;
  return reports::expected_model_state(design, params, std::max(1, shard_ranks), *state_bytes);
}

std::vector<reports::MemoryUse> memory_record(
    const std::vector<Device>& devices,
    const std::optional<reports::NamedValues<int64_t>>& promised) {
  std::vector<reports::MemoryUse> per_device;
  std::vector<Device> seen;
  for (const auto& d : devices) {
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;  // logical replicas
    seen.push_back(d);
    MemoryStats m = device_allocator(d).stats();
    reports::NamedValues<int64_t> by_category, highest;
    for (size_t c = 0; c < kNumMemoryCategories; ++c) {
      const auto name = enum_name(static_cast<MemoryCategory>(c));
      by_category.emplace_back(name, m.peak_by_category[c]);
      highest.emplace_back(name, m.highest_by_category[c]);
    }
    highest.emplace_back("model_state", m.highest_model_state);
    reports::MemoryUse use{d.str(), m.peak_bytes, m.reserved_bytes, std::move(by_category)};
    use.highest_by_category = std::move(highest);
    if (promised) {  // a formula promises what a category holds at its most
      use.expected_by_category = *promised;
      use.ratio_by_category = reports::measured_over_expected(*use.highest_by_category, *promised);
    }
    per_device.push_back(std::move(use));
  }
  return per_device;
}

// MFU of a CUDA run (null on CPU or for a GPU without a datasheet row). The FLOPs are the
// whole run's; they are shared by the distinct GPUs: DP's logical replicas on one GPU and
// DDP ranks beyond the GPU count (Gloo on one GPU) share theirs. `gpu_list` is the record
// context's system.gpus (the GPU names, queried once per run).
std::optional<reports::Mfu> mfu_of_run(const RunConfig& config, const std::vector<Device>& devices,
                                       const nlohmann::json& gpu_list, double flops_per_s) {
  if (devices.empty() || devices.front().is_cpu()) return std::nullopt;
  const int index = devices.front().index;
  const int gpu_count = static_cast<int>(gpu_list.size());
  if (index >= gpu_count) return std::nullopt;
  std::vector<int> distinct;
  for (const auto& d : devices) {
    if (std::find(distinct.begin(), distinct.end(), d.index) == distinct.end())
      distinct.push_back(d.index);
  }
  int gpus = static_cast<int>(distinct.size());
  if (design_of(config).info.processes_per_rank) gpus = std::min(config.world_size, gpu_count);
  return run_mfu(flops_per_s, gpus, gpu_list[static_cast<size_t>(index)].at("name"),
                 config.precision);
}

// A checkpoint with NaN or Inf in it cannot start a meaningful run (a NaN would be trained
// into every parameter): a usage error naming the first such tensor.
void refuse_non_finite_parameters(Model& model, const std::string& file) {
  for (auto& p : model.named_parameters()) {
    const std::vector<float> values = p.var.data().to_floats();
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) continue;
      if (bad++ == 0) first = static_cast<int64_t>(i);
    }
    DDPB_USAGE_CHECK(bad == 0) << "--init-from " << file << ": tensor '" << p.name << "' holds "
                               << bad << " non-finite value(s), the first at index " << first
                               << " (" << values[static_cast<size_t>(first)] << ")";
  }
}

}  // namespace

namespace {

// Every step's record and the samples the summary is made of.
struct StepLog {
  std::vector<reports::StepRecord> steps;
  std::vector<double> step_ms;  // measured steps only
  std::map<std::string, std::vector<double>> phase_samples;
  std::vector<std::string> phase_order;
  double first_loss = 0, last_loss = 0;

  // Returns the step's time, data loading included.
  double add(int64_t step, bool measured, const reports::LoaderStep& loader,
             const StepOutcome& out) {
    const double data_ms = loader.data_wait_ms;
    const double total = data_ms + out.step_ms;
    if (step == 1) first_loss = out.loss;
    last_loss = out.loss;
    const char* data = step_phase_name(StepPhase::Data);
    reports::NamedValues<double> phases = {{data, data_ms}};
    add_phase(data, data_ms, measured);
    for (const auto& [name, ms] : out.phases_ms) {
      phases.emplace_back(name, ms);
      add_phase(name, ms, measured);
    }
    if (measured) step_ms.push_back(total);
    steps.push_back({step, measured, out.loss, total, std::move(phases), out.mode, loader});
    return total;
  }
  void add_phase(const std::string& name, double ms, bool measured) {
    if (measured) phase_samples[name].push_back(ms);
    if (std::find(phase_order.begin(), phase_order.end(), name) == phase_order.end())
      phase_order.push_back(name);
  }
  // Median per phase, in first-seen order. A phase seen only in warm-up steps (the eager
  // step before a --cuda-graph capture) has no measured samples and no median.
  // Each with its kind: the design row's, else the vocabulary's (Note [Phase kinds]).
  std::vector<reports::PhaseMedian> phase_medians(const reports::DesignInfo& design) {
    std::vector<reports::PhaseMedian> breakdown;
    for (const auto& name : phase_order) {
      if (phase_samples[name].empty()) continue;
      const std::string kind =
          design.phase_kind(name).value_or(phase_kind_name(phase_kind_of(name)));
      breakdown.push_back({name, kind, percentile(phase_samples[name], 50)});
    }
    return breakdown;
  }
};

// A batch of image bytes (--normalize-on-device) becomes the model's normalized floats on
// its device, on the current stream.
Batch normalized_on_device(Batch batch) {
  if (batch.x.dtype() != DType::U8) return batch;
  Tensor x = Tensor::empty(batch.x.shape(), DType::F32, batch.x.device());
  ops::normalize_u8_images(batch.x, x, {kImageNetMean[0], kImageNetMean[1], kImageNetMean[2]},
                           {kImageNetStd[0], kImageNetStd[1], kImageNetStd[2]});
  batch.x = std::move(x);
  return batch;
}

// One step through the runner; the batches come from `loader` (and go to `dump`), and what
// they cost (the wait for them, their workers' time, their copies) goes to `cost`. Each batch
// takes `data_delay_ms` longer (--inject-fault slow-data).
StepOutcome run_step(ModeRunner& runner, optim::Optimizer& optimizer, DataLoader& loader,
                     RunDump* dump, int64_t step, double data_delay_ms, reports::LoaderStep& cost) {
  int micro = 0;
  const BatchFn next_batch = [&] {
    nvtx::Range r("data", nvtx::Category::Data);
    progress::note_phase(step_phase_name(StepPhase::Data));
    auto t0 = std::chrono::steady_clock::now();
    if (data_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(data_delay_ms));
    Batch batch = loader.next();
    cost.data_wait_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const LoadedBatchStats stats = loader.last_stats();
    cost.fill_ms += stats.fill_ms;
    cost.skipped += stats.skipped;
    if (stats.h2d_overlapped)
      cost.h2d_overlapped = cost.h2d_overlapped.value_or(true) && *stats.h2d_overlapped;
    if (dump) dump->add_batch(step, micro, batch);
    ++micro;
    return normalized_on_device(std::move(batch));
  };
  try {
    StepOutcome out = runner.step(next_batch, optimizer);
    // The last batch's copy has completed by now (the step consumed it).
    if (const auto h2d = loader.last_stats().h2d_ms) cost.h2d_ms = *h2d;
    return out;
  } catch (const std::exception& e) {
    // A rank of a multi-process job says it at once, before unwinding tears down the process
    // group (which can take a while): the launcher names the rank whose failure it heard
    // first. A run of one process says it once, in main's error line.
    if (runner.place().world_size > 1) {
      // The message may quote a dataset's file name: escaped (issue 48, P21).
      std::fprintf(stderr, "ddpbench: rank %d failed at step %ld: %s\n", runner.place().rank,
                   static_cast<long>(step), printable(e.what()).c_str());
      std::fflush(stderr);
      // A timeout across hosts also says which hosts no longer answer (Note [Unreachable hosts]).
      const std::string probe = dynamic_cast<const comm::CommTimeout*>(&e) != nullptr
                                    ? comm::probe_hosts()
                                    : std::string();
      // Rank 0 keeps the store up until the other hosts' dumps came (Note [Flight dumps
      // across hosts]).
      // Only after a collective failed or hung: then the other hosts dump too.
      if (runner.place().rank == 0 && comm::flight_recorder().collective_trouble()) {
        comm::collect_flight_dumps();
      }
      if (!probe.empty()) throw comm::CommTimeout(e.what() + probe);
    }
    throw;
  }
}

// A failed run still leaves a valid trace of the steps it finished (this rank's events).
// Also when SIGTERM stops a DDP rank (its launcher's answer to another rank's crash): rank 0
// then writes what it has from the flight recorder's thread (issue 25, D4).
class PartialTrace {
 public:
  PartialTrace(TraceWriter* trace, const RunConfig& config, ModeRunner& runner)
      : trace_(trace), config_(config), runner_(runner) {
    if (trace_ && runner_.place().primary())
      hook_ = comm::add_termination_hook([this] { write(); });
  }
  ~PartialTrace() {
    if (hook_ >= 0) comm::remove_termination_hook(hook_);
    if (!done) write();
  }
  PartialTrace(const PartialTrace&) = delete;
  PartialTrace& operator=(const PartialTrace&) = delete;

  bool done = false;  // the whole trace was written

 private:
  void write() const {
    if (!trace_ || !runner_.place().primary()) return;
    try {
      reports::write_json_atomic(config_.trace, TraceWriter::document({trace_->events()}, {0},
                                                                      runner_.place().world_size));
    } catch (...) {
    }
  }
  TraceWriter* trace_;
  const RunConfig& config_;
  ModeRunner& runner_;
  int hook_ = -1;
};

// The training loop: warm-up and measured steps, each logged, traced and printed.
StepLog train(const RunConfig& config, ModeRunner& runner, optim::Optimizer& optimizer,
              DataLoader& loader, RunDump* dump, TraceWriter* trace) {
  StepLog log;
  const bool on_cuda = runner.devices().front().is_cuda();
  const FaultSpec fault = parse_fault(config.inject_fault);
  // Every step is watched (Note [Step watchdog]): a stall outside any collective ends the run,
  // naming the phase, rather than hanging it (or, in DDP, leaving the peers to time out on it).
  const StepWatchdog watchdog(
      std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000)),
      runner.ranked() ? std::optional(runner.place().rank) : std::nullopt,
      [] { return comm::flight_recorder().any_in_flight(); });
  for (int64_t step = 1; step <= config.total_steps(); ++step) {
    progress::note_step(step);
    if (config.epochs > 0) {  // the run ends with its data (uneven inputs: Note [DDP Join])
      const bool have_input = loader.has_next();
      RankedRun* ranked = runner.ranked();
      if (ranked ? !ranked->another_step(have_input, step) : !have_input) break;
    }
    if (on_cuda && step == config.warmup + 1) nvtx::profiler_start();  // nsys capture range
    // The measured steps' peak (docs/metrics.md "Memory by category"): the warm-up's one-time
    // allocations (DDP's bucket rebuild, ZeRO's flat parameters) are left out.
    if (step == config.warmup + 1 && config.warmup > 0)
      for (const auto& d : runner.devices()) device_allocator(d).reset_peak();
    const int64_t step_start_ns = steady_now_ns();
    reports::LoaderStep cost;
    const StepOutcome out = run_step(runner, optimizer, loader, dump, step,
                                     data_fault_delay_ms(fault, runner.place().rank, step), cost);
    const double data_ms = cost.data_wait_ms;
    DDPB_CHECK(std::isfinite(out.loss)) << "loss became " << out.loss << " at step " << step;
    const bool measured = step > config.warmup;
    const double total = log.add(step, measured, cost, out);
    if (trace) {
      std::vector<std::pair<std::string, double>> all_phases{
          {step_phase_name(StepPhase::Data), data_ms}};
      all_phases.insert(all_phases.end(), out.phases_ms.begin(), out.phases_ms.end());
      trace->add_step(step, step_start_ns, all_phases, out.spans);
    }
    if (!config.quiet) {
      fmt::print("step {:>4}/{} loss {:.6f} time {:.2f} ms{}\n", step, config.total_steps(),
                 out.loss, total, measured ? "" : " (warm-up)");
    }
  }
  if (on_cuda) nvtx::profiler_stop();
  return log;
}

// The summary block of the record, printed as the run's last lines.
reports::RunSummary summarize_run(const reports::DesignInfo& design, const Model& model,
                                  StepLog& log, const std::optional<reports::Mfu>& mfu,
                                  const std::vector<reports::MemoryUse>& memory, double flops_per_s,
                                  double samples_per_s) {
  reports::RunSummary summary;
  summary.step_time_ms = summarize(log.step_ms).to_record();
  summary.phases_median_ms = log.phase_medians(design);
  summary.samples_per_s = samples_per_s;
  summary.tokens_per_s = samples_per_s * static_cast<double>(model.tokens_per_sample());
  if (model.samples_are_images()) summary.images_per_s = samples_per_s;
  summary.achieved_flops_per_s = flops_per_s;
  summary.mfu = mfu;
  summary.first_loss = log.first_loss;
  summary.last_loss = log.last_loss;
  const reports::StepTimeStats& st = summary.step_time_ms;
  fmt::print("summary: median step {:.3f} ms (p90 {:.3f}), {:.1f} {}/s", st.median, st.p90,
             samples_per_s, model.samples_are_images() ? "images" : "samples");
  if (model.tokens_per_sample() > 1) fmt::print(", {:.0f} tokens/s", summary.tokens_per_s);
  fmt::print(", {:.2f} GFLOP/s", flops_per_s / 1e9);
  if (mfu) fmt::print(", MFU {:.1f}%", 100.0 * mfu->mfu);
  fmt::print(", loss {:.4f} -> {:.4f}\n", log.first_loss, log.last_loss);
  std::string breakdown_line;
  for (const auto& b : summary.phases_median_ms)
    breakdown_line += fmt::format(" {} {:.2f}", b.phase, b.median_ms);
  fmt::print("phases (median ms):{}\n", breakdown_line);
  for (const auto& m : memory)
    fmt::print("memory: {} peak {:.1f} MiB\n", m.device, m.peak_bytes / 1048576.0);
  return summary;
}

std::string device_list(const ModeRunner& runner) {
  std::string list;
  for (const auto& d : runner.devices()) {
    if (!list.empty()) list += ',';
    list += d.str();
  }
  return list;
}

// The record of the run (before the runner's own additions).
reports::RunRecord make_record(const RunConfig& config, ModeRunner& runner, StepLog& log) {
  const WorkloadSpec& spec = find_workload(config.workload);
  Model& model = runner.model();
  int64_t n_params = 0;
  for (auto& p : model.parameters()) n_params += p.data().numel();
  const Summary st = summarize(log.step_ms);
  const double samples_per_s = st.median > 0 ? config.global_batch * 1000.0 / st.median : 0.0;
  const double flops_per_s = samples_per_s * model.train_flops_per_sample();
  const nlohmann::json context = build_context();
  reports::RunRecord record;
  record.context = reports::record_from_json<reports::RunContext>(context);
  record.config = reports::record_from_json<reports::RunConfigInfo>(config.to_json());
  record.design = design_of(config).info;
  record.mode = {config.mode, device_list(runner), runner.describe()};
  record.workload = {spec.name, spec.family, n_params, model.tokens_per_sample(),
                     model.train_flops_per_sample()};
  auto promised = promised_model_state(config, n_params, runner.shard_ranks(config.world_size));
  if (promised)
    for (const auto& [name, extra] : runner.transient_model_state_bytes())
      for (auto& [category, bytes] : *promised)
        if (category == name) bytes += extra;
  record.memory = memory_record(runner.devices(), promised);
  const auto mfu =
      mfu_of_run(config, runner.devices(), context.at("system").at("gpus"), flops_per_s);
  record.summary =
      summarize_run(record.design, model, log, mfu, record.memory, flops_per_s, samples_per_s);
  record.steps = std::move(log.steps);
  // The cuDNN plans this process built (CUDA convolutions only): engine, workspace, build time.
  if (nlohmann::json plans = conv_plans_json(); !plans.empty())
    record.conv_plans = reports::record_from_json<std::vector<reports::ConvPlanInfo>>(plans);
  return record;
}

void add_comm_summary(const RunConfig& config, ModeRunner& runner, reports::RunRecord& record) {
  // One process's devices (DP's replicas), or the world of ranks that are processes.
  const reports::DesignInfo& design = design_of(config).info;
  const int comm_world = design.processes_per_rank ? runner.place().world_size
                                                   : static_cast<int>(runner.devices().size());
  std::optional<double> expected;
  if (const auto promise = design_of(config).expected_gradient_bus_bytes) {
    double gradient_bytes = 0;
    for (const auto& p : runner.model().parameters())
      gradient_bytes += static_cast<double>(p.data().nbytes());
    expected = promise(gradient_bytes, comm_world, runner.shard_ranks(comm_world));
  }
  if (auto comm = comm_summary(design, record.steps, comm_world, expected)) {
    fmt::print("comm ({}): median {:.3f} ms, exposed {:.3f} ms, overlap ratio {:.3f}\n", comm->op,
               comm->comm_ms, comm->comm_exposed_ms, comm->overlap_ratio);
    record.summary.comm = std::move(comm);
  }
}

// --save-params and the end of --dump: the design's full state dict, gathered once by every
// rank when any of them saves it (Note [The runner seam]), written by the primary process.
void save_final_state(const RunConfig& config, ModeRunner& runner, RunDump* dump,
                      const reports::RunRecord& record) {
  if (config.save_params.empty() && !dump) return;
  const std::vector<NamedTensor> state = runner.full_state_dict();
  const bool primary = runner.place().primary();
  if (primary && !config.save_params.empty())
    save_safetensors(config.save_params, state, {{"format", "pt"}});
  if (!dump) return;
  if (primary && runner.ranked()) {
    for (const auto& [file, tensors] : runner.ranked()->dump_extras())
      dump->save_extra(file, tensors);
  }
  dump->finish(primary ? &runner.model() : nullptr, state,
               {{"config", config.to_json()},
                {"workload", reports::record_to_json(record.workload)},
                {"preset", preset_json(find_workload(config.workload))}});
}

// Every record we write matches reports/schema/run.schema.json; a mismatch is our bug (a
// field added here but not to the schema, or a NaN that JSON turned into null).
void write_record(const RunConfig& config, const reports::RunRecord& typed) {
  const nlohmann::json record = typed.to_json();
  const auto problems = reports::validate_run_record(record);
  DDPB_CHECK(problems.empty()) << "the run record does not match its schema, not writing "
                               << config.out << ": " << reports::format_errors(problems);
  reports::write_json_atomic(config.out, record);
  fmt::print("wrote {}\n", config.out);
}

}  // namespace

reports::RunRecord run_training(const RunConfig& config) {
  ops::set_math_mode(config.precision);
  ops::set_attention_kind(config.attention);
  ops::set_image_layout(config.channels_last ? ops::ImageLayout::NHWC : ops::ImageLayout::NCHW);
  cpu::set_blas_threads(config.cpu_threads);
  const WorkloadSpec& spec = find_workload(config.workload);
  auto runner = design_of(config).make_runner(config, spec);
  Model& model = runner->model();
  if (!config.init_from.empty()) {
    runner->load_full_state_dict([&](Model& full) {
      load_state_dict(full, config.init_from);
      refuse_non_finite_parameters(full, config.init_from);
    });
  }
  DeviceGuard guard(runner->devices().front());
  auto optimizer = runner->make_optimizer(config.optimizer);

  auto dataset = make_training_dataset(config, spec);
  DDPB_USAGE_CHECK(config.global_batch <= dataset->size())
      << "the dataset of " << dataset->size() << " samples"
      << (config.data.empty() ? "" : " (" + config.data + ")") << " is smaller than one global "
      << "batch of " << config.global_batch << " (--global-batch " << config.global_batch
      << " exceeds the dataset)";
  const RunnerPlace& place = runner->place();
  const DataPlan& plan = place.data;
  DistributedSampler sampler(dataset->size(), plan.num_replicas, plan.rank, /*shuffle=*/true,
                             config.seed, /*drop_last=*/false, config.sampler_padded);
  DataLoader loader(dataset, sampler, plan.batch_size, place.data_device, loader_options(config));

  std::unique_ptr<RunDump> dump;
  if (!config.dump.empty()) {
    dump = std::make_unique<RunDump>(config.dump, place.batches_file);
    const std::vector<NamedTensor> init = runner->full_state_dict();
    if (place.primary()) dump->save_init(init);
  }
  int64_t n_params = 0;
  for (auto& p : model.parameters()) n_params += p.data().numel();
  fmt::print("ddpbench run: mode {}, workload {} ({} parameters), devices {}, global batch {}\n",
             config.mode, spec.name, n_params, device_list(*runner), config.global_batch);
  fmt::print("{}", describe_training_data(config, *dataset));
  for (const auto& d : runner->devices()) device_allocator(d).reset_peak();

  std::unique_ptr<TraceWriter> trace;
  if (!config.trace.empty()) {
    auto [first, last] = parse_trace_steps(config.trace_steps);
    trace = std::make_unique<TraceWriter>(place.rank, first, last);
  }
  PartialTrace partial_trace(trace.get(), config, *runner);
  StepLog log;
  {
    // Note [Memory categories]: what the steps allocate unclaimed is activations.
    struct StepsAllocateActivations {
      StepsAllocateActivations() { set_default_memory_category(MemoryCategory::Activations); }
      ~StepsAllocateActivations() { set_default_memory_category(MemoryCategory::Other); }
    } activations;
    log = train(config, *runner, *optimizer, loader, dump.get(), trace.get());
  }

  reports::RunRecord record = make_record(config, *runner, log);
  add_comm_summary(config, *runner, record);
  record.summary.loader = loader_summary(config, loader, *dataset, place.data_device, record.steps,
                                         record.summary.step_time_ms.median);
  save_final_state(config, *runner, dump.get(), record);
  RankedRun* ranked = runner->ranked();
  if (ranked) record = ranked->finalize_record(std::move(record));
  // DDP at world size > 1 has it from finalize_record, with the ranks' bucket ready times.
  if (place.primary() && !record.summary.critical_path)
    record.summary.critical_path = critical_path(record);
  if (trace) {
    auto [events, offsets] = ranked
                                 ? ranked->gather_trace(trace->events())
                                 : std::pair{std::vector{trace->events()}, std::vector<int64_t>{0}};
    if (place.primary()) {
      reports::write_json_atomic(config.trace,
                                 TraceWriter::document(events, offsets, place.world_size));
      fmt::print("wrote trace {}\n", config.trace);
    }
    partial_trace.done = true;
  }
  if (place.primary() && !config.out.empty()) write_record(config, record);
  return record;
}

}  // namespace ddpb::bench
