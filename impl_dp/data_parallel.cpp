#include "impl_dp/data_parallel.h"

#include <set>
#include <sstream>

#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/phase_timer.h"
#include "core/stream_sanitizer.h"
#include "core/system_info.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/scatter_gather.h"

namespace ddpb::dp {

std::vector<Device> resolve_dp_devices(const std::string& device, int world_size,
                                       const std::string& devices_list) {
  std::vector<Device> out;
  if (!devices_list.empty()) {
    out = parse_device_list(devices_list);
    DDPB_USAGE_CHECK(world_size <= 1 || static_cast<int>(out.size()) == world_size)
        << "--devices lists " << out.size() << " devices but --world-size is " << world_size;
  } else {
    DDPB_USAGE_CHECK(world_size >= 1) << "--world-size must be positive, got " << world_size;
    Device base = parse_device(device);
    for (int i = 0; i < world_size; ++i) out.push_back({base.type, base.index + i});
  }
  DDPB_USAGE_CHECK(!out.empty()) << "DP needs at least one device";
  for (const auto& d : out) {
    DDPB_USAGE_CHECK(d.type == out[0].type)
        << "DP devices must all be CPU or all CUDA: " << devices_list;
    require_device(d);
  }
  std::set<Device, bool (*)(const Device&, const Device&)> unique(
      [](const Device& a, const Device& b) { return a.index < b.index; });
  for (const auto& d : out) {
    DDPB_USAGE_CHECK(d.is_cuda() || unique.insert(d).second)
        << "CPU device " << d.str() << " is listed twice (logical CPU devices are distinct)";
  }
  return out;
}

bool has_logical_replicas(const std::vector<Device>& devices) {
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i] == devices[j]) return true;
  return false;
}

DataParallel::DataParallel(ReplicaSpec model, std::vector<Device> devices, DpOptions options)
    : model_(std::move(model)), devices_(std::move(devices)), options_(options) {
  DDPB_CHECK(model_.make && model_.forward && model_.loss)
      << "DataParallel needs a replica factory, a forward and a loss";
  for (size_t r = 0; r < devices_.size(); ++r) {
    DeviceGuard guard(devices_[r]);
    replicas_.push_back(model_.make(devices_[r]));
    std::vector<Tensor> ps;
    for (auto& p : replicas_.back()->named_parameters()) {
      ps.push_back(p.var.data());
      if (sanitizer::enabled())
        sanitizer::set_name(p.var.data(), "replica " + std::to_string(r) + " " + p.name);
    }
    params_.push_back(std::move(ps));
    std::vector<Tensor> bs;
    for (auto& b : replicas_.back()->named_buffers()) bs.push_back(b.tensor);
    buffers_.push_back(std::move(bs));
    // CPU: the worker thread is the replica's executor (Inline); the side stream is a
    // thread of its own so scatter copies overlap.
    compute_streams_.push_back(
        make_stream(devices_[r], "dp-compute-" + std::to_string(r), StreamKind::Inline));
    side_streams_.push_back(
        make_stream(devices_[r], "dp-h2d-" + std::to_string(r), StreamKind::Executor));
  }
  enable_peer_access(devices_);  // replicate, gather and reduce_add copy between the GPUs
  groups_ = coalesce_groups(params_[0], options_.broadcast_bytes);
  buffer_groups_ = coalesce_groups(buffers_[0], options_.broadcast_bytes);
  transport_ = make_transport(devices_);
  pool_ = std::make_unique<WorkerPool>(devices_, compute_streams_);
}

DataParallel::~DataParallel() = default;

// Note [DP replica join]
// After parallel_apply, replica r's results (outputs, then gradients) live on device r and
// were written on its compute stream. They are read next by the driver thread's streams:
// device 0's (gather, the loss, reduce_add's sums) and device r's own (reduce_add's
// flatten, which runs on device r before the copy to device 0). Every one of those streams
// must wait on r's event; joining device 0's alone leaves the flatten on device r racing
// the backward that writes the gradients (the stream-order sanitizer reports it).
void DataParallel::join_replicas(size_t used) {
  Stream& driver = current_stream(devices_[0]);
  for (size_t r = 0; r < used; ++r) {
    Event e = Event::create(devices_[r]);
    e.record(*compute_streams_[r]);
    driver.wait(e);
    Stream& own = current_stream(devices_[r]);
    if (&own != &driver) own.wait(e);
  }
}

void DataParallel::fork_replicas(size_t used) {
  for (size_t r = 0; r < used; ++r) {
    Event e = Event::create(devices_[r]);
    e.record(current_stream(devices_[r]));
    compute_streams_[r]->wait(e);
  }
}

// Note [DP buffers]
// Every step the replicas get device 0's buffers along with its parameters, as PyTorch's
// replicate() does. In training mode each replica's BatchNorm then updates its own copy of
// the running statistics from its own part of the batch, and only replica 0's copy is the
// module's: the other replicas' updates are overwritten by the next replicate. So after a DP
// step the running statistics are those of device 0's chunk of the batch alone, exactly as
// with torch.nn.DataParallel (the record says so under mode.details.buffers).
void DataParallel::replicate(size_t used) {
  broadcast_coalesced(*transport_, params_, groups_, used);
  if (!buffer_groups_.empty()) broadcast_coalesced(*transport_, buffers_, buffer_groups_, used);
}

