// DataParallel's data-movement primitives (impl_dp) on two logical CPU devices, cpu:0 and
// cpu:1, at the sizes of the CPU workloads, each called exactly as DataParallel::step calls
// it (impl_dp/data_parallel.cpp; replicate and reduce_add are the same functions,
// dp::broadcast_coalesced and dp::reduce_add_coalesced):
//
//   dp/scatter/<workload>.x          the host batch split along dim 0 (torch.chunk) and
//                                    copied to each device on its own side stream (an
//                                    executor thread), then waited for;
//   dp/gather/<workload>.logits      the replicas' outputs concatenated on cpu:0;
//   dp/replicate/<workload>          parameters broadcast from cpu:0, coalesced into flat
//                                    chunks of at most 10 MiB (--dp-broadcast-mb's default):
//                                    flatten, Transport::broadcast, unflatten per chunk;
//   dp/reduce_add/<workload>         replica gradients summed into cpu:0's, coalesced the
//                                    same way: flatten on each device, Transport::reduce_add,
//                                    unflatten into cpu:0's gradients.
//
// Shapes come from the family table (workloads/families.cpp) at the default global batch (64
// samples, 8 sequences for gpt): mlp-small x [64, 1024] f32 and logits [64, 10]; gpt-tiny
// tokens [8, 64] i32 and logits [512, 512]; embed ids [64, 16] i32 and logits [64, 16].
// Parameters are the real models' (make_model): mlp-small 3.2M, gpt-tiny 0.5M, embed 16.8M.
//
// Counter bytes_per_second: the bytes DataParallel's step statistics count for the
// primitive (scatter: the batch; gather: the gathered output; replicate and reduce_add:
// parameter bytes x (devices - 1)), per second of wall-clock time (UseRealTime: the scatter
// copies run on executor threads, which the benchmark thread's CPU time would not see).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/scatter_gather.h"
#include "impl_dp/transport.h"
#include "workloads/family.h"
#include "workloads/model.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Shape;
using ddpb::Tensor;

const std::vector<Device> kDevices = {Device::cpu(0), Device::cpu(1)};
constexpr size_t kBroadcastBytes = size_t{10} << 20;  // DpOptions::broadcast_bytes

// A batch-shaped tensor of one workload: its input (x) or its output (logits).
struct BatchTensor {
  std::string name;  // "mlp-small.x"
  Shape shape;
  DType dtype;
};

std::vector<BatchTensor> batch_tensors(const std::string& workload) {
  const ddpb::WorkloadSpec& s = ddpb::find_workload(workload);
  const int64_t b = ddpb::default_global_batch(workload);
  const ddpb::BatchShapes shapes = ddpb::family_of(s).batch_shapes(s, b);
  return {{workload + ".x", shapes.input, shapes.input_dtype},
          {workload + ".logits", shapes.logits, DType::F32}};
}

Tensor filled(const Shape& shape, DType dtype, const Device& device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  if (dtype == DType::F32) {
    ddpb::ops::fill(t, 1.0f);
  } else {
    ddpb::ops::zero(t);  // token ids 0: valid for every workload
  }
  return t;
}

void bm_scatter(benchmark::State& state, const BatchTensor& bt) {
  try {
    ddpb::DeviceGuard guard(kDevices[0]);
    const Tensor batch = filled(bt.shape, bt.dtype, kDevices[0]);
    std::vector<ddpb::StreamPtr> side;
    for (size_t r = 0; r < kDevices.size(); ++r) {
      side.push_back(ddpb::make_stream(kDevices[r], "dp-h2d-" + std::to_string(r),
                                       ddpb::StreamKind::Executor));
    }
    const auto sizes = ddpb::dp::chunk_sizes(batch.size(0), int64_t(kDevices.size()));
    for (auto _ : state) {
      ddpb::dp::Scattered parts = ddpb::dp::scatter(batch, sizes, kDevices, side);
      for (const ddpb::Event& e : parts.ready) e.synchronize();
      benchmark::DoNotOptimize(parts.parts.back().raw_data());
    }
    state.SetBytesProcessed(state.iterations() * int64_t(batch.nbytes()));
    state.counters["bytes"] = double(batch.nbytes());
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("dp::scatter failed: ") + e.what()).c_str());
  }
}

