#include "impl_dp/data_parallel.h"

#include <chrono>
#include <set>
#include <sstream>

#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/stream_sanitizer.h"
#include "core/system_info.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/scatter_gather.h"

namespace ddpb::dp {
namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

const char* phase_name(Phase p) {
  static const char* names[] = {"scatter", "replicate", "forward", "gather",
                                "loss",    "backward",  "reduce",  "optimizer"};
  return names[static_cast<size_t>(p)];
}

std::vector<Device> resolve_dp_devices(const std::string& device, int world_size,
                                       const std::string& devices_list) {
  std::vector<Device> out;
  if (!devices_list.empty()) {
    std::stringstream ss(devices_list);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(parse_device(item));
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
    // CPU: the worker thread is the replica's executor (Inline); the side stream is a
    // thread of its own so scatter copies overlap.
    compute_streams_.push_back(
        make_stream(devices_[r], "dp-compute-" + std::to_string(r), StreamKind::Inline));
    side_streams_.push_back(
        make_stream(devices_[r], "dp-h2d-" + std::to_string(r), StreamKind::Executor));
  }
  enable_peer_access(devices_);  // replicate, gather and reduce_add copy between the GPUs
  groups_ = coalesce_groups(params_[0], options_.broadcast_bytes);
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

void DataParallel::replicate(size_t used) {
  broadcast_coalesced(*transport_, params_, groups_, used);
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

DpStepStats DataParallel::step(const Tensor& x, const Tensor& y, optim::Optimizer& optimizer) {
  const Device dev0 = devices_[0];
  DeviceGuard guard(dev0);
  Stream& driver = current_stream(dev0);
  std::array<Event, kNumPhases + 1> marks;
  for (auto& e : marks) e = Event::create(dev0);
  auto mark = [&](size_t i) { marks[i].record(driver); };
  DpStepStats stats;
  const int64_t rows = x.size(0);
  const auto sizes = chunk_sizes(rows, static_cast<int64_t>(devices_.size()));
  const size_t used = sizes.size();

  mark(0);
  optimizer.zero_grad();
  for (size_t r = 1; r < used; ++r) {
    for (auto& p : replicas_[r]->named_parameters()) p.var.set_grad(Tensor());
  }
  Scattered xs;
  Tensor targets;
  {
    nvtx::Range range("dp.scatter", nvtx::Category::DP, static_cast<int64_t>(x.nbytes()));
    xs = scatter(x, sizes, devices_, side_streams_);
    targets = Tensor::empty(y.shape(), y.dtype(), dev0);
    ops::copy(y, targets);
    for (auto& e : xs.ready) e.synchronize();  // host-side completion of the side copies
  }
  mark(1);
  int64_t param_bytes = 0;
  for (const auto& t : params_[0]) param_bytes += static_cast<int64_t>(t.nbytes());
  {
    stats.replicate_bytes = param_bytes * static_cast<int64_t>(used - 1);
    nvtx::Range range("dp.replicate", nvtx::Category::DP, stats.replicate_bytes);
    replicate(used);
  }
  mark(2);
  fork_replicas(used);

  // Per-replica events around forward and backward, on the replica's own stream.
  std::vector<std::array<Event, 4>> busy(used);
  std::vector<std::array<int64_t, 4>> host_ns(used);
  std::vector<autograd::Var> outputs(used);
  {
    nvtx::Range range("dp.forward", nvtx::Category::DP);
    pool_->run(used, [&](size_t r) {
      nvtx::Range dev_range("dp.forward.replica " + std::to_string(r), nvtx::Category::Forward);
      for (auto& e : busy[r]) e = Event::create(devices_[r]);
      compute_streams_[r]->wait(xs.ready[r]);
      busy[r][0].record(*compute_streams_[r]);
      host_ns[r][0] = now_ns();
      outputs[r] = model_.forward(*replicas_[r], xs.parts[r]);
      host_ns[r][1] = now_ns();
      busy[r][1].record(*compute_streams_[r]);
    });
    join_replicas(used);
  }
  mark(3);
  autograd::Var gathered;
  {
    std::vector<Tensor> parts;
    for (auto& o : outputs) {
      parts.push_back(o.data());
      stats.gather_bytes += static_cast<int64_t>(o.data().nbytes());
    }
    nvtx::Range range("dp.gather", nvtx::Category::DP, stats.gather_bytes);
    gathered = autograd::Var(gather(parts, dev0), /*requires_grad=*/true);
  }
  mark(4);
  autograd::Var loss;
  {
    nvtx::Range range("dp.loss", nvtx::Category::DP);
    loss = model_.loss(gathered, targets);
    loss.backward();  // the gradient of the gathered outputs, on device 0
  }
  mark(5);
  {
    nvtx::Range range("dp.backward", nvtx::Category::DP);
    // Scatter the output gradient back: rows of replica r go to device r.
    const Tensor& dout = gathered.grad();
    const int64_t row_elems = dout.numel() / rows;
    std::vector<Tensor> douts(used);
    int64_t start = 0;
    for (size_t r = 0; r < used; ++r) {
      const Tensor& out = outputs[r].data();
      Tensor src = dout.flat_view(start * row_elems, out.shape());
      start += sizes[r];
      douts[r] = Tensor::empty(out.shape(), out.dtype(), devices_[r]);
      ops::copy(src, douts[r]);
    }
    fork_replicas(used);
    pool_->run(used, [&](size_t r) {
      nvtx::Range dev_range("dp.backward.replica " + std::to_string(r), nvtx::Category::Backward);
      busy[r][2].record(*compute_streams_[r]);
      host_ns[r][2] = now_ns();
      outputs[r].backward(douts[r]);
      host_ns[r][3] = now_ns();
      busy[r][3].record(*compute_streams_[r]);
    });
    join_replicas(used);
  }
  mark(6);
  {
    stats.reduce_bytes = param_bytes * static_cast<int64_t>(used - 1);
    nvtx::Range range("dp.reduce", nvtx::Category::DP, stats.reduce_bytes);
    reduce_add(used);
  }
  mark(7);
  optimizer.step();
  mark(8);

  stats.loss = loss.data().item();  // synchronises device 0
  for (auto& e : marks) e.synchronize();
  for (size_t p = 0; p < kNumPhases; ++p) stats.phase_ms[p] = marks[p].elapsed_ms(marks[p + 1]);
  stats.step_ms = marks[0].elapsed_ms(marks[kNumPhases]);
  stats.devices.resize(devices_.size());
  for (size_t r = 0; r < used; ++r) {
    auto& d = stats.devices[r];
    d.busy_ms = busy[r][0].elapsed_ms(busy[r][1]) + busy[r][2].elapsed_ms(busy[r][3]);
    d.idle_ms = std::max(0.0, stats.step_ms - d.busy_ms);
    d.rows = sizes[r];
    d.forward_start_ns = host_ns[r][0];
    d.forward_end_ns = host_ns[r][1];
    d.backward_start_ns = host_ns[r][2];
    d.backward_end_ns = host_ns[r][3];
  }
  for (size_t r = used; r < devices_.size(); ++r) stats.devices[r].idle_ms = stats.step_ms;
  return stats;
}

}  // namespace ddpb::dp
