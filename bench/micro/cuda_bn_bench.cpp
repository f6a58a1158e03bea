// CUDA batch-norm micro-benchmark: batch normalisation as a training step runs it, at
// ResNet-50's shapes (64 images per GPU, torchvision's v1.5 layout), NCHW and NHWC, against
// the device's copy bandwidth.
//
// Per shape and layout, CUDA-event timed on one stream, median of --iters samples:
//   forward           fn::batch_norm in training mode, the step's forward: stats, gather_stats
//                     (running statistics updated), elemt, and the step's allocations
//   backward          its BatchNormBackward node's apply(dy), the step's backward:
//                     backward_reduce, the weight and bias gradients, backward_elemt
// and the four ops inside them on their own (forward and backward are their sums, plus
// gather_stats, two small copies and the host work of the ops and the autograd node):
//   stats             ops::batch_norm_stats (two reads of x: the mean, then the variance)
//   elemt             ops::batch_norm_elemt (read x, write y; Note [Batch-norm element-wise
//                     kernels], core/cuda/cuda_norm_pool.cu)
//   backward_reduce   ops::batch_norm_backward_reduce (read dy and x)
//   backward_elemt    ops::batch_norm_backward_elemt (read dy and x, write dx)
//   copy              cudaMemcpyAsync of x, device to device (read and write): the yardstick
// GB/s counts the bytes each must move at least (forward 4 passes over x's size, backward
// 5); "of copy" is that over the copy's GB/s. A per-channel reduction far below the copy
// means idle SMs or uncoalesced loads (Note [Batch-norm channel reductions]).
//
// Output: a table on stdout; --json FILE writes the same rows. Exit codes: 0 success; 1 no
// CUDA device or a runtime error; 2 bad flag.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure/stats.h"
#include "core/autograd.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"
#include "core/functional.h"
#include "core/ops.h"
#include "core/system_info.h"
#include "core/tensor.h"
#include "reports/json_io.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;
using ddpb::ops::ImageLayout;

// Every distinct batch-norm input of ResNet-50 at 64 images: channels and side.
struct BnShape {
  int64_t c, side;
};
constexpr BnShape kResnet50Shapes[] = {{64, 112},  {64, 56},  {256, 56}, {128, 56},
                                       {128, 28},  {512, 28}, {256, 28}, {256, 14},
                                       {1024, 14}, {512, 14}, {512, 7},  {2048, 7}};
constexpr int64_t kImages = 64;

struct Options {
  std::string json;
  int iters = 10;
  int warmup = 3;
};

[[noreturn]] void usage(const std::string& why, int code = 2) {
  std::fprintf(code == 0 ? stdout : stderr,
               "cuda_bn_bench: %s\nusage: cuda_bn_bench [--json FILE] [--iters N] [--warmup N]\n",
               why.c_str());
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto count = [&]() {
      if (i + 1 >= argc) usage(a + " needs a value");
      const std::string v = argv[++i];
      try {
        size_t used = 0;
        const int n = std::stoi(v, &used);
        if (used == v.size() && n >= 0) return n;
      } catch (const std::exception&) {
      }
      usage(a + " expects a whole number, got '" + v + "'");
    };
    if (a == "--json") {
      if (i + 1 >= argc) usage("--json needs a file");
      o.json = argv[++i];
    } else if (a == "--iters") {
      o.iters = count();
    } else if (a == "--warmup") {
      o.warmup = count();
    } else if (a == "--help" || a == "-h") {
      usage("CUDA batch-norm micro-benchmark (see bench/micro/cuda_bn_bench.cpp)", 0);
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (o.iters < 1) usage("--iters must be >= 1");
  return o;
}

// Median milliseconds of `fn` over `iters` event-timed calls after `warmup` untimed ones.
double time_ms(cudaStream_t stream, const Options& opt, const std::function<void()>& fn) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < opt.warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < opt.iters; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return ddpb::bench::summarize(samples).median;
}

Tensor filled(const ddpb::Shape& shape, const Device& device, uint64_t seed, float lo, float hi) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = lo + (hi - lo) * static_cast<float>((x >> 40) * (1.0 / 16777216.0));
  }
  return Tensor::from_floats(v, shape, device);
}

// The step's batch norm of x (fn::batch_norm, training mode), for the forward and backward rows.
struct StepBatchNorm {
  ddpb::autograd::Var x, weight, bias;
  ddpb::fn::BatchNormBuffers buffers;
  ddpb::fn::BatchNormOptions options;
  StepBatchNorm(const Tensor& xt, const Tensor& w, const Tensor& b)
      : x(xt, true), weight(w, true), bias(b, true) {
    const Device& d = xt.device();
    const int64_t c = w.numel();
    buffers = {Tensor::zeros({c}, DType::F32, d),
               Tensor::from_floats(std::vector<float>(static_cast<size_t>(c), 1.0f), {c}, d),
               Tensor::zeros({}, DType::I64, d)};
  }
  ddpb::autograd::Var forward() const {
    return ddpb::fn::batch_norm(x, weight, bias, buffers, options);
  }
};