void bm_gather(benchmark::State& state, const BatchTensor& bt) {
  try {
    ddpb::DeviceGuard guard(kDevices[0]);
    const auto sizes = ddpb::dp::chunk_sizes(bt.shape[0], int64_t(kDevices.size()));
    std::vector<Tensor> parts;
    for (size_t r = 0; r < sizes.size(); ++r) {
      Shape shape = bt.shape;
      shape[0] = sizes[r];
      parts.push_back(filled(shape, bt.dtype, kDevices[r]));
    }
    int64_t bytes = 0;
    for (auto _ : state) {
      Tensor out = ddpb::dp::gather(parts, kDevices[0]);
      bytes = int64_t(out.nbytes());
      benchmark::DoNotOptimize(out.raw_data());
    }
    state.SetBytesProcessed(state.iterations() * bytes);
    state.counters["bytes"] = double(bytes);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("dp::gather failed: ") + e.what()).c_str());
  }
}

// One workload's parameters on every device, as DataParallel's replicas hold them.
struct Replicas {
  std::vector<std::unique_ptr<ddpb::Model>> models;
  std::vector<std::vector<Tensor>> params;  // [device][parameter]
  std::vector<std::vector<Tensor>> grads;   // [device][parameter], like the replicas' .grad
  std::vector<std::vector<size_t>> groups;  // coalesced chunks over parameter indices
  int64_t param_bytes = 0;

  explicit Replicas(const std::string& workload) {
    const ddpb::WorkloadSpec& spec = ddpb::find_workload(workload);
    for (const Device& d : kDevices) {
      ddpb::DeviceGuard guard(d);
      models.push_back(ddpb::make_model(spec, d, /*seed=*/1));
      std::vector<Tensor> ps, gs;
      for (const auto& p : models.back()->named_parameters()) {
        ps.push_back(p.var.data());
        gs.push_back(filled(p.var.data().shape(), DType::F32, d));
      }
      params.push_back(std::move(ps));
      grads.push_back(std::move(gs));
    }
    for (const Tensor& p : params[0]) param_bytes += int64_t(p.nbytes());
    groups = ddpb::dp::coalesce_groups(params[0], kBroadcastBytes);
  }
};

void set_replica_counters(benchmark::State& state, const Replicas& r) {
  const int64_t moved = r.param_bytes * int64_t(kDevices.size() - 1);
  state.SetBytesProcessed(state.iterations() * moved);
  state.counters["bytes"] = double(moved);
  state.counters["chunks"] = double(r.groups.size());
}

// DataParallel::replicate.
void bm_replicate(benchmark::State& state, const std::string& workload) {
  try {
    ddpb::DeviceGuard guard(kDevices[0]);
    Replicas r(workload);
    auto transport = ddpb::dp::make_transport(kDevices);
    for (auto _ : state) {
      ddpb::dp::broadcast_coalesced(*transport, r.params, r.groups, kDevices.size());
      benchmark::ClobberMemory();
    }
    set_replica_counters(state, r);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("dp replicate failed: ") + e.what()).c_str());
  }
}

// DataParallel::reduce_add. The sums grow every iteration; the gradients start at 1, so
// they stay far from overflow (and from denormals) for any feasible iteration count.
void bm_reduce_add(benchmark::State& state, const std::string& workload) {
  try {
    ddpb::DeviceGuard guard(kDevices[0]);
    Replicas r(workload);
    auto transport = ddpb::dp::make_transport(kDevices);
    for (auto _ : state) {
      ddpb::dp::reduce_add_coalesced(*transport, r.grads, r.groups, kDevices.size());
      benchmark::ClobberMemory();
    }
    set_replica_counters(state, r);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("dp reduce_add failed: ") + e.what()).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Registered here, not statically, so nothing depends on static-initialisation order
  // (the presets table is itself a function-local static).
  const std::vector<std::string> workloads = {"mlp-small", "gpt-tiny", "embed"};
  for (const std::string& w : workloads) {
    const std::vector<BatchTensor> bts = batch_tensors(w);
    benchmark::RegisterBenchmark(("dp/scatter/" + bts[0].name).c_str(), bm_scatter, bts[0])
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("dp/gather/" + bts[1].name).c_str(), bm_gather, bts[1])
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const std::string& w : workloads) {
    benchmark::RegisterBenchmark(("dp/replicate/" + w).c_str(), bm_replicate, w)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("dp/reduce_add/" + w).c_str(), bm_reduce_add, w)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("devices", "cpu:0, cpu:1 (logical CPU devices, copy transport)");
  benchmark::AddCustomContext("coalescing", "10 MiB chunks (--dp-broadcast-mb default)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
