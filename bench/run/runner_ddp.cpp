// --mode ddp: one process per rank (started by comm/launcher or an external launcher),
// DistributedDataParallel through impl_ddp's Reducer.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "bench/run/bucket_tuner.h"
#include "bench/run/fault_injection.h"
#include "bench/run/metrics.h"
#include "bench/run/stats.h"
#include "bench/run/trainer.h"
#include "comm/flight_recorder.h"
#include "comm/process_group.h"
#include "comm/rank_env.h"
#include "comm/tcp_store.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/phase_timer.h"
#include "core/rng.h"
#include "core/stream.h"
#include "impl_ddp/distributed_data_parallel.h"
#include "reports/json_io.h"

namespace ddpb::bench {
namespace {

Device rank_device(const RunConfig& c, const comm::RankEnv& env) {
  if (!c.devices.empty()) {
    std::vector<std::string> items;
    size_t start = 0;
    while (start <= c.devices.size()) {
      size_t comma = c.devices.find(',', start);
      items.push_back(c.devices.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    DDPB_USAGE_CHECK(static_cast<int>(items.size()) == env.world_size)
        << "--devices lists " << items.size() << " devices for " << env.world_size << " ranks";
    return parse_device(items[static_cast<size_t>(env.rank)]);
  }
  Device base = parse_device(c.device);
  return {base.type, env.local_rank};
}

}  // namespace

// What every rank of one job shares and another job on the same port most likely does not
// (Note [Store job identity]): a hash of the resolved configuration and the store's port.
std::string job_identity(const RunConfig& c, const comm::RankEnv& env) {
  const std::string text = reports::json_text(c.to_json()) + "|" + std::to_string(env.master_port);
  return fmt::format("{:016x}", hash_name(text.c_str()));
}

std::string default_flight_dir(const RunConfig& c, const comm::RankEnv& env) {
  return c.flight_dir.empty() ? comm::default_flight_dir(env.master_port) : c.flight_dir;
}

namespace {

// Union of [start, end) intervals, and the part of it after `after`.
class DdpRunner final : public ModeRunner {
 public:
  DdpRunner(const RunConfig& config, const WorkloadSpec& spec)
      : config_(config), fault_(parse_fault(config.inject_fault)) {
    auto env = comm::detect_rank_env();
    DDPB_CHECK(env) << "--mode ddp runs as a rank of a launcher (RANK/WORLD_SIZE not set)";
    env_ = *env;
    DDPB_USAGE_CHECK(env_.world_size == config.world_size || config.world_size == 1)
        << "--world-size " << config.world_size << " but the launcher started " << env_.world_size
        << " ranks";
    // The flight recorder dumps here on a timeout, a failure or a signal (comm/flight_recorder.h).
    comm::set_flight_identity(env_.rank, env_.world_size, default_flight_dir(config, env_));
    comm::install_flight_recorder_signal_handlers();
    device_ = rank_device(config, env_);
    require_device(device_);
    DeviceGuard guard(device_);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
    store_ = comm::make_store_from_env(env_.rank, timeout, job_identity(config, env_));
    comm::ProcessGroupOptions pg_options;
    pg_options.backend = config.backend.value_or(device_.is_cuda() ? comm::CommBackend::Nccl
                                                                   : comm::CommBackend::Gloo);
    pg_options.device = device_;
    pg_options.timeout = timeout;
    pg_options.hostname = env_.master_addr;
    pg_ = comm::make_process_group(store_, env_.rank, env_.world_size, pg_options);
    clock_offset_ns_ = sync_clock();
    model_ = make_model(spec, device_, config.seed);
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(
        *model_, [this](const Tensor& x) { return model_->forward(x); }, pg_, ddp_options(config));
    if (config.bucket_cap_auto) {
      double gradient_bytes = 0;
      for (auto& p : model_->parameters()) gradient_bytes += static_cast<double>(p.data().nbytes());
      search_ = std::make_unique<WarmupBucketSearch>(
          gradient_bytes / 1048576.0,
          [this](double mb) {
            ddp_->reducer().set_bucket_cap(static_cast<size_t>(mb * 1048576.0));
            return ddp_->reducer().layout().dump();
          },
          [this](double v) { return rank0_value(v); });
    }
    fmt::print("ddp rank {}/{} on {} ({} backend, launched by {}), {} buckets\n", env_.rank,
               env_.world_size, device_.str(), pg_->backend(), env_.source,
               ddp_->reducer().num_buckets());
  }

  Model& model() override { return *model_; }
  Device data_device() const override { return device_; }
  std::vector<Device> devices() const override { return {device_}; }
  DataPlan data_plan(const RunConfig& c) const override {
    return {env_.world_size, env_.rank, c.global_batch / env_.world_size};
  }
  bool is_primary() const override { return env_.rank == 0; }
  std::vector<std::pair<std::string, std::vector<NamedTensor>>> dump_extras() const override {
    std::vector<NamedTensor> q;
    for (auto& [name, t] : ddp_->reducer().comm_hook().dump_tensors()) q.push_back({name, t});
    if (q.empty()) return {};
    return {{"powersgd_q.safetensors", std::move(q)}};
  }
  std::string batches_file() const override {
    return "batches.rank" + std::to_string(env_.rank) + ".safetensors";
  }

  static ddp::DdpOptions ddp_options(const RunConfig& config) {
    ddp::DdpOptions o;
    o.reducer.first_bucket_bytes = static_cast<size_t>(config.first_bucket_mb * 1048576.0);
    o.reducer.bucket_bytes = static_cast<size_t>(config.bucket_cap_mb * 1048576.0);
    o.reducer.grad_as_bucket_view = config.grad_as_bucket_view;
    o.reducer.find_unused_parameters = config.find_unused_params;
    o.reducer.overlap = !config.no_overlap;
    o.reducer.comm_hook = config.comm_hook;
    o.reducer.powersgd = config.powersgd;
    o.reducer.powersgd.seed = config.seed;
    o.reducer.powersgd.keep_random_q = !config.dump.empty();
    o.reducer.check_finite = config.check_finite;
    o.broadcast_buffers = config.broadcast_buffers;
    o.sync_batch_norm = config.sync_bn;
    return o;
  }

  StepOutcome step(const BatchFn& next_batch, optim::Optimizer& optimizer) override {
    DeviceGuard guard(device_);
    ++step_;
    inject_step_fault();
    // set_to_none also with --grad-as-bucket-view: backward then computes every gradient into
    // its bucket slot (Note [Gradient destinations]), which is cheaper than zeroing the
    // buckets and accumulating into them, and leaves .grad the bucket view all the same.
    optimizer.zero_grad(/*set_to_none=*/true);
    PhaseTimer timer(current_stream(device_));
    StepOutcome out;
    if (ddp_->syncs_buffers()) {
      timer.begin("buffer_broadcast");
      nvtx::Range r("ddp.buffer_broadcast", nvtx::Category::Comm);
      out.extra["buffer_broadcast_bytes"] = ddp_->sync_buffers();
      timer.end();
    }
    out.loss = run_micro_steps(next_batch, timer);  // leaves "comm_exposed" begun
    const auto bwd_end = std::chrono::steady_clock::now();
    {
      nvtx::Range r("ddp.finalize", nvtx::Category::Comm);
      ddp_->finish_gradient_sync();
    }
    timer.begin("optimizer");
    optimizer.step();
    timer.end();
    timer.synchronize();
    // SyncBatchNorm's collectives run inside forward and backward: they become a phase of
    // their own, taken out of the two they interrupt, so that the phases still add up.
    const SyncBnTime sync_bn = add_sync_bn_records(out);
    out.step_ms = 0;
    for (const char* phase : {"buffer_broadcast", "forward", "sync_bn", "backward_compute",
                              "comm_exposed", "optimizer"}) {
      const std::string_view name(phase);
      if (name == "sync_bn" ? !sync_bn.any : !timer.has(phase)) continue;
      double ms = timer.ms(phase);
      if (name == "forward") ms -= sync_bn.forward_ms;
      if (name == "backward_compute") ms -= sync_bn.backward_ms;
      if (name == "sync_bn") ms = sync_bn.forward_ms + sync_bn.backward_ms;
      out.phases_ms.emplace_back(phase, ms);
      out.step_ms += ms;  // the data loading between micro-steps is not counted
    }
    add_bucket_records(out, bwd_end);
    if (search_) {
      search_->after_step(step_, out.step_ms);
      if (search_->tuner().done() && !reported_choice_) {
        reported_choice_ = true;
        if (env_.rank == 0)
          fmt::print(
              "ddp: --bucket-cap-mb auto chose {:g} MB ({} candidates in {} warm-up steps)\n",
              search_->tuner().chosen_mb(), search_->tuner().candidates().size(), step_);
      }
    }
    return out;
  }

  // Rank 0's `value` on every rank (Note [Bucket autotune agreement]).
  double rank0_value(double value) {
    Tensor t = Tensor::from_floats({static_cast<float>(value)}, {1}, device_);
    pg_->broadcast(t, /*root=*/0)->wait();
    return t.item();
  }

  void inject_step_fault() {
    if (fault_.rank != env_.rank || fault_.step != step_) return;
    if (fault_.kind == FaultSpec::Kind::CorruptGrad) {
      ddp_->reducer().corrupt_next_gradient(0);  // the first parameter: ready last
    } else if (fault_.kind == FaultSpec::Kind::StoreDrop) {
      if (auto* tcp = dynamic_cast<comm::TCPStore*>(store_.get())) {
        std::fprintf(stderr, "injected fault: rank %d drops its store connection at step %ld\n",
                     env_.rank, static_cast<long>(step_));
        tcp->drop_connection();
      }
    }
  }

  // The --accumulate micro-steps (no_sync for the first K-1); returns the mean loss. The
  // phase after the last backward is "comm_exposed", left open for the caller.
  float run_micro_steps(const BatchFn& next_batch, PhaseTimer& timer) {
    const int64_t k = config_.accumulate;
    Tensor scale;
    if (k > 1) {
      // Each micro-loss is divided by K, so K micro-steps equal one step on a K-times batch.
      scale = Tensor::empty({1}, DType::F32, device_);
      ops::fill(scale, 1.0f / static_cast<float>(k));
    }
    float loss_sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      Batch batch = next_batch();
      timer.begin("forward");
      // Inside the timed forward, so that a slow rank's own compute shows the delay.
      if (j == 0) maybe_inject_fault(fault_, env_.rank, step_);
      autograd::Var loss;
      {
        nvtx::Range r("forward", nvtx::Category::Forward);
        loss = model_loss(ddp_->forward(batch.x), batch.y);
      }
      timer.begin("backward_compute");
      {
        nvtx::Range r("backward", nvtx::Category::Backward);
        if (j < k - 1) {
          auto no_sync = ddp_->no_sync();
          ddp_->backward(loss, scale);
        } else {
          ddp_->backward(loss, scale);
        }
      }
      if (j < k - 1) {
        timer.end();
      } else {
        timer.begin("comm_exposed");
      }
      loss_sum += loss.data().item();
    }
    return loss_sum / static_cast<float>(k);
  }

  std::string buffer_semantics() const {
    if (model_->named_buffers().empty()) return "none";
    if (config_.sync_bn) return "SyncBatchNorm: statistics of the global batch on every rank";
    return config_.broadcast_buffers
               ? "broadcast from rank 0 before every step (PyTorch's broadcast_buffers=True)"
               : "each rank keeps its own (broadcast_buffers=False); the end-of-run check "
                 "compares parameters only";
  }

  struct SyncBnTime {
    bool any = false;
    double forward_ms = 0, backward_ms = 0;  // the allgathers, the allreduces
  };

  // SyncBatchNorm's collectives, inside forward and backward: their times and one trace span
  // each.
  SyncBnTime add_sync_bn_records(StepOutcome& out) {
    SyncBnTime t;
    ddp::ProcessGroupBatchNormSync* sync = ddp_->batch_norm_sync();
    if (sync == nullptr) return t;
    t.any = true;
    int64_t bytes = 0;
    for (const ddp::SyncBnRecord& r : sync->take_records()) {
      const double ms = static_cast<double>(r.end_ns - r.start_ns) / 1e6;
      (std::string_view(r.op) == "allgather" ? t.forward_ms : t.backward_ms) += ms;
      bytes += r.bytes;
      out.spans.push_back(
          {std::string("sync_bn ") + r.op, "comm sync_bn", r.start_ns, ms, {{"bytes", r.bytes}}});
    }
    out.extra["sync_bn_ms"] = t.forward_ms + t.backward_ms;
    out.extra["sync_bn_bytes"] = bytes;
    return t;
  }

  // One bucket's record and trace spans: one span per collective (PowerSGD has up to three)
  // and per host-timed hook compute; its collectives' busy intervals go to `busy`.
  nlohmann::json bucket_record(const ddp::BucketRecord& r, int64_t zero_ns, StepOutcome& out,
                               std::vector<Interval>& busy) const {
    const double factor = busbw_factor(Collective::AllReduce, pg_->size());
    nlohmann::json collectives = nlohmann::json::array();
    for (const auto& c : r.collectives) {
      const double start = c.start_ms > 0 ? c.start_ms : c.launch_ms;
      busy.emplace_back(start, c.complete_ms);
      const double busbw = algbw_GBps(static_cast<double>(c.bytes), c.complete_ms - start) * factor;
      const std::string name = c.name == "allreduce" ? c.name : "powersgd " + c.name;
      out.spans.push_back({name + " bucket " + std::to_string(r.index),
                           "comm bucket " + std::to_string(r.index),
                           zero_ns + static_cast<int64_t>(start * 1e6),
                           c.complete_ms - start,
                           {{"bucket", r.index},
                            {"bytes", c.bytes},
                            {"busbw_GBps", busbw},
                            {"ready_ms", r.ready_ms},
                            {"launch_ms", c.launch_ms}}});
      collectives.push_back({{"name", c.name},
                             {"bytes", c.bytes},
                             {"launch_ms", c.launch_ms},
                             {"start_ms", start},
                             {"complete_ms", c.complete_ms}});
    }
    double hook_compute_ms = 0;
    for (const auto& h : r.compute) {
      hook_compute_ms += h.end_ms - h.start_ms;
      out.spans.push_back({h.name + " bucket " + std::to_string(r.index),
                           "comm hook compute",
                           zero_ns + static_cast<int64_t>(h.start_ms * 1e6),
                           h.end_ms - h.start_ms,
                           {{"bucket", r.index}}});
    }
    const double start = r.start_ms > 0 ? r.start_ms : r.launch_ms;
    const double algbw = algbw_GBps(static_cast<double>(r.bytes), r.complete_ms - start);
    return {{"bucket", r.index},
            {"params", r.params},
            {"bytes", r.bytes},
            {"ready_ms", r.ready_ms},
            {"launch_ms", r.launch_ms},
            {"start_ms", start},
            {"complete_ms", r.complete_ms},
            {"algbw_GBps", algbw},
            {"busbw_GBps", algbw * factor},
            {"collectives", collectives},
            {"hook_compute_ms", hook_compute_ms}};
  }

  void add_bucket_records(StepOutcome& out, std::chrono::steady_clock::time_point bwd_end) {
    // Per-bucket records; communication time is the union of the collectives' busy
    // intervals, exposed communication the part after backward compute ended.
    ddp::Reducer& reducer = ddp_->reducer();
    const auto& recs = reducer.last_records();
    std::vector<Interval> busy;
    nlohmann::json buckets = nlohmann::json::array();
    const int64_t zero_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                reducer.backward_start().time_since_epoch())
                                .count();
    double first_launch = recs.empty() ? 0.0 : recs.front().launch_ms, last_complete = 0;
    int64_t bytes = 0;
    for (const auto& r : recs) {
      first_launch = std::min(first_launch, r.launch_ms);
      last_complete = std::max(last_complete, r.complete_ms);
      bytes += r.bytes;
      buckets.push_back(bucket_record(r, zero_ns, out, busy));
    }
    const double sync_bwd_end_ms =
        recs.empty()
            ? 0.0
            : std::chrono::duration<double, std::milli>(bwd_end - reducer.backward_start()).count();
    const CommTime ct = comm_time(std::move(busy), sync_bwd_end_ms);
    out.extra.update(nlohmann::json{
        {"rank", env_.rank},
        {"buckets", buckets},
        {"comm_bytes", bytes},
        {"comm_ms", ct.comm_ms},
        {"comm_exposed_ms", ct.exposed_ms},
        {"overlap_ratio", overlap_ratio(ct.comm_ms, ct.exposed_ms)},
        {"backward_end_ms", sync_bwd_end_ms},
        {"span_overlap_ratio", span_overlap_ratio(first_launch, last_complete, sync_bwd_end_ms)}});
  }

  int world_size() const override { return env_.world_size; }
  int rank() const override { return env_.rank; }

  std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> gather_trace(
      nlohmann::json mine) override {
    nlohmann::json payload = {{"offset_ns", clock_offset_ns_}, {"events", std::move(mine)}};
    store_->set_string("ddpbench/trace/" + std::to_string(env_.rank), reports::json_text(payload));
    if (env_.rank != 0) return {};
    std::vector<nlohmann::json> events;
    std::vector<int64_t> offsets;
    for (int r = 0; r < env_.world_size; ++r) {
      auto p = nlohmann::json::parse(store_->get_string("ddpbench/trace/" + std::to_string(r)));
      offsets.push_back(p["offset_ns"].get<int64_t>());
      events.push_back(std::move(p["events"]));
    }
    return {std::move(events), std::move(offsets)};
  }

  nlohmann::json finalize_record(nlohmann::json record) override {
    ddp_->check_replicas_consistent();
    // Every rank publishes its summary; rank 0 merges them into the one report.
    std::vector<std::pair<std::string, double>> phases;
    for (const auto& ph : record["summary"]["phases_median_ms"])
      phases.emplace_back(ph["phase"].get<std::string>(), ph["median_ms"].get<double>());
    nlohmann::json mine = {{"rank", env_.rank},
                           {"device", device_.str()},
                           {"compute_ms", compute_time_ms(phases)},
                           {"step_time_ms", record["summary"]["step_time_ms"]},
                           {"phases_median_ms", record["summary"]["phases_median_ms"]},
                           {"memory", record["memory"]}};
    store_->set_string("ddpbench/record/" + std::to_string(env_.rank), reports::json_text(mine));
    if (env_.rank != 0) return record;
    nlohmann::json ranks = nlohmann::json::array();
    std::vector<double> compute_ms;
    for (int r = 0; r < env_.world_size; ++r) {
      ranks.push_back(
          nlohmann::json::parse(store_->get_string("ddpbench/record/" + std::to_string(r))));
      compute_ms.push_back(ranks.back()["compute_ms"].get<double>());
    }
    const StragglerSummary skew = straggler_summary(compute_ms);
    nlohmann::json stragglers = nlohmann::json::array();
    for (const Straggler& s : skew.stragglers) {
      stragglers.push_back({{"rank", s.rank}, {"compute_ms", s.compute_ms}, {"skew", s.skew}});
      fmt::print("ddp: straggler: rank {} computes {:.2f} ms a step, {:.2f}x the fastest rank\n",
                 s.rank, s.compute_ms, s.skew);
    }
    record["ranks"] = ranks;
    record["summary"]["straggler_skew"] = skew.skew;
    record["summary"]["stragglers"] = stragglers;
    record["mode"]["details"] = {{"backend", pg_->backend()},
                                 {"buffers", buffer_semantics()},
                                 {"world_size", env_.world_size},
                                 {"launcher", env_.source},
                                 {"buckets_initial", ddp_->reducer().initial_layout()},
                                 {"buckets_rebuilt", ddp_->reducer().layout()},
                                 {"rebuilt", ddp_->reducer().rebuilt()}};
    if (search_) record["mode"]["details"]["bucket_autotune"] = search_->tuner().to_json();
    // The report is complete only when every rank got here: say so on rank 0's exit path.
    fmt::print("ddp: merged records of {} ranks (straggler skew {:.3f})\n", env_.world_size,
               record["summary"]["straggler_skew"].get<double>());
    return record;
  }

 private:
  // Clock offset onto rank 0's steady clock, NTP-style through the store: rank r sends its
  // time, rank 0 answers with its own at once, and the answer is placed at the midpoint of
  // the round trip. Zero on rank 0 (and within a round trip of zero on one node).
  int64_t sync_clock() {
    const auto now = steady_now_ns;
    if (env_.rank == 0) {
      for (int r = 1; r < env_.world_size; ++r) {
        store_->get("ddpbench/clock/ping/" + std::to_string(r));
        store_->set_string("ddpbench/clock/pong/" + std::to_string(r), std::to_string(now()));
      }
      return 0;
    }
    const int64_t sent = now();
    store_->set_string("ddpbench/clock/ping/" + std::to_string(env_.rank), std::to_string(sent));
    const int64_t remote =
        std::stoll(store_->get_string("ddpbench/clock/pong/" + std::to_string(env_.rank)));
    const int64_t received = now();
    return remote - (sent + received) / 2;
  }

  RunConfig config_;
  FaultSpec fault_;
  int64_t step_ = 0;
  std::unique_ptr<WarmupBucketSearch> search_;  // --bucket-cap-mb auto
  bool reported_choice_ = false;
  int64_t clock_offset_ns_ = 0;
  comm::RankEnv env_;
  Device device_;
  std::shared_ptr<comm::Store> store_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

}  // namespace

std::unique_ptr<ModeRunner> make_ddp_runner(const RunConfig& config, const WorkloadSpec& spec) {
  return std::make_unique<DdpRunner>(config, spec);
}

}  // namespace ddpb::bench