// One shape in one layout: the step's forward and backward, the four ops and the copy.
nlohmann::json measure(const BnShape& s, ImageLayout layout, const Device& device,
                       cudaStream_t stream, const Options& opt) {
  const bool nhwc = layout == ImageLayout::NHWC;
  const ddpb::Shape shape =
      nhwc ? ddpb::Shape{kImages, s.side, s.side, s.c} : ddpb::Shape{kImages, s.c, s.side, s.side};
  const Tensor x = filled(shape, device, 1, 1.0f, 5.0f), dy = filled(shape, device, 2, -1.0f, 1.0f);
  const Tensor y = Tensor::empty(shape, DType::F32, device),
               dx = Tensor::empty(shape, DType::F32, device);
  const Tensor w = filled({s.c}, device, 3, 0.5f, 1.5f), b = filled({s.c}, device, 4, -1.0f, 1.0f);
  const Tensor stats = Tensor::empty({2 * s.c + 1}, DType::F32, device);
  const Tensor mean = stats.flat_view(0, {s.c}), var = stats.flat_view(s.c, {s.c});
  const Tensor count = stats.flat_view(2 * s.c, {1}),
               sums = Tensor::empty({2 * s.c}, DType::F32, device);
  ddpb::ops::batch_norm_stats(x, stats, layout);  // var stands in for invstd: only speed counts
  const double numel = static_cast<double>(x.numel()), bytes = numel * sizeof(float);
  struct Kernel {
    const char* name;
    double bytes_moved;
    std::function<void()> run;
  };
  ddpb::ops::set_image_layout(layout);  // fn::batch_norm takes the run's layout
  const StepBatchNorm step(x, w, b);
  const ddpb::autograd::Var out = step.forward();  // its node is the backward to time
  const std::vector<Kernel> kernels = {
      {"forward", 4 * bytes, [&] { step.forward(); }},
      {"backward", 5 * bytes, [&] { out.grad_fn()->apply(dy); }},
      {"stats", 2 * bytes, [&] { ddpb::ops::batch_norm_stats(x, stats, layout); }},
      {"elemt", 2 * bytes, [&] { ddpb::ops::batch_norm_elemt(x, mean, var, w, b, y, layout); }},
      {"backward_reduce", 2 * bytes,
       [&] { ddpb::ops::batch_norm_backward_reduce(dy, x, mean, var, sums, layout); }},
      {"backward_elemt", 3 * bytes,
       [&] { ddpb::ops::batch_norm_backward_elemt(dy, x, mean, var, w, sums, count, dx, layout); }},
  };
  const double copy_ms = time_ms(stream, opt, [&] {
    CUDA_CHECK(cudaMemcpyAsync(y.data<float>(), x.data<float>(), static_cast<size_t>(bytes),
                               cudaMemcpyDeviceToDevice, stream));
  });
  const double copy_gbs = 2 * bytes / (copy_ms * 1e6);
  nlohmann::json row = {{"channels", s.c},    {"side", s.side},
                        {"images", kImages},  {"layout", nhwc ? "nhwc" : "nchw"},
                        {"copy_ms", copy_ms}, {"copy_gb_per_s", copy_gbs}};
  for (const Kernel& k : kernels) {
    const double ms = time_ms(stream, opt, k.run);
    const double gbs = k.bytes_moved / (ms * 1e6);
    row[k.name] = {{"ms", ms}, {"gb_per_s", gbs}, {"of_copy", gbs / copy_gbs}};
  }
  return row;
}

void print_rows(const nlohmann::json& rows) {
  std::printf(
      "batch norm at resnet50's shapes, %lld images: median ms (GB/s as a fraction of "
      "the copy's)\n",
      static_cast<long long>(kImages));
  std::printf("%-5s %5s %4s %9s  %-16s %-16s %-16s %-16s %-16s %-16s\n", "", "C", "HW", "copy GB/s",
              "forward", "backward", "stats", "elemt", "backward_reduce", "backward_elemt");
  for (const auto& r : rows) {
    std::printf("%-5s %5lld %4lld %9.0f ", r["layout"].get<std::string>().c_str(),
                static_cast<long long>(r["channels"].get<int64_t>()),
                static_cast<long long>(r["side"].get<int64_t>()), r["copy_gb_per_s"].get<double>());
    for (const char* k :
         {"forward", "backward", "stats", "elemt", "backward_reduce", "backward_elemt"}) {
      std::printf(" %7.3f (%4.2f) ", r[k]["ms"].get<double>(), r[k]["of_copy"].get<double>());
    }
    std::printf("\n");
  }
}

int run(const Options& opt) {
  if (ddpb::cuda_device_count() == 0) {
    const std::string reason = ddpb::gpu::unavailable_reason();
    std::fprintf(stderr, "cuda_bn_bench: no CUDA device (%s)\n",
                 reason.empty() ? "cuda_device_count() returned 0" : reason.c_str());
    return 1;
  }
  const Device device = Device::cuda(0);
  ddpb::DeviceGuard guard(device);
  const cudaStream_t stream = ddpb::gpu::current_stream_handle(device);
  nlohmann::json rows = nlohmann::json::array();
  for (const BnShape& s : kResnet50Shapes) {
    for (const ImageLayout layout : {ImageLayout::NCHW, ImageLayout::NHWC}) {
      rows.push_back(measure(s, layout, device, stream, opt));
    }
  }
  print_rows(rows);
  if (!opt.json.empty()) {
    const nlohmann::json record = {
        {"schema_version", 1},
        {"kind", "cuda_bn_bench"},
        {"context", {{"date", ddpb::utc_timestamp()}, {"host", ddpb::host_name()}}},
        {"config", {{"iters", opt.iters}, {"warmup", opt.warmup}}},
        {"rows", rows}};
    ddpb::reports::write_json_atomic(opt.json, record);
    std::printf("wrote %s\n", opt.json.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bn_bench: failed: %s\n", e.what());
    return 1;
  }
}
