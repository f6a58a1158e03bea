#include "bench/trainer.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "bench/comm_summary.h"
#include "bench/context.h"
#include "bench/mfu.h"
#include "bench/run_dump.h"
#include "bench/stats.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "reports/json_io.h"
#include "reports/schema_validator.h"
#include "workloads/dataloader.h"
#include "workloads/state_dict.h"

namespace ddpb::bench {
namespace {

std::unique_ptr<ModeRunner> make_runner(const RunConfig& config, const WorkloadSpec& spec) {
  if (config.mode == "dp") return make_dp_runner(config, spec);
  if (config.mode == "ddp") return make_ddp_runner(config, spec);
  return make_single_runner(config, spec);
}

nlohmann::json memory_record(const std::vector<Device>& devices) {
  nlohmann::json per_device = nlohmann::json::array();
  std::vector<Device> seen;
  for (const auto& d : devices) {
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;  // logical replicas
    seen.push_back(d);
    MemoryStats m = device_allocator(d).stats();
    per_device.push_back(
        {{"device", d.str()}, {"peak_bytes", m.peak_bytes}, {"reserved_bytes", m.reserved_bytes}});
  }
  return per_device;
}

// MFU of a CUDA run (null on CPU or for a GPU without a datasheet row). The FLOPs are the
// whole run's; they are shared by the distinct GPUs: DP's logical replicas on one GPU and
// DDP ranks beyond the GPU count (Gloo on one GPU) share theirs. `gpu_list` is the record
// context's system.gpus (the GPU names, queried once per run).
nlohmann::json run_mfu(const RunConfig& config, const std::vector<Device>& devices,
                       const nlohmann::json& gpu_list, double flops_per_s) {
  if (devices.empty() || devices.front().is_cpu()) return nullptr;
  const int index = devices.front().index;
  const int gpu_count = static_cast<int>(gpu_list.size());
  if (index >= gpu_count) return nullptr;
  std::vector<int> distinct;
  for (const auto& d : devices) {
    if (std::find(distinct.begin(), distinct.end(), d.index) == distinct.end())
      distinct.push_back(d.index);
  }
  int gpus = static_cast<int>(distinct.size());
  if (config.mode == "ddp") gpus = std::min(config.world_size, gpu_count);
  return mfu_json(flops_per_s, gpus, gpu_list[static_cast<size_t>(index)].at("name"),
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

nlohmann::json run_training(const RunConfig& config) {
  ops::set_math_mode(math_mode_from_name(config.precision));
  ops::set_attention_kind(attention_kind_from_name(config.attention));
  const WorkloadSpec& spec = find_workload(config.workload);
  auto runner = make_runner(config, spec);
  Model& model = runner->model();
  if (!config.init_from.empty()) {
    load_state_dict(model, config.init_from);
    refuse_non_finite_parameters(model, config.init_from);
  }
  auto params = model.parameters();
  int64_t n_params = 0;
  for (auto& p : params) n_params += p.data().numel();
  const Device device0 = runner->devices().front();
  DeviceGuard guard(device0);
  auto optimizer = optim::make_optimizer(config.optimizer, params);

  auto dataset = make_dataset(spec, config.seed);
  DDPB_USAGE_CHECK(config.global_batch <= dataset->size())
      << "--global-batch " << config.global_batch << " exceeds the dataset of " << dataset->size();
  const DataPlan plan = runner->data_plan(config);
  DistributedSampler sampler(dataset->size(), plan.num_replicas, plan.rank, /*shuffle=*/true,
                             config.seed, /*drop_last=*/false);
  DataLoader loader(dataset, sampler, plan.batch_size, runner->data_device());

  std::unique_ptr<RunDump> dump;
  if (!config.dump.empty()) {
    dump = std::make_unique<RunDump>(config.dump, runner->batches_file());
    if (runner->is_primary()) dump->save_init(model);
  }
  std::string device_list;
  for (const auto& d : runner->devices()) {
    if (!device_list.empty()) device_list += ',';
    device_list += d.str();
  }
  fmt::print("ddpbench run: mode {}, workload {} ({} parameters), devices {}, global batch {}\n",
             config.mode, spec.name, n_params, device_list, config.global_batch);
  for (const auto& d : runner->devices()) device_allocator(d).reset_peak();

  std::unique_ptr<TraceWriter> trace;
  if (!config.trace.empty()) {
    auto [first, last] = parse_trace_steps(config.trace_steps);
    trace = std::make_unique<TraceWriter>(runner->rank(), first, last);
  }
  // A failed run still leaves a valid trace of the steps it finished (this rank's events).
  struct PartialTrace {
    TraceWriter* trace;
    const RunConfig& config;
    ModeRunner& runner;
    bool done = false;
    ~PartialTrace() {
      if (!trace || done || !runner.is_primary()) return;
      try {
        reports::write_json_atomic(
            config.trace, TraceWriter::document({trace->events()}, {0}, runner.world_size()));
      } catch (...) {
      }
    }
  } partial_trace{trace.get(), config, *runner};

  nlohmann::json steps = nlohmann::json::array();
  std::vector<double> step_ms;
  std::map<std::string, std::vector<double>> phase_samples;
  std::vector<std::string> phase_order;
  double first_loss = 0, last_loss = 0;
  const bool on_cuda = device0.is_cuda();
  for (int64_t step = 1; step <= config.total_steps(); ++step) {
    if (on_cuda && step == config.warmup + 1) nvtx::profiler_start();  // nsys capture range
    const int64_t step_start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count();
    double data_ms = 0;
    int micro = 0;
    const BatchFn next_batch = [&] {
      nvtx::Range r("data", nvtx::Category::Data);
      auto t0 = std::chrono::steady_clock::now();
      Batch batch = loader.next();
      data_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (dump) dump->add_batch(step, micro, batch);
      ++micro;
      return batch;
    };
    StepOutcome out;
    try {
      out = runner->step(next_batch, *optimizer);
    } catch (const std::exception& e) {
      // Said at once, before unwinding tears down the process group (which can take a
      // while): the launcher names the rank whose failure it heard first.
      std::fprintf(stderr, "ddpbench: rank %d failed at step %ld: %s\n", runner->rank(),
                   static_cast<long>(step), e.what());
      std::fflush(stderr);
      throw;
    }
    DDPB_CHECK(std::isfinite(out.loss)) << "loss became " << out.loss << " at step " << step;
    const double total = data_ms + out.step_ms;
    const bool measured = step > config.warmup;
    if (step == 1) first_loss = out.loss;
    last_loss = out.loss;
    nlohmann::json phases = {{"data", data_ms}};
    if (measured) phase_samples["data"].push_back(data_ms);
    if (phase_order.empty()) phase_order.push_back("data");
    for (auto& [name, ms] : out.phases_ms) {
      phases[name] = ms;
      if (measured) phase_samples[name].push_back(ms);
      if (std::find(phase_order.begin(), phase_order.end(), name) == phase_order.end())
        phase_order.push_back(name);
    }
    if (measured) step_ms.push_back(total);
    if (trace) {
      std::vector<std::pair<std::string, double>> all_phases{{"data", data_ms}};
      all_phases.insert(all_phases.end(), out.phases_ms.begin(), out.phases_ms.end());
      trace->add_step(step, step_start_ns, all_phases, out.spans);
    }
    nlohmann::json rec = {{"step", step},
                          {"measured", measured},
                          {"loss", out.loss},
                          {"time_ms", total},
                          {"phases_ms", phases}};
    if (!out.extra.is_null()) rec["mode"] = out.extra;
    steps.push_back(rec);
    if (!config.quiet) {
      fmt::print("step {:>4}/{} loss {:.6f} time {:.2f} ms{}\n", step, config.total_steps(),
                 out.loss, total, measured ? "" : " (warm-up)");
    }
  }

  if (on_cuda) nvtx::profiler_stop();
  const Summary st = summarize(step_ms);
  const double samples_per_s = st.median > 0 ? config.global_batch * 1000.0 / st.median : 0.0;
  const double tokens_per_s = samples_per_s * static_cast<double>(model.tokens_per_sample());
  const double flops_per_s = samples_per_s * model.train_flops_per_sample();
  nlohmann::json breakdown = nlohmann::json::array();
  std::string breakdown_line;
  for (const auto& name : phase_order) {
    // A phase seen only in warm-up steps (the eager step before a --cuda-graph capture) has
    // no measured samples and no median.
    if (phase_samples[name].empty()) continue;
    double med = percentile(phase_samples[name], 50);
    breakdown.push_back({{"phase", name}, {"median_ms", med}});
    breakdown_line += fmt::format(" {} {:.2f}", name, med);
  }
  nlohmann::json memory = memory_record(runner->devices());
  nlohmann::json context = build_context();
  const nlohmann::json mfu =
      run_mfu(config, runner->devices(), context.at("system").at("gpus"), flops_per_s);

  fmt::print("summary: median step {:.3f} ms (p90 {:.3f}), {:.1f} samples/s", st.median, st.p90,
             samples_per_s);
  if (model.tokens_per_sample() > 1) fmt::print(", {:.0f} tokens/s", tokens_per_s);
  fmt::print(", {:.2f} GFLOP/s", flops_per_s / 1e9);
  if (!mfu.is_null()) fmt::print(", MFU {:.1f}%", 100.0 * mfu["mfu"].get<double>());
  fmt::print(", loss {:.4f} -> {:.4f}\n", first_loss, last_loss);
  fmt::print("phases (median ms):{}\n", breakdown_line);
  for (const auto& m : memory) {
    fmt::print("memory: {} peak {:.1f} MiB\n", m["device"].get<std::string>(),
               m["peak_bytes"].get<int64_t>() / 1048576.0);
  }

  nlohmann::json record = {
      {"schema_version", reports::kSchemaVersion},
      {"implementation", "ddpbench"},
      {"kind", "run"},
      {"context", std::move(context)},
      {"config", config.to_json()},
      {"mode", {{"name", config.mode}, {"devices", device_list}, {"details", runner->describe()}}},
      {"workload",
       {{"name", spec.name},
        {"family", family_name(spec.family)},
        {"parameters", n_params},
        {"tokens_per_sample", model.tokens_per_sample()},
        {"train_flops_per_sample", model.train_flops_per_sample()}}},
      {"steps", steps},
      {"summary",
       {{"step_time_ms", st.to_json()},
        {"phases_median_ms", breakdown},
        {"samples_per_s", samples_per_s},
        {"tokens_per_s", tokens_per_s},
        {"achieved_flops_per_s", flops_per_s},
        {"first_loss", first_loss},
        {"last_loss", last_loss}}},
      {"memory", memory}};
  if (!mfu.is_null()) record["summary"]["mfu"] = mfu;
  const int comm_world =
      config.mode == "dp" ? static_cast<int>(runner->devices().size()) : runner->world_size();
  if (auto comm = comm_summary(config.mode, steps, comm_world); !comm.is_null()) {
    fmt::print("comm ({}): median {:.3f} ms, exposed {:.3f} ms, overlap ratio {:.3f}\n",
               comm["op"].get<std::string>(), comm["comm_ms"].get<double>(),
               comm["comm_exposed_ms"].get<double>(), comm["overlap_ratio"].get<double>());
    record["summary"]["comm"] = std::move(comm);
  }
  if (runner->is_primary() && !config.save_params.empty()) {
    save_state_dict(model, config.save_params);
  }
  if (dump) {
    dump->finish(runner->is_primary() ? &model : nullptr,
                 {{"config", config.to_json()}, {"workload", record["workload"]}});
  }
  record = runner->finalize_record(std::move(record));
  if (trace) {
    auto [events, offsets] = runner->gather_trace(trace->events());
    if (runner->is_primary()) {
      reports::write_json_atomic(config.trace,
                                 TraceWriter::document(events, offsets, runner->world_size()));
      fmt::print("wrote trace {}\n", config.trace);
    }
    partial_trace.done = true;
  }
  if (runner->is_primary() && !config.out.empty()) {
    // Every record we write matches reports/schema/run.schema.json; a mismatch is our bug
    // (a field added here but not to the schema, or a NaN that JSON turned into null).
    const auto problems = reports::validate_run_record(record);
    DDPB_CHECK(problems.empty()) << "the run record does not match its schema, not writing "
                                 << config.out << ": " << reports::format_errors(problems);
    reports::write_json_atomic(config.out, record);
    fmt::print("wrote {}\n", config.out);
  }
  return record;
}

}  // namespace ddpb::bench
