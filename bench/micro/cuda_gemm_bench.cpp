// CUDA GEMM micro-benchmark: ddpbench's GEMM path (ddpb::ops::gemm on cuBLASLt) against
// plain cuBLAS, on the training GEMMs of gpt2-small (batch 8 x seq 1024) and mlp-wide
// (batch 64), in fp32, tf32 and bf16 math.
//
// A Linear layer y = act(x W^T + b), x [M, in], W [out, in], runs three GEMMs per training
// step (core/functional.cpp, fn::linear and LinearBackward):
//   fwd  y  = x  W^T (+ bias, + fused ReLU in the MLP)   M=M,   N=out, K=in    (B transposed)
//   dx   dx = dz W                                        M=M,   N=in,  K=out
//   dw   dW = dz^T x                                      M=out, N=in,  K=M     (A transposed)
// `calls` is how often one training step runs a shape (gpt2-small: 12 blocks; the tied LM
// head has no bias; mlp-wide's first layer has no dx), so the summary can weight shapes into
// the GEMM time of a whole step. Attention's batched GEMMs are not included. The list is
// workloads/training_gemms.h's, shared with the CPU benchmark and the suite's GEMM peak.
//
// Two implementations per shape and math mode, on the same buffers and the same stream:
//   ddpbench  ddpb::ops::gemm exactly as training calls it: dispatch, shape checks, the
//             cuBLASLt heuristic (cached after the first call) and the bias/ReLU epilogue
//             (--no-epilogue drops it);
//   cublas    cublasSgemm (fp32) or cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (tf32) or
//             CUBLAS_COMPUTE_32F_FAST_16BF (bf16), beta = 0, no epilogue: the library's own
//             choice for the plain product.
// Timing: CUDA events on the stream around `reps` back-to-back calls (reps chosen so that a
// sample lasts >= --min-sample-ms; host overhead that the GPU cannot hide is included),
// --warmup untimed calls first, then --iters samples per implementation, interleaved so
// that clock drift hits both alike; the median sample is reported. TFLOP/s = 2 M N K / time.
// Before timing, each shape checks ddpbench (no epilogue) against cuBLAS on device:
// max |ddpb - cublas| / max |cublas| must stay below 1e-4 (fp32) or 1e-2 (tf32, bf16).
//
// Output: a table on stdout; --json FILE writes the same rows (one record, two renderings).
// Exit codes: 0 success; 1 no CUDA device, a failed check or a runtime error; 2 bad flag.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure/stats.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"
#include "core/ops.h"
#include "core/system_info.h"
#include "core/tensor.h"
#include "reports/json_io.h"
#include "workloads/training_gemms.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;
using ddpb::ops::Activation;
using ddpb::ops::MathMode;

constexpr int kSchemaVersion = 1;

// A GEMM of a training step (workloads/training_gemms.h), named "<layer>.<pass>".
struct GemmShape : ddpb::TrainingGemm {
  std::string name;
};

std::vector<GemmShape> all_shapes() {
  std::vector<GemmShape> out;
  // gpt2-small at batch 8 x seq 1024; mlp-wide at batch 64 (ReLU fused into hidden layers).
  for (const auto& [workload, batch] : {std::pair{"gpt2-small", 8}, std::pair{"mlp-wide", 64}}) {
    for (const ddpb::TrainingGemm& g : ddpb::training_gemms(ddpb::find_workload(workload), batch))
      out.push_back({g, g.layer + "." + g.pass});
  }
  return out;
}

struct Options {
  std::string json;
  std::string filter;  // substring of "workload/name"
  int iters = 20;
  int warmup = 5;
  double min_sample_ms = 1.0;
  bool epilogue = true;
  bool check = true;
  std::vector<MathMode> modes = {MathMode::FP32, MathMode::TF32, MathMode::BF16};
};

const char* mode_name(MathMode m) {
  switch (m) {
    case MathMode::TF32:
      return "tf32";
    case MathMode::BF16:
      return "bf16";
    case MathMode::FP32:
      break;
  }
  return "fp32";
}

const char* act_name(Activation a) {
  switch (a) {
    case Activation::ReLU:
      return "relu";
    case Activation::GeLU:
      return "gelu";
    case Activation::None:
      break;
  }
  return "none";
}

std::string epilogue_name(const GemmShape& s, bool enabled) {
  if (!enabled || (!s.bias && s.act == Activation::None)) return "-";
  std::string e = s.bias ? "bias" : "";
  if (s.act != Activation::None) e += std::string(e.empty() ? "" : "+") + act_name(s.act);
  return e;
}

