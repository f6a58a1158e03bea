// The DDP Reducer's per-bucket memory work, at bucket sizes of 1 MiB (--first-bucket-mb's
// default) and 25 MiB (--bucket-cap-mb's default), on cpu:0.
//
// The Reducer does this work in private members (Reducer::mark_variable_ready and launch in
// impl_ddp/reducer.cpp), which cannot be called without a backward
// pass and a process group. So these benchmarks make the same core/ops calls on the same
// kind of tensors (a flat f32 bucket and one view per gradient, made with flat_view as
// Reducer::build_buckets does); keep them in step with reducer.cpp:
//
//   ddp_bucket/flatten/bytes:N         ops::copy(grad, view) per gradient (the plain flatten;
//                                      the Reducer uses it when a gradient-as-bucket-view
//                                      gradient was replaced)
//   ddp_bucket/copy_scale/bytes:N      ops::scale_copy(grad, view, 1/world_size) per
//                                      gradient: the Reducer's copy-in (mark_variable_ready) of a
//                                      gradient that was not computed into its bucket slot,
//                                      divided by the world size (world size 2 here)
//   ddp_bucket/scale_in_place/bytes:N  ops::scale(view, 1/world_size) per gradient: what the
//                                      Reducer does for a gradient computed straight into its
//                                      slot (Note [Gradient destinations]) or kept as the view
//   ddp_bucket/unflatten/bytes:N       ops::copy(view, grad) per gradient: a copy-out of the
//                                      averaged gradients, which the Reducer no longer does
//                                      (it hands them over as the bucket views); kept as the
//                                      measure of what that saves
//   ddp_bucket/fp16_compress/bytes:N   ops::cast(bucket f32 -> f16): --comm-hook fp16 before
//                                      the allreduce (launch); bf16_compress likewise
//   ddp_bucket/fp16_decompress/bytes:N ops::cast(f16 -> bucket f32) after it
//                                      (finalize_backward); bf16_decompress likewise
//
// The gradients filling a bucket are those of mlp-small-like Linear layers: weight
// [R, 1024] and bias [R] with R = 1024, the last layer cut to fit and any remainder as one
// 1-D tensor, so that the bucket holds exactly N bytes (1 MiB: 3 tensors, 25 MiB: 15).
//
// Counter bytes_per_second: the bucket's f32 bytes per second (not the memory traffic,
// which is about twice that), so every row is comparable with the bucket size.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;

constexpr int kWorldSize = 2;
constexpr float kScale = 1.0f / kWorldSize;  // the Reducer's 1/world_size
constexpr int64_t kWidth = 1024;             // Linear in_features, as mlp-small's hidden layers

// One bucket: the flat buffer, a view per gradient, and the gradients themselves.
struct Bucket {
  Tensor buffer;
  std::vector<Tensor> views, grads;
  Tensor compressed;  // the comm hook's 16-bit copy of `buffer`
  bool flip = false;  // scale_in_place: the next scale is n instead of 1/n

  Bucket(int64_t bytes, DType half) {
    const Device dev = Device::cpu(0);
    int64_t left = bytes / 4;
    std::vector<ddpb::Shape> shapes;
    while (left > 0) {
      const int64_t rows = std::min(kWidth, left / (kWidth + 1));
      if (rows == 0) {
        shapes.push_back({left});
        break;
      }
      shapes.push_back({rows, kWidth});
      shapes.push_back({rows});
      left -= rows * (kWidth + 1);
    }
    buffer = Tensor::zeros({bytes / 4}, DType::F32, dev);
    int64_t offset = 0;
    for (const ddpb::Shape& s : shapes) {
      views.push_back(buffer.flat_view(offset, s));
      offset += ddpb::shape_numel(s);
      Tensor g = Tensor::empty(s, DType::F32, dev);
      ddpb::ops::fill(g, 0.5f);
      grads.push_back(g);
    }
    compressed = Tensor::empty({bytes / 4}, half, dev);
    ddpb::ops::fill(buffer, 0.25f);  // normal values: no denormal slow paths in the casts
    ddpb::ops::cast(buffer, compressed);
  }
};

using BucketOp = std::function<void(Bucket&)>;

void bm_bucket(benchmark::State& state, const BucketOp& op, DType half) {
  const int64_t bytes = state.range(0);
  try {
    ddpb::DeviceGuard guard(Device::cpu(0));
    Bucket b(bytes, half);
    for (auto _ : state) {
      op(b);
      benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * bytes);
    state.counters["tensors"] = double(b.grads.size());
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("bucket op failed: ") + e.what()).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<std::string, BucketOp>> f32_ops = {
      {"flatten",
       [](Bucket& b) {
         for (size_t i = 0; i < b.grads.size(); ++i) ddpb::ops::copy(b.grads[i], b.views[i]);
       }},
      {"copy_scale",
       [](Bucket& b) {
         for (size_t i = 0; i < b.grads.size(); ++i) {
           ddpb::ops::scale_copy(b.grads[i], b.views[i], kScale);
         }
       }},
      // Alternates 1/n and n so that the values stay bounded (never denormal); a multiply
      // costs the same whatever the factor.
      {"scale_in_place",
       [](Bucket& b) {
         const float s = b.flip ? 1.0f / kScale : kScale;
         b.flip = !b.flip;
         for (const Tensor& v : b.views) ddpb::ops::scale(v, s);
       }},
      {"unflatten",
       [](Bucket& b) {
         for (size_t i = 0; i < b.grads.size(); ++i) ddpb::ops::copy(b.views[i], b.grads[i]);
       }},
  };
  const std::vector<std::pair<std::string, BucketOp>> cast_ops = {
      {"compress", [](Bucket& b) { ddpb::ops::cast(b.buffer, b.compressed); }},
      {"decompress", [](Bucket& b) { ddpb::ops::cast(b.compressed, b.buffer); }},
  };
  const std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{25} << 20};
  // Registered here, not statically, so nothing depends on static-initialisation order.
  for (const auto& [name, op] : f32_ops) {
    benchmark::RegisterBenchmark(("ddp_bucket/" + name).c_str(), bm_bucket, op, DType::F16)
        ->ArgName("bytes")
        ->ArgsProduct({sizes})
        ->Unit(benchmark::kMicrosecond);
  }
  for (auto [prefix, half] : {std::pair{"fp16_", DType::F16}, std::pair{"bf16_", DType::BF16}}) {
    for (const auto& [name, op] : cast_ops) {
      benchmark::RegisterBenchmark(("ddp_bucket/" + std::string(prefix) + name).c_str(), bm_bucket,
                                   op, half)
          ->ArgName("bytes")
          ->ArgsProduct({sizes})
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("device", "cpu:0, one thread (the rank's training thread)");
  benchmark::AddCustomContext("world_size", std::to_string(kWorldSize) + " (the 1/n scale)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