void DataParallel::reduce_add(size_t used) {
  std::vector<std::vector<Tensor>> grads(used);
  for (size_t r = 0; r < used; ++r) {
    for (auto& p : replicas_[r]->named_parameters()) {
      // A parameter this step did not reach contributes zeros (the sum stays exact).
      if (!p.var.grad().defined())
        p.var.set_grad(Tensor::zeros(p.var.shape(), DType::F32, devices_[r]));
      if (sanitizer::enabled()) {
        sanitizer::set_name(p.var.grad(), "grad of replica " + std::to_string(r) + " " + p.name);
      }
      grads[r].push_back(p.var.grad());
    }
  }
  reduce_add_coalesced(*transport_, grads, groups_, used);
}

// What one step carries from phase to phase.
struct DataParallel::StepState {
  int64_t rows = 0;            // of the batch
  std::vector<int64_t> sizes;  // rows of each replica (torch.chunk)
  size_t used = 0;             // replicas that got rows
  Scattered xs;
  Tensor targets;
  std::vector<autograd::Var> outputs;
  autograd::Var gathered, loss;
  std::vector<PhaseTimer> replica;  // forward and backward on each replica's compute stream
};

DpStepStats DataParallel::step(const Tensor& x, const Tensor& y, optim::Optimizer& optimizer) {
  const Device dev0 = devices_[0];
  DeviceGuard guard(dev0);
  PhaseTimer timer(current_stream(dev0));
  DpStepStats stats;
  StepState st;
  st.rows = x.size(0);
  st.sizes = chunk_sizes(st.rows, static_cast<int64_t>(devices_.size()));
  st.used = st.sizes.size();
  int64_t param_bytes = 0, buffer_bytes = 0;
  for (const auto& t : params_[0]) param_bytes += static_cast<int64_t>(t.nbytes());
  for (const auto& t : buffers_[0]) buffer_bytes += static_cast<int64_t>(t.nbytes());
  const auto copies = static_cast<int64_t>(st.used - 1);
  stats.reduce_bytes = param_bytes * copies;
  stats.replicate_bytes = (param_bytes + buffer_bytes) * copies;
  stats.parameter_bytes = param_bytes;
  stats.buffer_bytes = buffer_bytes;
  stats.input_bytes_per_sample = st.rows > 0 ? static_cast<int64_t>(x.nbytes()) / st.rows : 0;
  stats.scatter_bytes = stats.input_bytes_per_sample * (st.rows - st.sizes[0]);

  timer.begin(step_phase_name(Phase::Scatter));
  optimizer.zero_grad();
  for (size_t r = 1; r < st.used; ++r) {
    for (auto& p : replicas_[r]->named_parameters()) p.var.set_grad(Tensor());
  }
  scatter_batch(st, x, y);
  timer.begin(step_phase_name(Phase::Replicate));
  {
    nvtx::Range range("dp.replicate", nvtx::Category::DP, stats.replicate_bytes);
    replicate(st.used);
  }
  timer.begin(step_phase_name(Phase::Forward));
  forward_replicas(st);
  timer.begin(step_phase_name(Phase::Gather));
  stats.gather_bytes = gather_outputs(st);
  stats.output_bytes_per_sample = st.rows > 0 ? stats.gather_bytes / st.rows : 0;
  timer.begin(step_phase_name(Phase::Loss));
  {
    nvtx::Range range("dp.loss", nvtx::Category::DP);
    st.loss = model_.loss(st.gathered, st.targets);
    st.loss.backward();  // the gradient of the gathered outputs, on device 0
  }
  timer.begin(step_phase_name(Phase::Backward));
  backward_replicas(st);
  timer.begin(step_phase_name(Phase::Reduce));
  {
    nvtx::Range range("dp.reduce", nvtx::Category::DP, stats.reduce_bytes);
    reduce_add(st.used);
  }
  timer.begin(step_phase_name(Phase::Optimizer));
  optimizer.step();
  timer.end();

  stats.loss = st.loss.data().item();  // synchronises device 0
  timer.synchronize();
  fill_timings(stats, st, timer);
  return stats;
}

void DataParallel::scatter_batch(StepState& st, const Tensor& x, const Tensor& y) {
  nvtx::Range range("dp.scatter", nvtx::Category::DP, static_cast<int64_t>(x.nbytes()));
  st.xs = scatter(x, st.sizes, devices_, side_streams_);
  st.targets = Tensor::empty(y.shape(), y.dtype(), devices_[0]);
  ops::copy(y, st.targets);
  for (auto& e : st.xs.ready) e.synchronize();  // host-side completion of the side copies
}