[[noreturn]] void usage(const std::string& why, int code = 2) {
  std::fprintf(code == 0 ? stdout : stderr,
               "cuda_gemm_bench: %s\n"
               "usage: cuda_gemm_bench [--json FILE] [--iters N] [--warmup N] [--min-sample-ms X]\n"
               "                       [--filter SUBSTR] [--modes fp32,tf32,bf16] [--no-epilogue]\n"
               "                       [--no-check]\n",
               why.c_str());
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      try {
        return std::stod(v);
      } catch (const std::exception&) {
        usage(a + " expects a number, got '" + v + "'");
      }
    };
    if (a == "--json") {
      o.json = value();
    } else if (a == "--filter") {
      o.filter = value();
    } else if (a == "--iters") {
      o.iters = static_cast<int>(number(value()));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(number(value()));
    } else if (a == "--min-sample-ms") {
      o.min_sample_ms = number(value());
    } else if (a == "--no-epilogue") {
      o.epilogue = false;
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "--modes") {
      o.modes.clear();
      std::string v = value();
      for (size_t start = 0; start <= v.size();) {
        size_t end = v.find(',', start);
        if (end == std::string::npos) end = v.size();
        const std::string m = v.substr(start, end - start);
        if (m == "fp32") {
          o.modes.push_back(MathMode::FP32);
        } else if (m == "tf32") {
          o.modes.push_back(MathMode::TF32);
        } else if (m == "bf16") {
          o.modes.push_back(MathMode::BF16);
        } else {
          usage("--modes takes fp32, tf32 and/or bf16, got '" + m + "'");
        }
        start = end + 1;
      }
    } else if (a == "--help" || a == "-h") {
      usage("CUDA GEMM micro-benchmark (see the header of bench/micro/cuda_gemm_bench.cpp)", 0);
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (o.iters < 1 || o.warmup < 0 || o.min_sample_ms <= 0) {
    usage("--iters must be >= 1, --warmup >= 0, --min-sample-ms > 0");
  }
  return o;
}

// ---- Device buffers ----------------------------------------------------------------------

// Fills `t` with uniform [-1, 1) values: a 4 Mi-element random block generated once on the
// host, tiled on the device (the data only has to look random to the tensor cores; a full
// host fill of the 1.6 GB LM-head gradient would dominate the run).
class RandomFill {
 public:
  explicit RandomFill(const Device& device) {
    std::vector<float> v(kBlock);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& f : v) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      f = static_cast<float>((x >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    block_ = Tensor::from_floats(v, {kBlock}, device);
  }
  void operator()(const Tensor& t, int64_t phase) const {
    const int64_t n = t.numel();
    int64_t done = 0;
    int64_t offset = (phase * 1000003) % kBlock;  // a different start per tensor
    cudaStream_t stream = ddpb::gpu::current_stream_handle(t.device());
    while (done < n) {
      const int64_t len = std::min(n - done, kBlock - offset);
      CUDA_CHECK(cudaMemcpyAsync(t.data<float>() + done, block_.data<float>() + offset,
                                 static_cast<size_t>(len) * sizeof(float), cudaMemcpyDeviceToDevice,
                                 stream))
          << "tiling random data";
      done += len;
      offset = 0;
    }
  }

 private:
  static constexpr int64_t kBlock = int64_t{1} << 22;
  Tensor block_;
};

struct Operands {
  Tensor a, b, c, c_ref, bias;
};

Operands make_operands(const GemmShape& s, const Device& device, const RandomFill& fill) {
  Operands o;
  o.a =
      Tensor::empty(s.trans_a ? ddpb::Shape{s.k, s.m} : ddpb::Shape{s.m, s.k}, DType::F32, device);
  o.b =
      Tensor::empty(s.trans_b ? ddpb::Shape{s.n, s.k} : ddpb::Shape{s.k, s.n}, DType::F32, device);
  o.c = Tensor::empty({s.m, s.n}, DType::F32, device);
  o.c_ref = Tensor::empty({s.m, s.n}, DType::F32, device);
  fill(o.a, 1);
  fill(o.b, 2);
  if (s.bias) {
    o.bias = Tensor::empty({s.n}, DType::F32, device);
    fill(o.bias, 3);
  }
  return o;
}

// ---- The two implementations -------------------------------------------------------------

void run_ddpbench(const GemmShape& s, const Operands& o, bool epilogue, bool activation = true) {
  ddpb::ops::gemm(o.a, s.trans_a, o.b, s.trans_b, o.c, 1.0f, 0.0f,
                  epilogue && s.bias ? o.bias : Tensor(),
                  epilogue && activation ? s.act : Activation::None);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's A is our b.
void run_cublas(cublasHandle_t handle, const GemmShape& s, const Operands& o, MathMode mode,
                const Tensor& out) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int n = static_cast<int>(s.n), m = static_cast<int>(s.m), k = static_cast<int>(s.k);
  const int ldb = static_cast<int>(s.trans_b ? s.k : s.n);
  const int lda = static_cast<int>(s.trans_a ? s.m : s.k);
  if (mode == MathMode::FP32) {
    CUBLAS_CHECK(cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, o.b.data<float>(), ldb,
                             o.a.data<float>(), lda, &beta, out.data<float>(), n))
        << s.workload << "/" << s.name;
  } else {
    const cublasComputeType_t compute =
        mode == MathMode::BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_TF32;
    CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, o.b.data<float>(), CUDA_R_32F,
                              ldb, o.a.data<float>(), CUDA_R_32F, lda, &beta, out.data<float>(),
                              CUDA_R_32F, n, compute, CUBLAS_GEMM_DEFAULT))
        << s.workload << "/" << s.name;
  }
}