// parallel_apply: each worker runs its replica's forward on its own compute stream.
void DataParallel::forward_replicas(StepState& st) {
  nvtx::Range range("dp.forward", nvtx::Category::DP);
  fork_replicas(st.used);
  st.outputs.assign(st.used, autograd::Var());
  st.replica.clear();
  for (size_t r = 0; r < st.used; ++r) st.replica.emplace_back(*compute_streams_[r]);
  pool_->run(st.used, [&](size_t r) {
    nvtx::Range dev_range("dp.forward.replica " + std::to_string(r), nvtx::Category::Forward);
    compute_streams_[r]->wait(st.xs.ready[r]);
    st.replica[r].begin("forward");
    st.outputs[r] = model_.forward(*replicas_[r], st.xs.parts[r]);
    st.replica[r].end();
  });
  join_replicas(st.used);
}

// The outputs, concatenated on device 0; returns the bytes that moved.
int64_t DataParallel::gather_outputs(StepState& st) {
  std::vector<Tensor> parts;
  int64_t bytes = 0;
  for (auto& o : st.outputs) {
    parts.push_back(o.data());
    bytes += static_cast<int64_t>(o.data().nbytes());
  }
  nvtx::Range range("dp.gather", nvtx::Category::DP, bytes);
  st.gathered = autograd::Var(gather(parts, devices_[0]), /*requires_grad=*/true);
  return bytes;
}

// The output gradient scattered back (rows of replica r to device r), then each replica's
// backward on its own thread and stream.
void DataParallel::backward_replicas(StepState& st) {
  nvtx::Range range("dp.backward", nvtx::Category::DP);
  const Tensor& dout = st.gathered.grad();
  // Per batch row (an output may have several rows per sample: GPT's [B*T, V] logits).
  const int64_t row_elems = dout.numel() / st.rows;
  std::vector<Tensor> douts(st.used);
  int64_t start = 0;
  for (size_t r = 0; r < st.used; ++r) {
    const Tensor& out = st.outputs[r].data();
    Tensor src = dout.flat_view(start * row_elems, out.shape());
    start += st.sizes[r];
    douts[r] = Tensor::empty(out.shape(), out.dtype(), devices_[r]);
    ops::copy(src, douts[r]);
  }
  fork_replicas(st.used);
  pool_->run(st.used, [&](size_t r) {
    nvtx::Range dev_range("dp.backward.replica " + std::to_string(r), nvtx::Category::Backward);
    st.replica[r].begin("backward");
    st.outputs[r].backward(douts[r]);
    st.replica[r].end();
  });
  join_replicas(st.used);
}

// The phases run one after another on device 0's stream, so a transfer starts where the
// phases before it end: from the step's host start, in device time. The reduce_add is the
// gradient synchronisation; it starts when the backward compute has ended.
void DataParallel::add_transfers(DpStepStats& stats, const PhaseTimer& timer) {
  stats.clock_zero_ns = timer.host_start_ns(step_phase_name(kPhases[0]));
  double at_ms = 0;
  for (const PhaseTime& p : stats.phases) {
    const auto transfer = [&](const char* op, int64_t bytes) {
      CollectiveTiming t;
      t.op = op;
      t.name = step_phase_name(p.phase);
      // A lane per transfer: back to back on one lane, their rounded ends could overlap.
      t.lane = std::string("dp ") + step_phase_name(p.phase);
      t.bytes = bytes;
      t.launch_ms = t.start_ms = at_ms;
      t.complete_ms = at_ms + p.ms;
      t.gradient = p.phase == Phase::Reduce;
      stats.collectives.push_back(std::move(t));
    };
    if (p.phase == Phase::Scatter) transfer("scatter", stats.scatter_bytes);
    if (p.phase == Phase::Replicate) transfer("broadcast", stats.replicate_bytes);
    if (p.phase == Phase::Gather) transfer("gather", stats.gather_bytes);
    if (p.phase == Phase::Reduce) {
      stats.compute_end_ms = at_ms;
      transfer("reduce", stats.reduce_bytes);
    }
    at_ms += p.ms;
  }
}

void DataParallel::fill_timings(DpStepStats& stats, const StepState& st,
                                const PhaseTimer& timer) const {
  for (StepPhase p : kPhases) stats.phases.push_back({p, timer.ms(step_phase_name(p))});
  stats.step_ms = timer.total_ms();
  add_transfers(stats, timer);
  stats.devices.resize(devices_.size());
  for (size_t r = 0; r < st.used; ++r) {
    const PhaseTimer& t = st.replica[r];
    t.synchronize();
    auto& d = stats.devices[r];
    d.busy_ms = t.ms("forward") + t.ms("backward");
    d.idle_ms = std::max(0.0, stats.step_ms - d.busy_ms);
    d.rows = st.sizes[r];
    d.forward_start_ns = t.host_start_ns("forward");
    d.forward_end_ns = t.host_end_ns("forward");
    d.backward_start_ns = t.host_start_ns("backward");
    d.backward_end_ns = t.host_end_ns("backward");
  }
  for (size_t r = st.used; r < devices_.size(); ++r) stats.devices[r].idle_ms = stats.step_ms;
}

}  // namespace ddpb::dp