// max |got - ref| / max |ref|, on the device (cuBLAS axpy and amax on `stream`, the handle's
// stream). Overwrites `got`.
double max_rel_diff(cublasHandle_t handle, cudaStream_t stream, const Tensor& got,
                    const Tensor& ref) {
  const int n = static_cast<int>(got.numel());
  auto abs_max = [&](const Tensor& t) {
    int index = 0;  // 1-based; a host result, so the call has finished on return
    CUBLAS_CHECK(cublasIsamax(handle, n, t.data<float>(), 1, &index)) << "amax";
    float value = 0.0f;
    // On the stream, not the legacy default stream, which need not order with it.
    CUDA_CHECK(cudaMemcpyAsync(&value, t.data<float>() + (index - 1), sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return std::fabs(static_cast<double>(value));
  };
  const double scale = abs_max(ref);
  const float minus_one = -1.0f;
  CUBLAS_CHECK(cublasSaxpy(handle, n, &minus_one, ref.data<float>(), 1, got.data<float>(), 1));
  const double diff = abs_max(got);
  return scale > 0 ? diff / scale : diff;
}

// ---- Timing ------------------------------------------------------------------------------

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    CUDA_CHECK_NOTHROW(cudaEventDestroy(start_));
    CUDA_CHECK_NOTHROW(cudaEventDestroy(stop_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Milliseconds per call of `fn` over `reps` back-to-back calls.
  template <typename Fn>
  double time_ms(int reps, Fn&& fn) {
    CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int r = 0; r < reps; ++r) fn();
    CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) / reps;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

struct Row {
  GemmShape shape;
  MathMode mode;
  std::string epilogue;
  double ddpb_ms = 0, cublas_ms = 0;
  // The same GEMM without its activation (bias only), for shapes that have one: the
  // difference is the separate NaN-keeping activation pass (Note [GEMM epilogues keep NaN]).
  double bias_only_ms = -1;  // -1: the shape has no activation, or --no-epilogue
  double max_rel_diff = -1;  // -1: not checked
  bool check_ok = true;
  int reps = 1;

  double flops() const { return 2.0 * shape.m * shape.n * shape.k; }
  double ddpb_tflops() const { return flops() / (ddpb_ms * 1e-3) / 1e12; }
  double cublas_tflops() const { return flops() / (cublas_ms * 1e-3) / 1e12; }
  double ratio() const { return cublas_ms / ddpb_ms; }  // throughput ratio ddpbench / cublas

  nlohmann::json to_json() const {
    return {{"workload", shape.workload},
            {"gemm", shape.name},
            {"math", mode_name(mode)},
            {"m", shape.m},
            {"n", shape.n},
            {"k", shape.k},
            {"trans_a", shape.trans_a},
            {"trans_b", shape.trans_b},
            {"epilogue", epilogue},
            {"calls_per_step", shape.calls},
            {"reps_per_sample", reps},
            {"ddpbench_ms", ddpb_ms},
            {"cublas_ms", cublas_ms},
            {"ddpbench_tflops", ddpb_tflops()},
            {"cublas_tflops", cublas_tflops()},
            {"ratio", ratio()},
            {"bias_only_ms", bias_only_ms},
            {"activation_pass_ms", bias_only_ms >= 0 ? ddpb_ms - bias_only_ms : -1.0},
            {"max_rel_diff", max_rel_diff},
            {"check_ok", check_ok}};
  }
};

Row measure(const GemmShape& s, MathMode mode, const Options& opt, cublasHandle_t handle,
            cudaStream_t stream, const Operands& o) {
  ddpb::ops::set_math_mode(mode);
  Row row{s, mode, epilogue_name(s, opt.epilogue)};
  if (opt.check) {
    run_ddpbench(s, o, /*epilogue=*/false);
    run_cublas(handle, s, o, mode, o.c_ref);
    row.max_rel_diff = max_rel_diff(handle, stream, o.c, o.c_ref);
    row.check_ok = row.max_rel_diff <= (mode == MathMode::FP32 ? 1e-4 : 1e-2);
  }
  EventTimer timer(stream);
  auto ours = [&] { run_ddpbench(s, o, opt.epilogue); };
  auto theirs = [&] { run_cublas(handle, s, o, mode, o.c_ref); };
  for (int i = 0; i < opt.warmup; ++i) {
    ours();
    theirs();
  }
  // One timed call each sizes the samples.
  const double probe = std::min(timer.time_ms(1, ours), timer.time_ms(1, theirs));
  row.reps = static_cast<int>(
      std::clamp(std::ceil(opt.min_sample_ms / std::max(probe, 1e-4)), 1.0, 1000.0));
  const bool has_act = opt.epilogue && s.act != Activation::None;
  auto bias_only = [&] { run_ddpbench(s, o, opt.epilogue, /*activation=*/false); };
  std::vector<double> a, b, c;
  for (int i = 0; i < opt.iters; ++i) {
    a.push_back(timer.time_ms(row.reps, ours));
    b.push_back(timer.time_ms(row.reps, theirs));
    if (has_act) c.push_back(timer.time_ms(row.reps, bias_only));
  }
  row.ddpb_ms = ddpb::bench::summarize(a).median;
  row.cublas_ms = ddpb::bench::summarize(b).median;
  if (has_act) row.bias_only_ms = ddpb::bench::summarize(c).median;
  return row;
}

// ---- Report ------------------------------------------------------------------------------

nlohmann::json context_json(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int cublas_version = 0;
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasGetVersion(h, &cublas_version));
  CUBLAS_CHECK(cublasDestroy(h));
  return {{"date", ddpb::utc_timestamp()},
          {"host", ddpb::host_name()},
          {"device", prop.name},
          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"sm_count", prop.multiProcessorCount},
          {"cuda_driver", driver},
          {"cuda_runtime", runtime},
          {"cublas", cublas_version},
          {"compiler", __VERSION__}};
}

// Per workload and math mode: the GEMM time of one training step (sum of calls x time).
nlohmann::json step_summary(const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::pair<std::string, MathMode>> keys;
  for (const auto& r : rows) {
    auto key = std::make_pair(r.shape.workload, r.mode);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  for (const auto& [workload, mode] : keys) {
    double ours = 0, theirs = 0, flops = 0;
    for (const auto& r : rows) {
      if (r.shape.workload != workload || r.mode != mode) continue;
      ours += r.shape.calls * r.ddpb_ms;
      theirs += r.shape.calls * r.cublas_ms;
      flops += r.shape.calls * r.flops();
    }
    out.push_back({{"workload", workload},
                   {"math", mode_name(mode)},
                   {"ddpbench_ms", ours},
                   {"cublas_ms", theirs},
                   {"ddpbench_tflops", flops / (ours * 1e-3) / 1e12},
                   {"cublas_tflops", flops / (theirs * 1e-3) / 1e12},
                   {"ratio", theirs / ours}});
  }
  return out;
}

void print_table(const nlohmann::json& record) {
  const auto& ctx = record["context"];
  std::printf("cuda_gemm_bench on %s (sm_%s), CUDA runtime %d, cuBLAS %d; median of %d samples\n",
              ctx["device"].get<std::string>().c_str(),
              ctx["compute_capability"].get<std::string>().c_str(), ctx["cuda_runtime"].get<int>(),
              ctx["cublas"].get<int>(), record["config"]["iters"].get<int>());
  std::printf("ratio = ddpbench / cublas throughput (1.0 = parity); TFLOP/s = 2MNK / time\n");
  std::printf(
      "act pass = ddpbench time minus the same GEMM with its bias only (the separate\n"
      "NaN-keeping activation kernel)\n");
  std::printf("%-10s %-12s %-4s %6s %6s %6s %5s %-9s %9s %9s %6s %9s %9s\n", "workload", "gemm",
              "math", "M", "N", "K", "calls", "epilogue", "ddpb TF/s", "cuBLAS", "ratio", "max rel",
              "act pass");
  for (const auto& r : record["rows"]) {
    const double diff = r["max_rel_diff"].get<double>();
    char diff_text[32];
    if (diff < 0) {
      std::snprintf(diff_text, sizeof(diff_text), "-");
    } else {
      std::snprintf(diff_text, sizeof(diff_text), "%.1e%s", diff,
                    r["check_ok"].get<bool>() ? "" : "!");
    }
    const double act_ms = r["activation_pass_ms"].get<double>();
    char act_text[32];
    if (act_ms < 0) {
      std::snprintf(act_text, sizeof(act_text), "-");
    } else {
      std::snprintf(act_text, sizeof(act_text), "%.3f ms", act_ms);
    }
    std::printf("%-10s %-12s %-4s %6ld %6ld %6ld %5d %-9s %9.2f %9.2f %6.3f %9s %9s\n",
                r["workload"].get<std::string>().c_str(), r["gemm"].get<std::string>().c_str(),
                r["math"].get<std::string>().c_str(), static_cast<long>(r["m"].get<int64_t>()),
                static_cast<long>(r["n"].get<int64_t>()), static_cast<long>(r["k"].get<int64_t>()),
                r["calls_per_step"].get<int>(), r["epilogue"].get<std::string>().c_str(),
                r["ddpbench_tflops"].get<double>(), r["cublas_tflops"].get<double>(),
                r["ratio"].get<double>(), diff_text, act_text);
  }
  std::printf("GEMM time of one training step (calls x median):\n");
  for (const auto& s : record["step_summary"]) {
    std::printf(
        "  %-10s %-4s ddpbench %8.3f ms (%6.2f TFLOP/s)  cublas %8.3f ms (%6.2f TFLOP/s)  ratio "
        "%.3f\n",
        s["workload"].get<std::string>().c_str(), s["math"].get<std::string>().c_str(),
        s["ddpbench_ms"].get<double>(), s["ddpbench_tflops"].get<double>(),
        s["cublas_ms"].get<double>(), s["cublas_tflops"].get<double>(), s["ratio"].get<double>());
  }
}

int run(const Options& opt) {
  if (ddpb::cuda_device_count() == 0) {
    std::string reason = ddpb::gpu::unavailable_reason();
    std::fprintf(stderr, "cuda_gemm_bench: no CUDA device (%s)\n",
                 reason.empty() ? "cuda_device_count() returned 0" : reason.c_str());
    return 1;
  }
  const Device device = Device::cuda(0);
  ddpb::DeviceGuard guard(device);
  const cudaStream_t stream = ddpb::gpu::current_stream_handle(device);
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle)) << "cuda:0";
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  // fp32 stays exact fp32 in cublasSgemm; tf32 is requested per call (cublasGemmEx).
  CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  const RandomFill fill(device);

  std::vector<Row> rows;
  for (const auto& s : all_shapes()) {
    if (!opt.filter.empty() && (s.workload + "/" + s.name).find(opt.filter) == std::string::npos) {
      continue;
    }
    const Operands o = make_operands(s, device, fill);
    for (MathMode mode : opt.modes) rows.push_back(measure(s, mode, opt, handle, stream, o));
  }
  CUBLAS_CHECK(cublasDestroy(handle));
  ddpb::ops::set_math_mode(MathMode::FP32);
  if (rows.empty()) {
    std::fprintf(stderr, "cuda_gemm_bench: --filter '%s' matches no shape\n", opt.filter.c_str());
    return 2;
  }

  nlohmann::json record;
  record["schema_version"] = kSchemaVersion;
  record["kind"] = "cuda_gemm_bench";
  record["context"] = context_json(device.index);
  record["config"] = {
      {"iters", opt.iters},       {"warmup", opt.warmup}, {"min_sample_ms", opt.min_sample_ms},
      {"epilogue", opt.epilogue}, {"filter", opt.filter}, {"check", opt.check}};
  record["rows"] = nlohmann::json::array();
  for (const auto& r : rows) record["rows"].push_back(r.to_json());
  record["step_summary"] = step_summary(rows);
  print_table(record);

  if (!opt.json.empty()) {
    ddpb::reports::write_json_atomic(opt.json, record);
    std::printf("wrote %s\n", opt.json.c_str());
  }
  int failed = 0;
  for (const auto& r : rows) {
    if (r.check_ok) continue;
    ++failed;
    std::fprintf(stderr,
                 "cuda_gemm_bench: %s/%s %s: ddpbench differs from cuBLAS by %.3g (max rel)\n",
                 r.shape.workload.c_str(), r.shape.name.c_str(), mode_name(r.mode), r.max_rel_diff);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_gemm_bench: failed: %s\n", e.what());
    return 1;
  }
}
