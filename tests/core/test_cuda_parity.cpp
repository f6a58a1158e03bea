// CPU/CUDA parity for every op of core/ops.h, plus the CUDA runtime pieces (streams, events,
// the device allocator, pinned copies) and the error-check macros.
//
// Each parity test builds the same inputs (from host vectors) on cpu:0 and on cuda:0, runs
// the op on both and compares element-wise with
//     |gpu - cpu| <= atol + |cpu| * rtol,
// printing the worst elements on failure. The CPU backend is the reference; it accumulates
// reductions in double. The tolerances, per test, allow for what legitimately differs:
//  - element-wise ops: a fused multiply-add on the GPU (1 ulp) and tanhf/expf ulps;
//  - reductions: float accumulation in a different order (error ~ eps * sum of |terms|);
//  - GEMMs in FP32 mode: summation order and FMA (error ~ eps * K * |a||b|); TF32 mode
//    rounds inputs to 10 mantissa bits, so its tolerance is about 1e-3 relative.
// Casts and copies must match bit for bit.
//
// Without a usable GPU every test that needs one is skipped with the reason (the CUDA
// driver's error), so a CPU-only machine shows *why* nothing ran; the GPU CI script must
// treat such skips as failures.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/stream.h"
#include "core/system_info.h"
#include "core/tensor.h"

namespace ddpb {
namespace {

const Device kCpu = Device::cpu();
const Device kGpu = Device::cuda(0);

// ---- Inputs ----------------------------------------------------------------------------

// Uniform in [lo, hi), reproducible on every platform (counter-based, core/rng.h).
std::vector<float> uniform(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = lo + (hi - lo) * static_cast<float>(rng_uniform(seed, 11, i));
  }
  return v;
}

std::vector<int32_t> uniform_ints(int64_t n, uint64_t seed, int32_t below) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<int32_t>(rng_below(seed, 12, i, static_cast<uint64_t>(below)));
  }
  return v;
}

Tensor floats(const std::vector<float>& v, const Shape& shape, const Device& d) {
  return Tensor::from_floats(v, shape, d);
}
Tensor ints(const std::vector<int32_t>& v, const Shape& shape, const Device& d) {
  return Tensor::from_ints(v, shape, d);
}

// ---- Comparison ------------------------------------------------------------------------

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};
constexpr Tolerance kExact{0.0, 0.0};

::testing::AssertionResult all_close(const std::vector<float>& ref, const std::vector<float>& got,
                                     Tolerance tol) {
  if (ref.size() != got.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << ref.size();
  }
  struct Bad {
    size_t index;
    double excess;
  };
  std::vector<Bad> bad;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float r = ref[i];
    const float g = got[i];
    if (r == g || (std::isnan(r) && std::isnan(g))) continue;  // also equal infinities
    const double err = std::fabs(static_cast<double>(g) - r);
    const double allowed = tol.atol + std::fabs(static_cast<double>(r)) * tol.rtol;
    if (err <= allowed) continue;
    bad.push_back({i, std::isnan(err) ? std::numeric_limits<double>::infinity() : err - allowed});
  }
  if (bad.empty()) return ::testing::AssertionSuccess();
  std::sort(bad.begin(), bad.end(), [](const Bad& a, const Bad& b) { return a.excess > b.excess; });
  auto failure = ::testing::AssertionFailure();
  failure << bad.size() << " of " << ref.size() << " elements outside atol " << tol.atol
          << " + |ref| * rtol " << tol.rtol << "; worst:";
  for (size_t j = 0; j < std::min<size_t>(bad.size(), 5); ++j) {
    const size_t i = bad[j].index;
    failure << "\n  [" << i << "] cpu " << ref[i] << ", cuda " << got[i] << ", |diff| "
            << std::fabs(static_cast<double>(got[i]) - ref[i]);
  }
  return failure;
}

// Runs `op` once per device; `op(device)` builds its inputs on that device, runs the op and
// returns the tensors to compare. tols[i] applies to output i (the last one to the rest).
using DeviceOp = std::function<std::vector<Tensor>(const Device&)>;

void expect_parity(const std::string& what, const DeviceOp& op, std::vector<Tolerance> tols) {
  const std::vector<Tensor> ref = op(kCpu);
  const std::vector<Tensor> got = op(kGpu);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(got[i].device().is_cuda()) << what << ": output " << i << " is not on the GPU";
    const Tolerance tol = tols[std::min(i, tols.size() - 1)];
    EXPECT_TRUE(all_close(ref[i].to_floats(), got[i].to_floats(), tol))
        << what << ", output " << i << " (" << got[i].describe() << ")";
  }
}

std::string no_gpu_reason() {
  const std::string reason = gpu::unavailable_reason();
  return reason.empty() ? "cuda_device_count() returned 0" : reason;
}

// Every test of this fixture needs a GPU.
class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << no_gpu_reason();
    ops::set_math_mode(ops::MathMode::FP32);
  }
  void TearDown() override { ops::set_math_mode(ops::MathMode::FP32); }
};

// ==== Tests that run without a GPU ======================================================

TEST(CudaRuntime, DeviceCountNeverThrows) {
  int count = -1;
  EXPECT_NO_THROW(count = cuda_device_count());
  EXPECT_GE(count, 0);
  EXPECT_TRUE(cuda_compiled_in());
  if (count == 0) {
    EXPECT_FALSE(gpu::unavailable_reason().empty()) << "0 GPUs but no reason given";
  }
}

TEST(CudaCheck, ThrowsTypedErrorsWithContext) {
  try {
    CUDA_CHECK(cudaErrorInvalidValue) << "while testing " << 42;
    FAIL() << "CUDA_CHECK did not throw";
  } catch (const CudaError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;
    EXPECT_NE(msg.find("while testing 42"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_cuda_parity.cpp"), std::string::npos) << msg;
  }
  EXPECT_THROW(CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED), CublasError);
#ifdef DDPB_HAVE_NCCL
  EXPECT_THROW(NCCL_CHECK(ncclInvalidArgument), NcclError);
#endif
  // A failed check must not leave a stale error for the next launch check to report.
  EXPECT_NO_THROW(CUDA_CHECK(cudaSuccess));
  bool evaluated = false;
  CUDA_CHECK(cudaSuccess) << (evaluated = true);
  EXPECT_FALSE(evaluated) << "the context of a passing check was evaluated";
}

TEST(CudaRuntime, NoDeviceMeansCudaErrorNotCrash) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THROW(Tensor::empty({4}, DType::F32, kGpu), CudaError);
}

// ==== GEMM ==============================================================================

struct GemmCase {
  bool trans_a, trans_b, bias;
  ops::Activation act;
  float beta;
};

std::string describe(const GemmCase& c) {
  std::ostringstream s;
  s << "gemm trans_a=" << c.trans_a << " trans_b=" << c.trans_b << " bias=" << c.bias
    << " act=" << static_cast<int>(c.act) << " beta=" << c.beta;
  return s.str();
}

// a, b, c and bias start `offset` floats into their buffers, so offset 1 gives views that
// are only 4-byte aligned (as a gradient inside a DDP bucket can be).
void check_gemm(const GemmCase& gc, int64_t m, int64_t n, int64_t k, Tolerance tol,
                int64_t offset = 0) {
  const Shape a_shape = gc.trans_a ? Shape{k, m} : Shape{m, k};
  const Shape b_shape = gc.trans_b ? Shape{n, k} : Shape{k, n};
  const auto a = uniform(offset + m * k, 1);
  const auto b = uniform(offset + k * n, 2);
  const auto c0 = uniform(offset + m * n, 3);
  const auto bias = uniform(offset + n, 4);
  expect_parity(describe(gc),
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor ta = floats(a, {offset + m * k}, d).flat_view(offset, a_shape);
                  Tensor tb = floats(b, {offset + k * n}, d).flat_view(offset, b_shape);
                  Tensor tc = floats(c0, {offset + m * n}, d).flat_view(offset, {m, n});
                  Tensor tbias =
                      gc.bias ? floats(bias, {offset + n}, d).flat_view(offset, {n}) : Tensor();
                  ops::gemm(ta, gc.trans_a, tb, gc.trans_b, tc, 0.75f, gc.beta, tbias, gc.act);
                  return {tc};
                },
                {tol});
}

TEST_F(CudaParity, GemmAllTransposesEpiloguesAndBetas) {
  // Odd sizes: no dimension is a multiple of a tile. K = 61 terms of |a b| <= 1.
  const Tolerance tol{1e-4, 1e-4};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool bias : {false, true}) {
        for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
          for (float beta : {0.0f, 0.5f}) check_gemm({ta, tb, bias, act, beta}, 37, 53, 61, tol);
        }
      }
    }
  }
}

TEST_F(CudaParity, GemmUnalignedViewsUseTheFallbackCorrectly) {
  const Tolerance tol{1e-4, 1e-4};
  for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
    check_gemm({false, true, true, act, 0.0f}, 33, 47, 29, tol, /*offset=*/1);
    check_gemm({true, false, true, act, 1.0f}, 33, 47, 29, tol, /*offset=*/3);
  }
}

TEST_F(CudaParity, GemmLargeWithFusedBiasGelu) {
  // A transformer-MLP-like shape, where cuBLASLt's fused epilogue is expected to be used.
  const Tolerance tol{2e-4, 2e-4};
  check_gemm({false, false, true, ops::Activation::GeLU, 0.0f}, 256, 384, 512, tol);
  check_gemm({false, true, true, ops::Activation::ReLU, 0.0f}, 256, 384, 512, tol);
}

TEST_F(CudaParity, GemmEmptyInnerDimension) {
  // k = 0: c = act(beta * c + bias).
  check_gemm({false, false, true, ops::Activation::ReLU, 0.5f}, 5, 7, 0, {1e-6, 1e-6});
  check_gemm({false, false, false, ops::Activation::None, 0.0f}, 5, 7, 0, kExact);
}

TEST_F(CudaParity, GemmTf32WithinTf32Tolerance) {
  ops::set_math_mode(ops::MathMode::TF32);
  // Inputs rounded to 10 mantissa bits: relative error ~5e-4 per product, random-walking
  // over K = 61 terms.
  check_gemm({false, true, true, ops::Activation::None, 0.0f}, 64, 64, 61, {2e-2, 1e-2});
}

TEST_F(CudaParity, GemmBf16MatchesTheCpuEmulation) {
  // --precision bf16: cuBLASLt's FAST_16BF compute type on CUDA; operands rounded to bf16
  // before an f32 sgemm on CPU. With round-to-nearest on both sides they differ by the order
  // of accumulation only (~1e-6). The tolerance also admits a truncating down-conversion
  // (~2^-8 per operand, summed over K: a spread of ~0.01) or an exact-f32 kernel, which
  // FAST_16BF allows cuBLAS to pick; a wrong result (transposes, epilogue) is far outside it.
  // 16-byte-aligned leading dimensions, where tensor-core kernels are eligible.
  ops::set_math_mode(ops::MathMode::BF16);
  check_gemm({false, true, true, ops::Activation::GeLU, 0.0f}, 64, 64, 64, {3e-2, 3e-2});
  check_gemm({true, false, false, ops::Activation::None, 0.5f}, 48, 80, 96, {3e-2, 3e-2});
}

TEST_F(CudaParity, GemmFromTwoThreadsOnTwoStreams) {
  // Each stream has its own cuBLASLt workspace; the handle is shared. Run both at once.
  const int64_t n = 128;
  const auto a = uniform(n * n, 5);
  const auto b = uniform(n * n, 6);
  Tensor ref = Tensor::empty({n, n}, DType::F32, kCpu);
  ops::gemm(floats(a, {n, n}, kCpu), false, floats(b, {n, n}, kCpu), false, ref);
  const auto expected = ref.to_floats();
  std::vector<std::vector<float>> results(2);
  std::vector<std::string> errors(2);
  auto worker = [&](int id) {
    try {
      DeviceGuard device(kGpu);
      StreamGuard guard(make_stream(kGpu, "gemm-thread-" + std::to_string(id)));
      Tensor ta = floats(a, {n, n}, kGpu);
      Tensor tb = floats(b, {n, n}, kGpu);
      Tensor tc = Tensor::empty({n, n}, DType::F32, kGpu);
      for (int i = 0; i < 20; ++i) ops::gemm(ta, false, tb, false, tc);
      results[id] = tc.to_floats();
    } catch (const std::exception& e) {
      errors[id] = e.what();
    }
  };
  std::thread t0(worker, 0);
  std::thread t1(worker, 1);
  t0.join();
  t1.join();
  for (int id = 0; id < 2; ++id) {
    ASSERT_TRUE(errors[id].empty()) << errors[id];
    EXPECT_TRUE(all_close(expected, results[id], {1e-4, 1e-4})) << "thread " << id;
  }
}

// ==== Element-wise ======================================================================

TEST_F(CudaParity, FillAndZero) {
  expect_parity("fill",
                [](const Device& d) -> std::vector<Tensor> {
                  Tensor t = Tensor::empty({1000, 3}, DType::F32, d);
                  ops::fill(t, 3.25f);
                  return {t};
                },
                {kExact});
  expect_parity("zero",
                [](const Device& d) -> std::vector<Tensor> {
                  Tensor f = floats(uniform(1001, 7), {1001}, d);
                  Tensor h = Tensor::empty({513}, DType::BF16, d);
                  ops::zero(f);
                  ops::zero(h);
                  return {f, h};
                },
                {kExact});
}

TEST_F(CudaParity, Arithmetic) {
  const int64_t n = 100003;  // not a multiple of any block size
  const auto x = uniform(n, 8);
  const auto y = uniform(n, 9);
  // A fused multiply-add on the GPU differs from mul-then-add by up to 1 ulp.
  const Tolerance fma{1e-7, 2e-7};
  expect_parity("add, mul, scale_copy",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor a = floats(x, {n}, d), b = floats(y, {n}, d);
                  Tensor sum = Tensor::empty({n}, DType::F32, d);
                  Tensor prod = Tensor::empty({n}, DType::F32, d);
                  Tensor scaled = Tensor::empty({n}, DType::F32, d);
                  ops::add(a, b, sum);
                  ops::mul(a, b, prod);
                  ops::scale_copy(a, scaled, -1.5f);
                  return {sum, prod, scaled};
                },
                {kExact});
  expect_parity("axpy, scale",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor a = floats(x, {n}, d), b = floats(y, {n}, d);
                  ops::axpy(0.3f, a, b);  // accumulates into b
                  ops::scale(a, 0.7f);
                  return {b, a};
                },
                {fma, kExact});
}

// --normalize-on-device: image bytes become ImageNet-normalized floats on the device.
TEST_F(CudaParity, NormalizeU8Images) {
  const Shape shape = {3, 3, 17, 19};
  const int64_t n = shape_numel(shape);
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 37) % 256);
  expect_parity(
      "normalize_u8_images",
      [&](const Device& d) -> std::vector<Tensor> {
        Tensor host = Tensor::empty(shape, DType::U8, Device::cpu());
        std::copy(bytes.begin(), bytes.end(), host.data<uint8_t>());
        Tensor x = host.to(d);
        Tensor out = Tensor::empty(shape, DType::F32, d);
        ops::normalize_u8_images(x, out, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
        return {out};
      },
      {Tolerance{1e-6, 1e-6}});
}

TEST_F(CudaParity, Activations) {
  const int64_t n = 4099;
  const auto x = uniform(n, 10, -4.0f, 4.0f);
  const auto dy = uniform(n, 11);
  expect_parity("relu forward/backward",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor tx = floats(x, {n}, d), tdy = floats(dy, {n}, d);
                  Tensor y = Tensor::empty({n}, DType::F32, d),
                         dx = Tensor::empty({n}, DType::F32, d);
                  ops::relu_forward(tx, y);
                  ops::relu_backward(tdy, y, dx);
                  return {y, dx};
                },
                {kExact});
  // tanhf on the GPU and on the host may differ by a few ulps.
  expect_parity("gelu forward/backward",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor tx = floats(x, {n}, d), tdy = floats(dy, {n}, d);
                  Tensor y = Tensor::empty({n}, DType::F32, d),
                         dx = Tensor::empty({n}, DType::F32, d);
                  ops::gelu_forward(tx, y);
                  ops::gelu_backward(tdy, tx, dx);
                  return {y, dx};
                },
                {{1e-6, 1e-5}});
}

TEST_F(CudaParity, CastsRoundToNearestEvenBitForBit) {
  // Random values plus ties (exactly half-way between two bf16 or f16 values), overflow to
  // infinity in f16, f16 subnormals, signed zeros and infinities.
  std::vector<float> v = uniform(3000, 12, -70000.0f, 70000.0f);
  for (float f : uniform(1000, 13, -1e-4f, 1e-4f)) v.push_back(f);
  const float ties[] = {1.0f + 0x1p-8f,
                        1.0f + 3 * 0x1p-8f,
                        -1.0f - 0x1p-8f,
                        1.0f + 0x1p-11f,
                        1.0f + 3 * 0x1p-11f,
                        65520.0f,
                        -65520.0f,
                        0x1p-25f,
                        0.0f,
                        -0.0f,
                        INFINITY,
                        -INFINITY,
                        3.0e38f,
                        1e-40f};
  v.insert(v.end(), std::begin(ties), std::end(ties));
  const auto n = static_cast<int64_t>(v.size());
  expect_parity("cast f32 -> bf16/f16 -> f32 and bf16 <-> f16",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor src = floats(v, {n}, d);
                  Tensor bf = Tensor::empty({n}, DType::BF16, d);
                  Tensor hf = Tensor::empty({n}, DType::F16, d);
                  Tensor bf_to_hf = Tensor::empty({n}, DType::F16, d);
                  Tensor hf_to_bf = Tensor::empty({n}, DType::BF16, d);
                  Tensor bf_to_f32 = Tensor::empty({n}, DType::F32, d);
                  ops::cast(src, bf);
                  ops::cast(src, hf);
                  ops::cast(bf, bf_to_hf);
                  ops::cast(hf, hf_to_bf);
                  ops::cast(bf, bf_to_f32);
                  return {bf, hf, bf_to_hf, hf_to_bf, bf_to_f32};
                },
                {kExact});
}

// Note [Vectorised element-wise kernels] (core/cuda/cuda_elementwise.cu): float4s when every
// pointer is 16-byte aligned, a scalar tail of n % 4, a scalar kernel otherwise. Views start
// 0..3 floats into their buffers (16-, 4-, 8- and 4-byte aligned), alike or mixed, with
// lengths 1..9 (no float4, a tail of each length) and 4097. The whole buffers are compared,
// so a write past either end of a view fails too.
struct ViewOffsets {
  int64_t a, b, out;
};

void check_elementwise_views(const ViewOffsets& o, int64_t n) {
  const int64_t total = n + 8;  // room for every offset, and untouched floats after the views
  const auto a0 = uniform(total, 80, -4.0f, 4.0f);
  const auto b0 = uniform(total, 81, -4.0f, 4.0f);
  const auto out0 = uniform(total, 82);
  // Runs `ops` with views a, b and a fresh output view per call of out(); returns the
  // output buffers.
  auto run = [&](const std::function<void(const Tensor&, const Tensor&,
                                          const std::function<Tensor()>&)>& ops) {
    return [&, ops](const Device& d) -> std::vector<Tensor> {
      std::vector<Tensor> buffers;
      auto out = [&]() {
        buffers.push_back(floats(out0, {total}, d));
        return buffers.back().flat_view(o.out, {n});
      };
      ops(floats(a0, {total}, d).flat_view(o.a, {n}), floats(b0, {total}, d).flat_view(o.b, {n}),
          out);
      return buffers;
    };
  };
  const std::string what = "n " + std::to_string(n) + ", offsets a " + std::to_string(o.a) + " b " +
                           std::to_string(o.b) + " out " + std::to_string(o.out) + ": ";
  expect_parity(what + "fill, add, mul, scale, scale_copy, relu",
                run([](const Tensor& a, const Tensor& b, const std::function<Tensor()>& out) {
                  ops::fill(out(), 3.25f);
                  ops::add(a, b, out());
                  ops::mul(a, b, out());
                  ops::scale(out(), 0.7f);
                  ops::scale_copy(a, out(), -1.5f);
                  ops::relu_forward(a, out());
                  ops::relu_backward(a, b, out());
                }),
                {kExact});
  expect_parity(what + "axpy",  // a fused multiply-add on the GPU: 1 ulp
                run([](const Tensor& a, const Tensor&, const std::function<Tensor()>& out) {
                  ops::axpy(0.3f, a, out());
                }),
                {{1e-7, 2e-7}});
  expect_parity(what + "gelu forward/backward",  // tanhf ulps
                run([](const Tensor& a, const Tensor& b, const std::function<Tensor()>& out) {
                  ops::gelu_forward(a, out());
                  ops::gelu_backward(a, b, out());
                }),
                {{1e-6, 1e-5}});
}

TEST_F(CudaParity, ElementwiseOpsAtEveryAlignmentAndLength) {
  const std::vector<ViewOffsets> offsets = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3},
                                            {0, 1, 0}, {0, 0, 2}, {3, 0, 0}};
  for (const ViewOffsets& o : offsets) {
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 4097}) check_elementwise_views(o, n);
  }
}

// The GEMM's separate bias/activation pass walks the column instead of dividing and uses
// float4s when cols % 4 == 0 and c and the bias are 16-byte aligned: an empty product (the
// bias is never fused there) and activations after a product, at aligned (offset 0 or 4)
// and unaligned views.
TEST_F(CudaParity, GemmBiasActivationPassAtEveryAlignment) {
  for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
    for (int64_t offset : {0, 1, 2, 4}) {
      check_gemm({false, false, true, act, 0.5f}, 5, 8, 0, {1e-6, 1e-5}, offset);
      check_gemm({false, false, true, act, 0.5f}, 3, 7, 0, {1e-6, 1e-5}, offset);
      check_gemm({false, true, true, act, 0.0f}, 33, 48, 29, {1e-4, 1e-4}, offset);
    }
  }
}

// ==== Reductions ========================================================================

TEST_F(CudaParity, SumRows) {
  // {rows, cols}: one chunk, several chunks (the two-stage path), a single row, no rows.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {300, 70}, {5000, 33}, {1, 7}, {0, 5}, {20000, 1}};
  for (auto [rows, cols] : shapes) {
    const auto x = uniform(rows * cols, 14);
    // Float accumulation of `rows` terms of |x| <= 1 against the CPU's double.
    const Tolerance tol{1e-6 * static_cast<double>(rows) + 1e-6, 1e-5};
    expect_parity("sum_rows [" + std::to_string(rows) + ", " + std::to_string(cols) + "]",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor out = Tensor::empty({cols}, DType::F32, d);
                    ops::sum_rows(floats(x, {rows, cols}, d), out);
                    return {out};
                  },
                  {tol});
  }
}

TEST_F(CudaParity, SumAllIsAccurateAndDeterministic) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1000003}}) {
    const auto x = uniform(n, 15);
    double sum_abs = 0.0;
    for (float f : x) sum_abs += std::fabs(f);
    expect_parity("sum_all of " + std::to_string(n),
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor out = Tensor::empty({1}, DType::F32, d);
                    ops::sum_all(floats(x, {n}, d), out);
                    return {out};
                  },
                  {{1e-6 * sum_abs + 1e-7, 1e-6}});
    // Same input, same launch shape: the same bits.
    Tensor gx = floats(x, {n}, kGpu);
    Tensor first = Tensor::empty({1}, DType::F32, kGpu);
    Tensor second = Tensor::empty({1}, DType::F32, kGpu);
    ops::sum_all(gx, first);
    ops::sum_all(gx, second);
    EXPECT_EQ(first.item(), second.item()) << "sum_all of " << n << " is not reproducible";
  }
}

TEST_F(CudaParity, AllFinite) {
  auto x = uniform(70000, 16);
  auto with_inf = x;
  with_inf[69999] = INFINITY;
  auto with_nan = x;
  with_nan[123] = NAN;
  for (const auto* v : {&x, &with_inf, &with_nan}) {
    const auto n = static_cast<int64_t>(v->size());
    expect_parity("all_finite",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor out = Tensor::empty({1}, DType::F32, d);
                    ops::all_finite(floats(*v, {n}, d), out);
                    return {out};
                  },
                  {kExact});
  }
  Tensor out = Tensor::empty({1}, DType::F32, kGpu);
  ops::all_finite(floats(with_nan, {70000}, kGpu), out);
  EXPECT_EQ(out.item(), 0.0f);
  ops::all_finite(floats(x, {70000}, kGpu), out);
  EXPECT_EQ(out.item(), 1.0f);
}

// PowerSGD's P and Q: tall matrices of a few columns; one long one (an embedding's rows).
TEST_F(CudaParity, OrthogonalizeColumns) {
  const std::vector<Shape> shapes = {{1024, 1}, {1024, 2}, {300, 4}, {50257, 2}};
  for (const Shape& shape : shapes) {
    const auto x = uniform(shape_numel(shape), 23);
    expect_parity("orthogonalize_columns " + shape_str(shape),
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor m = floats(x, shape, d);
                    ops::orthogonalize_columns(m);
                    return {m};
                  },
                  {{1e-5, 1e-4}});
  }
}

// ==== bf16 under autocast (--precision bf16) ============================================
//
// The ops that take bf16 tensors under autocast (Note [Autocast], core/functional.cpp): the
// GEMM, add, relu, gelu and sum_rows. Each device makes its bf16 inputs by casting the same
// floats (bit for bit alike, CastsRoundToNearestEvenBitForBit), widens them exactly, computes
// in f32 and rounds a bf16 output once, to nearest even. So a bf16 output matches exactly
// where the f32 arithmetic does (add, relu), and is at most one bf16 rounding apart (2^-8
// relative, rtol 1e-2) where the f32 values differ by ulps (summation order, FMA, tanhf);
// an f32 output of bf16 operands differs by the summation order alone (the products of bf16
// values are exact in f32).

// `v` on `d` in `dtype` (f32, or bf16 rounded to nearest even), as one flat buffer.
Tensor typed_buffer(const std::vector<float>& v, DType dtype, const Device& d) {
  Tensor f = floats(v, {static_cast<int64_t>(v.size())}, d);
  if (dtype == DType::F32) return f;
  Tensor t = Tensor::empty(f.shape(), dtype, d);
  ops::cast(f, t);
  return t;
}

std::string dtype_str(DType dtype) {
  return std::string(dtype_name(dtype));
}

// check_gemm with bf16 a and b and a c of `c_dtype`. Every operand starts `offset` elements
// into its buffer: offset 1 gives bf16 views only 2-byte aligned (scalar epilogue pass, no
// fused bias), offset 8 bf16 views 16-byte aligned. The whole buffer of c is compared, so a
// write outside the view fails too.
void check_gemm_bf16(const GemmCase& gc, int64_t m, int64_t n, int64_t k, DType c_dtype,
                     Tolerance tol, int64_t offset = 0) {
  const Shape a_shape = gc.trans_a ? Shape{k, m} : Shape{m, k};
  const Shape b_shape = gc.trans_b ? Shape{n, k} : Shape{k, n};
  const auto a = uniform(offset + m * k, 31);
  const auto b = uniform(offset + k * n, 32);
  const auto c0 = uniform(offset + m * n, 33);
  const auto bias = uniform(offset + n, 34);
  expect_parity(describe(gc) + ", bf16 operands into " + dtype_str(c_dtype) + ", offset " +
                    std::to_string(offset),
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor ta = typed_buffer(a, DType::BF16, d).flat_view(offset, a_shape);
                  Tensor tb = typed_buffer(b, DType::BF16, d).flat_view(offset, b_shape);
                  Tensor c_buffer = typed_buffer(c0, c_dtype, d);
                  Tensor tbias =
                      gc.bias ? floats(bias, {offset + n}, d).flat_view(offset, {n}) : Tensor();
                  ops::gemm(ta, gc.trans_a, tb, gc.trans_b, c_buffer.flat_view(offset, {m, n}),
                            0.75f, gc.beta, tbias, gc.act);
                  return {c_buffer};
                },
                {tol});
}

// One bf16 rounding apart, or both within ~1e-5 of zero (K = 61 terms of |a b| <= 1).
constexpr Tolerance kBf16Output{1e-5, 1e-2};
// Summation order only: ~K eps |a||b| against values of ~1.
constexpr Tolerance kF32OfBf16{3e-5, 1e-5};

void for_each_gemm_case(const std::vector<float>& betas,
                        const std::function<void(const GemmCase&)>& fn) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool bias : {false, true}) {
        for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
          for (float beta : betas) fn({ta, tb, bias, act, beta});
        }
      }
    }
  }
}

TEST_F(CudaParity, GemmBf16IntoBf16AllTransposesEpiloguesAndBetas) {
  for_each_gemm_case({0.0f, 1.0f}, [](const GemmCase& gc) {
    check_gemm_bf16(gc, 37, 53, 61, DType::BF16, kBf16Output);
  });
}

TEST_F(CudaParity, GemmBf16IntoF32AllTransposesEpiloguesAndBetas) {
  for_each_gemm_case({0.0f, 1.0f}, [](const GemmCase& gc) {
    check_gemm_bf16(gc, 37, 53, 61, DType::F32, kF32OfBf16);
  });
}

TEST_F(CudaParity, GemmBf16LargeWithFusedBias) {
  // Transformer-MLP-like shapes, where cuBLASLt fuses the bias: into a bf16 D (its bias data
  // type set to f32) when there is no activation, into the f32 staging otherwise (Note [bf16
  // GEMM outputs round once]). K = 512: a wider spread of summation orders.
  const Tolerance bf16_out{1e-4, 1e-2};
  check_gemm_bf16({false, true, true, ops::Activation::None, 0.0f}, 256, 384, 512, DType::BF16,
                  bf16_out);
  check_gemm_bf16({false, false, true, ops::Activation::GeLU, 0.0f}, 256, 384, 512, DType::BF16,
                  bf16_out);
  check_gemm_bf16({false, true, true, ops::Activation::ReLU, 0.0f}, 256, 384, 512, DType::F32,
                  {1e-4, 2e-5});
}

TEST_F(CudaParity, GemmBf16EmptyInnerDimension) {
  // k = 0: c = act(beta * c + bias), rounded once into a bf16 c.
  for (DType c_dtype : {DType::BF16, DType::F32}) {
    check_gemm_bf16({false, false, true, ops::Activation::ReLU, 0.5f}, 5, 7, 0, c_dtype,
                    {1e-6, 1e-2});
    check_gemm_bf16({false, false, true, ops::Activation::GeLU, 1.0f}, 5, 8, 0, c_dtype,
                    {1e-6, 1e-2});
    check_gemm_bf16({false, false, false, ops::Activation::None, 0.0f}, 5, 7, 0, c_dtype, kExact);
    check_gemm_bf16({false, false, false, ops::Activation::None, 1.0f}, 5, 7, 0, c_dtype, kExact);
  }
}

// The epilogue pass into bf16 (launch_bias_activation_bf16) takes 8 elements per step when
// cols % 8 == 0 and every pointer is 16-byte aligned, else one: views 0, 8 (16-byte aligned),
// 4 (8-byte) and 1 (2-byte; the f32 bias 4-byte, so not fused) elements in; k = 0 and K = 29.
// Mixed (bf16 operands into f32) at the same offsets.
TEST_F(CudaParity, GemmBf16EpiloguePassAtEveryAlignment) {
  for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
    for (int64_t offset : {0, 1, 4, 8}) {
      check_gemm_bf16({false, false, true, act, 0.5f}, 5, 8, 0, DType::BF16, {1e-6, 1e-2}, offset);
      check_gemm_bf16({false, false, true, act, 0.5f}, 3, 7, 0, DType::BF16, {1e-6, 1e-2}, offset);
      check_gemm_bf16({false, true, true, act, 0.0f}, 33, 48, 29, DType::BF16, kBf16Output, offset);
      check_gemm_bf16({true, false, true, act, 1.0f}, 33, 47, 29, DType::BF16, kBf16Output, offset);
      check_gemm_bf16({true, false, true, act, 1.0f}, 33, 47, 29, DType::F32, kF32OfBf16, offset);
    }
  }
}

// bf16 operands accumulate in exact f32 whatever the math mode (Note [bf16 GEMM outputs round
// once]), and an f32 GEMM of the same shape in the same process keeps its own cached
// algorithm: the dtypes are part of the cache key.
TEST_F(CudaParity, GemmBf16IgnoresTheMathModeAndKeepsItsOwnAlgorithm) {
  for (auto mode : {ops::MathMode::FP32, ops::MathMode::TF32, ops::MathMode::BF16}) {
    ops::set_math_mode(mode);
    const GemmCase gc{false, true, true, ops::Activation::None, 0.0f};
    check_gemm_bf16(gc, 64, 64, 64, DType::BF16, kBf16Output);
    check_gemm_bf16(gc, 64, 64, 64, DType::F32, kF32OfBf16);
    if (mode == ops::MathMode::FP32) check_gemm(gc, 64, 64, 64, {1e-4, 1e-4});
  }
}

// Each input of add f32 or bf16, a bf16 output only for two bf16 inputs: the f32 sum of the
// same values on both devices, rounded once, so bit for bit. Ties (a sum exactly half-way
// between two bf16 values) round to even on both.
TEST_F(CudaParity, AddMixesF32AndBf16) {
  std::vector<float> x = uniform(4099, 40, -4.0f, 4.0f);
  std::vector<float> y = uniform(4099, 41, -4.0f, 4.0f);
  const float tie_a[] = {1.0f, 1.0f + 0x1p-7f, -1.0f, 256.0f, 3.0f};
  const float tie_b[] = {0x1p-8f, 0x1p-8f, -0x1p-8f, 1.0f, 0x1p-7f};
  x.insert(x.end(), std::begin(tie_a), std::end(tie_a));
  y.insert(y.end(), std::begin(tie_b), std::end(tie_b));
  const auto n = static_cast<int64_t>(x.size());
  expect_parity("add f32 + bf16, bf16 + f32, bf16 + bf16 -> f32 and -> bf16",
                [&](const Device& d) -> std::vector<Tensor> {
                  const Tensor fa = typed_buffer(x, DType::F32, d);
                  const Tensor ha = typed_buffer(x, DType::BF16, d);
                  const Tensor fb = typed_buffer(y, DType::F32, d);
                  const Tensor hb = typed_buffer(y, DType::BF16, d);
                  std::vector<Tensor> outs = {
                      Tensor::empty({n}, DType::F32, d), Tensor::empty({n}, DType::F32, d),
                      Tensor::empty({n}, DType::F32, d), Tensor::empty({n}, DType::BF16, d)};
                  ops::add(fa, hb, outs[0]);
                  ops::add(ha, fb, outs[1]);
                  ops::add(ha, hb, outs[2]);
                  ops::add(ha, hb, outs[3]);
                  return outs;
                },
                {kExact});
}

TEST_F(CudaParity, Bf16Activations) {
  const int64_t n = 4099;
  const auto x = uniform(n, 42, -4.0f, 4.0f);
  const auto dy = uniform(n, 43);
  expect_parity("bf16 relu forward/backward",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor tx = typed_buffer(x, DType::BF16, d);
                  Tensor tdy = typed_buffer(dy, DType::BF16, d);
                  Tensor y = Tensor::empty({n}, DType::BF16, d);
                  Tensor dx = Tensor::empty({n}, DType::BF16, d);
                  ops::relu_forward(tx, y);
                  ops::relu_backward(tdy, y, dx);
                  return {y, dx};
                },
                {kExact});
  // tanhf ulps in f32 may move a value across a bf16 rounding boundary.
  expect_parity("bf16 gelu forward/backward",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor tx = typed_buffer(x, DType::BF16, d);
                  Tensor tdy = typed_buffer(dy, DType::BF16, d);
                  Tensor y = Tensor::empty({n}, DType::BF16, d);
                  Tensor dx = Tensor::empty({n}, DType::BF16, d);
                  ops::gelu_forward(tx, y);
                  ops::gelu_backward(tdy, tx, dx);
                  return {y, dx};
                },
                {{1e-6, 1e-2}});
}

// Note [bf16 element-wise kernels] (core/cuda/cuda_elementwise.cu): 8 elements per 128-bit
// access when every pointer is 16-byte aligned, a scalar tail of n % 8, one element at a
// time otherwise. Views start 0, 1, 3 or 8 elements into their buffers (bf16 views 16-, 2-,
// 6- and 16-byte aligned; f32 16, 4, 12 and 16), alike or mixed, with lengths 1..17 (no
// vector, a tail of each length) and 4097. The whole output buffers are compared.
void check_bf16_elementwise_views(const ViewOffsets& o, int64_t n) {
  const int64_t total = n + 16;
  const auto a0 = uniform(total, 44, -4.0f, 4.0f);
  const auto b0 = uniform(total, 45, -4.0f, 4.0f);
  const auto out0 = uniform(total, 46);
  // Runs `ops` with bf16 views a and b, f32 views fa and fb of the same values, and a fresh
  // output view of the given dtype per call of out(); returns the output buffers.
  using Out = std::function<Tensor(DType)>;
  using Body = std::function<void(const Tensor& a, const Tensor& b, const Tensor& fa,
                                  const Tensor& fb, const Out& out)>;
  auto run = [&](const Body& body) {
    return [&, body](const Device& d) -> std::vector<Tensor> {
      std::vector<Tensor> buffers;
      auto view = [&](const std::vector<float>& v, DType dtype, int64_t offset) {
        return typed_buffer(v, dtype, d).flat_view(offset, {n});
      };
      const Out out = [&](DType dtype) {
        buffers.push_back(typed_buffer(out0, dtype, d));
        return buffers.back().flat_view(o.out, {n});
      };
      body(view(a0, DType::BF16, o.a), view(b0, DType::BF16, o.b), view(a0, DType::F32, o.a),
           view(b0, DType::F32, o.b), out);
      return buffers;
    };
  };
  const std::string what = "bf16, n " + std::to_string(n) + ", offsets a " + std::to_string(o.a) +
                           " b " + std::to_string(o.b) + " out " + std::to_string(o.out) + ": ";
  expect_parity(
      what + "add (all mixes), relu forward/backward",
      run([](const Tensor& a, const Tensor& b, const Tensor& fa, const Tensor& fb, const Out& out) {
        ops::add(a, b, out(DType::BF16));
        ops::add(a, b, out(DType::F32));
        ops::add(a, fb, out(DType::F32));
        ops::add(fa, b, out(DType::F32));
        ops::relu_forward(a, out(DType::BF16));
        ops::relu_backward(a, b, out(DType::BF16));
      }),
      {kExact});
  expect_parity(
      what + "gelu forward/backward",  // tanhf ulps
      run([](const Tensor& a, const Tensor& b, const Tensor&, const Tensor&, const Out& out) {
        ops::gelu_forward(a, out(DType::BF16));
        ops::gelu_backward(a, b, out(DType::BF16));
      }),
      {{1e-6, 1e-2}});
}

TEST_F(CudaParity, Bf16ElementwiseOpsAtEveryAlignmentAndLength) {
  const std::vector<ViewOffsets> offsets = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {8, 8, 8},
                                            {0, 1, 0}, {0, 0, 3}, {1, 0, 0}, {8, 0, 1}};
  for (const ViewOffsets& o : offsets) {
    for (int64_t n = 1; n <= 17; ++n) check_bf16_elementwise_views(o, n);
    check_bf16_elementwise_views(o, 4097);
  }
}

TEST_F(CudaParity, SumRowsOfBf16) {
  // {rows, cols}: one chunk, several chunks (the two-stage path), a single row, no rows; and
  // a view one element into its buffer (2-byte aligned).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {300, 70}, {5000, 33}, {1, 7}, {0, 5}, {20000, 1}};
  for (auto [rows, cols] : shapes) {
    for (int64_t offset : {0, 1}) {
      const auto x = uniform(offset + rows * cols, 47);
      // Float accumulation of `rows` terms of |x| <= 1 against the CPU's double.
      const Tolerance tol{1e-6 * static_cast<double>(rows) + 1e-6, 1e-5};
      expect_parity(
          "sum_rows of bf16 [" + std::to_string(rows) + ", " + std::to_string(cols) + "], offset " +
              std::to_string(offset),
          [&](const Device& d) -> std::vector<Tensor> {
            Tensor out = Tensor::empty({cols}, DType::F32, d);
            ops::sum_rows(typed_buffer(x, DType::BF16, d).flat_view(offset, {rows, cols}), out);
            return {out};
          },
          {tol});
    }
  }
}

// ==== Softmax, layer norm ===============================================================

TEST_F(CudaParity, Softmax) {
  const std::vector<Shape> shapes = {{64, 1000}, {3, 5, 17}, {4, 50257}, {7, 1}};
  for (const Shape& shape : shapes) {
    const int64_t n = shape_numel(shape);
    const auto x = uniform(n, 17, -6.0f, 6.0f);
    const auto dy = uniform(n, 18);
    Tensor y_ref = Tensor::empty(shape, DType::F32, kCpu);
    ops::softmax_forward(floats(x, shape, kCpu), y_ref);
    const auto y = y_ref.to_floats();
    expect_parity("softmax " + shape_str(shape),
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor ty = Tensor::empty(shape, DType::F32, d);
                    ops::softmax_forward(floats(x, shape, d), ty);
                    // Backward from the same (CPU) probabilities, to test it in isolation.
                    Tensor dx = Tensor::empty(shape, DType::F32, d);
                    ops::softmax_backward(floats(dy, shape, d), floats(y, shape, d), dx);
                    return {ty, dx};
                  },
                  {{1e-7, 1e-5}, {1e-7, 1e-4}});
  }
}

TEST_F(CudaParity, LayerNorm) {
  // {rows, cols}: GPT-like rows, and many short rows (multi-chunk dweight/dbias reduction).
  for (auto [m, c] : std::vector<std::pair<int64_t, int64_t>>{{67, 768}, {3000, 40}}) {
    // Offset inputs (mean 3): the variance must not come from E[x^2] - E[x]^2.
    const auto x = uniform(m * c, 19, 1.0f, 5.0f);
    const auto w = uniform(c, 20, 0.5f, 1.5f);
    const auto b = uniform(c, 21);
    const auto dy = uniform(m * c, 22);
    Tensor mean_ref = Tensor::empty({m}, DType::F32, kCpu);
    Tensor rstd_ref = Tensor::empty({m}, DType::F32, kCpu);
    Tensor y_ref = Tensor::empty({m, c}, DType::F32, kCpu);
    ops::layernorm_forward(floats(x, {m, c}, kCpu), floats(w, {c}, kCpu), floats(b, {c}, kCpu),
                           y_ref, mean_ref, rstd_ref, 1e-5f);
    const auto mean = mean_ref.to_floats();
    const auto rstd = rstd_ref.to_floats();
    const std::string what = "layernorm [" + std::to_string(m) + ", " + std::to_string(c) + "]";
    expect_parity(what + " forward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor y = Tensor::empty({m, c}, DType::F32, d);
                    Tensor mu = Tensor::empty({m}, DType::F32, d);
                    Tensor rs = Tensor::empty({m}, DType::F32, d);
                    ops::layernorm_forward(floats(x, {m, c}, d), floats(w, {c}, d),
                                           floats(b, {c}, d), y, mu, rs, 1e-5f);
                    return {y, mu, rs};
                  },
                  {{1e-5, 1e-5}});
    expect_parity(what + " backward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor dx = Tensor::empty({m, c}, DType::F32, d);
                    // Overwritten, not accumulated: start from garbage.
                    Tensor dw = floats(std::vector<float>(c, 99.0f), {c}, d);
                    Tensor db = floats(std::vector<float>(c, -99.0f), {c}, d);
                    ops::layernorm_backward(floats(dy, {m, c}, d), floats(x, {m, c}, d),
                                            floats(w, {c}, d), floats(mean, {m}, d),
                                            floats(rstd, {m}, d), dx, dw, db);
                    return {dx, dw, db};
                  },
                  {{1e-5, 1e-4}, {1e-6 * static_cast<double>(m) + 1e-5, 1e-5}});
  }
}

// ==== Images: convolution (cuDNN), batch norm, pooling ==================================

TEST_F(CudaParity, Conv2dForwardAndBothBackwards) {
  // ResNet's shapes: the 7x7/2 stem, a 3x3 block conv, a strided 3x3 and a 1x1 downsample.
  struct Shape4 {
    int64_t n, c, h, k, r;
    ops::Conv2dGeometry g;
  };
  for (const Shape4& s : std::vector<Shape4>{{4, 3, 32, 64, 7, {2, 3}},
                                             {4, 64, 8, 64, 3, {1, 1}},
                                             {2, 64, 8, 128, 3, {2, 1}},
                                             {2, 64, 8, 128, 1, {2, 0}}}) {
    const int64_t p = s.g.out_extent(s.h, s.r);
    const auto x = uniform(s.n * s.c * s.h * s.h, 40);
    const auto w = uniform(s.k * s.c * s.r * s.r, 41, -0.2f, 0.2f);
    const auto dy = uniform(s.n * s.k * p * p, 42);
    // Sums of c * r * r products: float error ~ eps * sqrt(terms) * |x||w|.
    const double tol = 2e-5 * std::sqrt(static_cast<double>(s.c * s.r * s.r)) + 1e-5;
    const std::string what = "conv " + std::to_string(s.r) + "x" + std::to_string(s.r) + " c" +
                             std::to_string(s.c) + " k" + std::to_string(s.k);
    expect_parity(what,
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor xt = floats(x, {s.n, s.c, s.h, s.h}, d);
                    Tensor wt = floats(w, {s.k, s.c, s.r, s.r}, d);
                    Tensor dyt = floats(dy, {s.n, s.k, p, p}, d);
                    Tensor y = Tensor::empty({s.n, s.k, p, p}, DType::F32, d);
                    Tensor dx = Tensor::empty(xt.shape(), DType::F32, d);
                    Tensor dw = Tensor::empty(wt.shape(), DType::F32, d);
                    ops::conv2d_forward(xt, wt, y, s.g);
                    ops::conv2d_backward_data(dyt, wt, dx, s.g);
                    ops::conv2d_backward_weight(dyt, xt, dw, s.g);
                    return {y, dx, dw};
                  },
                  {{tol, 1e-4}, {tol, 1e-4}, {tol * std::sqrt(double(s.n * p * p)), 1e-4}});
  }
}

TEST_F(CudaParity, BatchNormTrainingAndEvalAndSyncDecomposition) {
  const int64_t n = 8, c = 16, h = 5;
  // Offset inputs (mean 3): the variance must not come from E[x^2] - E[x]^2.
  const auto x = uniform(n * c * h * h, 43, 1.0f, 5.0f);
  const auto dy = uniform(n * c * h * h, 44);
  const auto w = uniform(c, 45, 0.5f, 1.5f);
  const auto b = uniform(c, 46);
  expect_parity(
      "batch norm",
      [&](const Device& d) -> std::vector<Tensor> {
        Tensor xt = floats(x, {n, c, h, h}, d), dyt = floats(dy, {n, c, h, h}, d);
        Tensor stats = Tensor::empty({2 * c + 1}, DType::F32, d);
        ops::batch_norm_stats(xt, stats);
        // Two groups (SyncBatchNorm's gather): this batch's statistics twice.
        Tensor groups = Tensor::empty({2, 2 * c + 1}, DType::F32, d);
        ops::copy(stats, groups.flat_view(0, {2 * c + 1}));
        ops::copy(stats, groups.flat_view(2 * c + 1, {2 * c + 1}));
        Tensor mean = Tensor::empty({c}, DType::F32, d), invstd = Tensor::empty({c}, DType::F32, d);
        Tensor count = Tensor::empty({1}, DType::F32, d);
        Tensor rm = Tensor::zeros({c}, DType::F32, d);
        Tensor rv = floats(std::vector<float>(c, 1.0f), {c}, d);
        Tensor tracked = Tensor::zeros({}, DType::I64, d);
        ops::batch_norm_gather_stats(groups, 1e-5f, 0.1f, mean, invstd, count, rm, rv, tracked);
        Tensor y = Tensor::empty(xt.shape(), DType::F32, d),
               dx = Tensor::empty(xt.shape(), DType::F32, d);
        ops::batch_norm_elemt(xt, mean, invstd, floats(w, {c}, d), floats(b, {c}, d), y);
        Tensor sums = Tensor::empty({2 * c}, DType::F32, d);
        ops::batch_norm_backward_reduce(dyt, xt, mean, invstd, sums);
        ops::batch_norm_backward_elemt(dyt, xt, mean, invstd, floats(w, {c}, d), sums, count, dx);
        Tensor tracked_f =
            Tensor::from_floats({static_cast<float>(tracked.to(kCpu).data<int64_t>()[0])}, {1}, d);
        return {stats, mean, invstd, count, rm, rv, y, sums, dx, tracked_f};
      },
      {{1e-5, 1e-5},
       {1e-5, 1e-5},
       {1e-5, 1e-5},
       kExact,
       {1e-6, 1e-5},
       {1e-6, 1e-5},
       {1e-5, 1e-5},
       {1e-4, 1e-4},
       {1e-5, 1e-4},
       kExact});
}

// Shapes whose per-channel sums take the two-stage paths (Note [Batch-norm channel
// reductions]): several chunks per channel in NCHW, planes smaller and larger than a block,
// several column tiles and row chunks in NHWC, a channel count that is no multiple of 32.
TEST_F(CudaParity, BatchNormReductionsOverManyChunksInBothLayouts) {
  struct Case {
    int64_t n, c, h;
  };
  for (const Case& s : std::vector<Case>{{16, 3, 40}, {256, 4, 5}, {8, 40, 20}, {2, 70, 1}}) {
    for (const auto layout : {ops::ImageLayout::NCHW, ops::ImageLayout::NHWC}) {
      const int64_t numel = s.n * s.c * s.h * s.h;
      const auto x = uniform(numel, 70, 1.0f, 5.0f);  // offset: a two-pass variance is needed
      const auto dy = uniform(numel, 71);
      const Shape shape =
          layout == ops::ImageLayout::NHWC ? Shape{s.n, s.h, s.h, s.c} : Shape{s.n, s.c, s.h, s.h};
      const double terms = static_cast<double>(s.n * s.h * s.h);
      expect_parity("batch norm reductions n" + std::to_string(s.n) + " c" + std::to_string(s.c) +
                        " h" + std::to_string(s.h) +
                        (layout == ops::ImageLayout::NHWC ? " nhwc" : " nchw"),
                    [&](const Device& d) -> std::vector<Tensor> {
                      Tensor xt = floats(x, shape, d), dyt = floats(dy, shape, d);
                      Tensor stats = Tensor::empty({2 * s.c + 1}, DType::F32, d);
                      ops::batch_norm_stats(xt, stats, layout);
                      Tensor sums = Tensor::empty({2 * s.c}, DType::F32, d);
                      ops::batch_norm_backward_reduce(dyt, xt, stats.flat_view(0, {s.c}),
                                                      stats.flat_view(s.c, {s.c}), sums, layout);
                      return {stats, sums};
                    },
                    {{1e-5, 1e-5}, {2e-6 * terms + 1e-5, 1e-4}});
    }
  }
}

// The same ops in NHWC (--channels-last): cuDNN with NHWC strides, the NHWC kernels.
TEST_F(CudaParity, ChannelsLastImageOps) {
  const auto nhwc = ops::ImageLayout::NHWC;
  const int64_t n = 4, h = 8, c = 16, k = 32;
  const ops::Conv2dGeometry g{.stride = 2, .padding = 1};
  const int64_t p = g.out_extent(h, 3);
  const auto x = uniform(n * h * h * c, 60), w = uniform(k * c * 9, 61, -0.2f, 0.2f);
  const auto dy = uniform(n * p * p * k, 62);
  expect_parity("nhwc conv, batch norm and pooling",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor xt = floats(x, {n, h, h, c}, d), wt = floats(w, {k, c, 3, 3}, d);
                  Tensor dyt = floats(dy, {n, p, p, k}, d);
                  Tensor y = Tensor::empty({n, p, p, k}, DType::F32, d);
                  Tensor dx = Tensor::empty(xt.shape(), DType::F32, d),
                         dw = Tensor::empty(wt.shape(), DType::F32, d);
                  ops::conv2d_forward(xt, wt, y, g, nhwc);
                  ops::conv2d_backward_data(dyt, wt, dx, g, nhwc);
                  ops::conv2d_backward_weight(dyt, xt, dw, g, nhwc);
                  Tensor stats = Tensor::empty({2 * k + 1}, DType::F32, d);
                  ops::batch_norm_stats(y, stats, nhwc);
                  Tensor sums = Tensor::empty({2 * k}, DType::F32, d);
                  ops::batch_norm_backward_reduce(dyt, y, stats.flat_view(0, {k}),
                                                  stats.flat_view(k, {k}), sums, nhwc);
                  const int64_t q = g.out_extent(p, 3);
                  Tensor pooled = Tensor::empty({n, q, q, k}, DType::F32, d);
                  Tensor idx = Tensor::empty(pooled.shape(), DType::I32, d);
                  ops::max_pool2d_forward(y, pooled, idx, 3, g, nhwc);
                  Tensor avg = Tensor::empty({n, k}, DType::F32, d);
                  ops::global_avg_pool_forward(y, avg, nhwc);
                  Tensor back = Tensor::empty(xt.shape(), DType::F32, d);
                  Tensor as_nchw = floats(x, {n, c, h, h}, d);
                  ops::nchw_to_nhwc(as_nchw, back);
                  return {y, dx, dw, stats, sums, pooled, avg, back};
                },
                {{1e-4, 1e-4},
                 {1e-4, 1e-4},
                 {1e-3, 1e-4},
                 {1e-5, 1e-5},
                 {1e-3, 1e-4},
                 kExact,
                 {1e-6, 1e-5},
                 kExact});
}

TEST_F(CudaParity, MaxAndAveragePooling) {
  const int64_t n = 3, c = 8, h = 9;
  const ops::Conv2dGeometry g{.stride = 2, .padding = 1};
  const int64_t p = g.out_extent(h, 3);
  const auto x = uniform(n * c * h * h, 47);
  const auto dy = uniform(n * c * p * p, 48);
  const auto dpool = uniform(n * c, 49);
  expect_parity("pooling",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor xt = floats(x, {n, c, h, h}, d);
                  Tensor y = Tensor::empty({n, c, p, p}, DType::F32, d);
                  Tensor idx = Tensor::empty({n, c, p, p}, DType::I32, d);
                  ops::max_pool2d_forward(xt, y, idx, 3, g);
                  Tensor dx = Tensor::empty(xt.shape(), DType::F32, d);
                  ops::max_pool2d_backward(floats(dy, {n, c, p, p}, d), idx, dx, 3, g);
                  Tensor avg = Tensor::empty({n, c}, DType::F32, d);
                  ops::global_avg_pool_forward(xt, avg);
                  Tensor davg = Tensor::empty(xt.shape(), DType::F32, d);
                  ops::global_avg_pool_backward(floats(dpool, {n, c}, d), davg);
                  std::vector<float> idx_f;
                  for (int32_t i : idx.to(kCpu).to_ints()) idx_f.push_back(static_cast<float>(i));
                  return {y, Tensor::from_floats(idx_f, {n, c, p, p}, d), dx, avg, davg};
                },
                {kExact, kExact, {1e-6, 1e-6}, {1e-6, 1e-5}, {1e-7, 1e-6}});
}

// Shapes where the walked indices (Note [Incremental index walks], core/cuda/cuda_common.cuh)
// and the float4 paths of the batch-norm element-wise kernels (Note [Batch-norm element-wise
// kernels], core/cuda/cuda_norm_pool.cu) could go wrong where a divide would not: odd channel
// counts, planes of 49, 9 and 1 values (no float4 groups in NCHW), channel counts that are
// no multiple of 4 (none in NHWC), views 4 bytes off alignment, and batches larger than the
// capped grid (4096 x 256 threads, or float4s), so that every thread's walk advances and
// carries. The per-channel inputs are given, so only the element-wise kernels are compared.
TEST_F(CudaParity, BatchNormElementwiseAtOddShapesAndOffsets) {
  struct Case {
    int64_t n, c, h, offset;
  };
  const std::vector<Case> cases = {{3, 5, 7, 0},    {2, 8, 6, 0},   {2, 12, 3, 0},
                                   {5, 3, 20, 0},   {4, 6, 1, 0},   {2, 8, 6, 1},
                                   {16, 33, 45, 0}, {8, 64, 96, 0}, {8, 64, 96, 3}};
  for (const Case& s : cases) {
    for (const auto layout : {ops::ImageLayout::NCHW, ops::ImageLayout::NHWC}) {
      const int64_t numel = s.n * s.c * s.h * s.h, total = numel + s.offset;
      const Shape shape = ops::image_shape({s.n, s.c, s.h, s.h}, layout);
      const auto x = uniform(total, 90, 1.0f, 5.0f), dy = uniform(total, 91);
      const auto mean = uniform(s.c, 92, 2.0f, 4.0f), invstd = uniform(s.c, 93, 0.5f, 2.0f);
      const auto w = uniform(s.c, 94, 0.5f, 1.5f), b = uniform(s.c, 95);
      const auto sums = uniform(2 * s.c, 96, -10.0f, 10.0f);
      const std::vector<float> count = {static_cast<float>(numel / s.c)};
      expect_parity(
          "batch norm elemt n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " h" +
              std::to_string(s.h) + " offset " + std::to_string(s.offset) + " " +
              std::string(enum_name(layout)),
          [&](const Device& d) -> std::vector<Tensor> {
            auto view = [&](const Tensor& buffer) { return buffer.flat_view(s.offset, shape); };
            const Tensor xt = view(floats(x, {total}, d)), dyt = view(floats(dy, {total}, d));
            const Tensor y = Tensor::zeros({total}, DType::F32, d);
            const Tensor dx = Tensor::zeros({total}, DType::F32, d);
            const Tensor tm = floats(mean, {s.c}, d), ti = floats(invstd, {s.c}, d);
            const Tensor tw = floats(w, {s.c}, d);
            ops::batch_norm_elemt(xt, tm, ti, tw, floats(b, {s.c}, d), view(y), layout);
            ops::batch_norm_backward_elemt(dyt, xt, tm, ti, tw, floats(sums, {2 * s.c}, d),
                                           floats(count, {1}, d), view(dx), layout);
            return {y, dx};
          },
          {{1e-5, 1e-5}, {1e-5, 1e-4}});
    }
  }
}

// Pooling and the layout transposes at odd shapes in both layouts (walked coordinates, 32-bit
// window arithmetic), including batches larger than the capped grid.
TEST_F(CudaParity, PoolingAtOddShapesInBothLayouts) {
  struct Case {
    int64_t n, c, h, kernel, stride, padding;
  };
  const std::vector<Case> cases = {
      {3, 5, 13, 3, 2, 1}, {2, 3, 9, 2, 2, 0}, {1, 7, 5, 3, 1, 1}, {4, 7, 200, 3, 1, 1}};
  for (const Case& s : cases) {
    for (const auto layout : {ops::ImageLayout::NCHW, ops::ImageLayout::NHWC}) {
      const ops::Conv2dGeometry g{.stride = s.stride, .padding = s.padding};
      const int64_t p = g.out_extent(s.h, s.kernel);
      const Shape in_shape = ops::image_shape({s.n, s.c, s.h, s.h}, layout);
      const Shape out_shape = ops::image_shape({s.n, s.c, p, p}, layout);
      const auto x = uniform(shape_numel(in_shape), 97);
      const auto dy = uniform(shape_numel(out_shape), 98);
      const auto dpool = uniform(s.n * s.c, 99);
      expect_parity("pooling n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " h" +
                        std::to_string(s.h) + " k" + std::to_string(s.kernel) + " s" +
                        std::to_string(s.stride) + " " + std::string(enum_name(layout)),
                    [&](const Device& d) -> std::vector<Tensor> {
                      Tensor xt = floats(x, in_shape, d);
                      Tensor y = Tensor::empty(out_shape, DType::F32, d);
                      Tensor idx = Tensor::empty(out_shape, DType::I32, d);
                      ops::max_pool2d_forward(xt, y, idx, s.kernel, g, layout);
                      Tensor dx = Tensor::empty(in_shape, DType::F32, d);
                      ops::max_pool2d_backward(floats(dy, out_shape, d), idx, dx, s.kernel, g,
                                               layout);
                      Tensor avg = Tensor::empty({s.n, s.c}, DType::F32, d);
                      ops::global_avg_pool_forward(xt, avg, layout);
                      Tensor davg = Tensor::empty(in_shape, DType::F32, d);
                      ops::global_avg_pool_backward(floats(dpool, {s.n, s.c}, d), davg, layout);
                      std::vector<float> idx_f;
                      for (int32_t i : idx.to(kCpu).to_ints())
                        idx_f.push_back(static_cast<float>(i));
                      return {y, Tensor::from_floats(idx_f, out_shape, d), dx, avg, davg};
                    },
                    {kExact, kExact, {1e-6, 1e-6}, {1e-5, 1e-5}, {1e-7, 1e-6}});
    }
  }
  // More planes than the grid has threads: global average pooling's walk over (channel,
  // image) carries too.
  for (const auto layout : {ops::ImageLayout::NCHW, ops::ImageLayout::NHWC}) {
    const int64_t n = 1100, c = 1001;
    const Shape shape = ops::image_shape({n, c, 1, 1}, layout);
    const auto x = uniform(n * c, 100);
    expect_parity("global average pooling of 1x1 planes",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor avg = Tensor::empty({n, c}, DType::F32, d);
                    ops::global_avg_pool_forward(floats(x, shape, d), avg, layout);
                    Tensor dx = Tensor::empty(shape, DType::F32, d);
                    ops::global_avg_pool_backward(avg, dx, layout);
                    return {avg, dx};
                  },
                  {kExact});
  }
}

TEST_F(CudaParity, LayoutTransposesAtOddShapes) {
  struct Case {
    int64_t n, c, h;
  };
  for (const Case& s :
       std::vector<Case>{{3, 5, 7}, {2, 1, 3}, {1, 3, 1}, {5, 33, 13}, {4, 7, 200}}) {
    const auto x = uniform(s.n * s.c * s.h * s.h, 101);
    const std::string what = "nchw_to_nhwc n" + std::to_string(s.n) + " c" + std::to_string(s.c) +
                             " h" + std::to_string(s.h);
    expect_parity(what,
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor y = Tensor::empty({s.n, s.h, s.h, s.c}, DType::F32, d);
                    ops::nchw_to_nhwc(floats(x, {s.n, s.c, s.h, s.h}, d), y);
                    return {y};
                  },
                  {kExact});
    // The inverse (cuDNN's filter layouts use it; no op exposes it): back to x bit for bit.
    Tensor nhwc = Tensor::empty({s.n, s.h, s.h, s.c}, DType::F32, kGpu);
    ops::nchw_to_nhwc(floats(x, {s.n, s.c, s.h, s.h}, kGpu), nhwc);
    Tensor back = Tensor::empty({s.n, s.c, s.h, s.h}, DType::F32, kGpu);
    gpu::launch_nhwc_to_nchw(nhwc.data<float>(), back.data<float>(),
                             {s.n, s.c, s.h * s.h, /*nhwc=*/false},
                             gpu::current_stream_handle(kGpu));
    EXPECT_EQ(back.to_floats(), x) << what << ", then back";
  }
}

// ==== Embedding =========================================================================

TEST_F(CudaParity, Embedding) {
  const int64_t n = 777, vocab = 50, channels = 37;  // many repeated ids
  const auto ids = uniform_ints(n, 23, static_cast<int32_t>(vocab));
  const auto table = uniform(vocab * channels, 24);
  const auto dout = uniform(n * channels, 25);
  const auto dtable0 = uniform(vocab * channels, 26);
  expect_parity(
      "embedding forward",
      [&](const Device& d) -> std::vector<Tensor> {
        Tensor out = Tensor::empty({n, channels}, DType::F32, d);
        ops::embedding_forward(ints(ids, {n}, d), floats(table, {vocab, channels}, d), out);
        return {out};
      },
      {kExact});
  // Accumulates into dtable; atomics add repeated ids in any order.
  expect_parity(
      "embedding backward",
      [&](const Device& d) -> std::vector<Tensor> {
        Tensor dtable = floats(dtable0, {vocab, channels}, d);
        ops::embedding_backward(floats(dout, {n, channels}, d), ints(ids, {n}, d), dtable);
        return {dtable};
      },
      {{1e-5, 1e-5}});
}

// ==== Attention =========================================================================

TEST_F(CudaParity, Attention) {
  struct Case {
    int64_t b, t, c;
    int h;
  };
  for (const Case& k : {Case{2, 37, 48, 4}, Case{1, 128, 64, 2}, Case{3, 1, 12, 3}}) {
    const Shape qkv_shape{k.b, k.t, 3 * k.c};
    const Shape out_shape{k.b, k.t, k.c};
    const Shape att_shape{k.b, k.h, k.t, k.t};
    const auto qkv = uniform(shape_numel(qkv_shape), 27, -2.0f, 2.0f);
    const auto dout = uniform(shape_numel(out_shape), 28);
    Tensor att_ref = Tensor::empty(att_shape, DType::F32, kCpu);
    Tensor out_ref = Tensor::empty(out_shape, DType::F32, kCpu);
    ops::attention_forward(floats(qkv, qkv_shape, kCpu), out_ref, att_ref, k.h);
    const auto att = att_ref.to_floats();
    const std::string what = "attention B=" + std::to_string(k.b) + " T=" + std::to_string(k.t) +
                             " C=" + std::to_string(k.c) + " H=" + std::to_string(k.h);
    expect_parity(what + " forward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor out = Tensor::empty(out_shape, DType::F32, d);
                    Tensor a = Tensor::empty(att_shape, DType::F32, d);
                    ops::attention_forward(floats(qkv, qkv_shape, d), out, a, k.h);
                    return {out, a};
                  },
                  {{1e-5, 1e-4}, {1e-6, 1e-4}});
    expect_parity(what + " backward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    // Overwritten, not accumulated: start from garbage.
                    Tensor dqkv = floats(std::vector<float>(qkv.size(), 7.0f), qkv_shape, d);
                    ops::attention_backward(floats(dout, out_shape, d), floats(qkv, qkv_shape, d),
                                            floats(att, att_shape, d), dqkv, k.h);
                    return {dqkv};
                  },
                  {{2e-5, 1e-4}});
    // The mask is exact: no probability above the diagonal.
    Tensor a = Tensor::empty(att_shape, DType::F32, kGpu);
    Tensor out = Tensor::empty(out_shape, DType::F32, kGpu);
    ops::attention_forward(floats(qkv, qkv_shape, kGpu), out, a, k.h);
    const auto got = a.to_floats();
    for (int64_t row = 0; row < k.b * k.h * k.t; ++row) {
      const int64_t t = row % k.t;
      for (int64_t s = t + 1; s < k.t; ++s) {
        ASSERT_EQ(got[static_cast<size_t>(row * k.t + s)], 0.0f) << what << " row " << row;
      }
    }
  }
}

TEST_F(CudaParity, FlashAttention) {
  // Every supported head size, T around the 64-row block and the 32-row tile, several heads
  // and batches (grid.y = B*H).
  struct Case {
    int64_t b, t, c;
    int h;
  };
  // head_dim: 16, 32, 16, 128, 128, 128, 64, 64.
  for (const Case& k :
       {Case{2, 37, 64, 4}, Case{1, 128, 64, 2}, Case{3, 1, 48, 3}, Case{1, 65, 128, 1},
        Case{2, 200, 256, 2}, Case{1, 96, 1536, 12}, Case{2, 100, 128, 2}, Case{1, 70, 192, 3}}) {
    const Shape qkv_shape{k.b, k.t, 3 * k.c};
    const Shape out_shape{k.b, k.t, k.c};
    const Shape lse_shape{k.b, k.h, k.t};
    const auto qkv = uniform(shape_numel(qkv_shape), 29, -2.0f, 2.0f);
    const auto dout = uniform(shape_numel(out_shape), 30);
    Tensor out_ref = Tensor::empty(out_shape, DType::F32, kCpu);
    Tensor lse_ref = Tensor::empty(lse_shape, DType::F32, kCpu);
    ops::flash_attention_forward(floats(qkv, qkv_shape, kCpu), out_ref, lse_ref, k.h);
    const auto out_host = out_ref.to_floats(), lse_host = lse_ref.to_floats();
    const std::string what = "flash attention B=" + std::to_string(k.b) +
                             " T=" + std::to_string(k.t) + " C=" + std::to_string(k.c) +
                             " H=" + std::to_string(k.h);
    expect_parity(what + " forward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor out = Tensor::empty(out_shape, DType::F32, d);
                    Tensor lse = Tensor::empty(lse_shape, DType::F32, d);
                    ops::flash_attention_forward(floats(qkv, qkv_shape, d), out, lse, k.h);
                    return {out, lse};
                  },
                  {{1e-5, 1e-4}, {1e-5, 1e-5}});
    expect_parity(what + " backward",
                  [&](const Device& d) -> std::vector<Tensor> {
                    Tensor dqkv = floats(std::vector<float>(qkv.size(), 7.0f), qkv_shape, d);
                    ops::flash_attention_backward(
                        floats(dout, out_shape, d), floats(qkv, qkv_shape, d),
                        floats(out_host, out_shape, d), floats(lse_host, lse_shape, d), dqkv, k.h);
                    return {dqkv};
                  },
                  {{2e-5, 1e-4}});
  }
}

TEST_F(CudaParity, FlashAttentionRejectsUnsupportedHeadSizes) {
  const Shape qkv_shape{1, 8, 3 * 24};  // head_dim 24
  Tensor out = Tensor::empty({1, 8, 24}, DType::F32, kGpu);
  Tensor lse = Tensor::empty({1, 1, 8}, DType::F32, kGpu);
  EXPECT_THROW(ops::flash_attention_forward(
                   floats(uniform(shape_numel(qkv_shape), 31), qkv_shape, kGpu), out, lse, 1),
               Error);
}

// ==== Cross-entropy =====================================================================

TEST_F(CudaParity, CrossEntropy) {
  for (auto [n, v] : std::vector<std::pair<int64_t, int64_t>>{{64, 1000}, {8, 50257}, {1, 3}}) {
    const auto logits = uniform(n * v, 29, -8.0f, 8.0f);
    const auto targets = uniform_ints(n, 30, static_cast<int32_t>(v));
    Tensor loss_ref = Tensor::empty({1}, DType::F32, kCpu);
    Tensor probs_ref = Tensor::empty({n, v}, DType::F32, kCpu);
    ops::cross_entropy_forward(floats(logits, {n, v}, kCpu), ints(targets, {n}, kCpu), loss_ref,
                               probs_ref);
    const auto probs = probs_ref.to_floats();
    const std::string what = "cross_entropy [" + std::to_string(n) + ", " + std::to_string(v) + "]";
    expect_parity(
        what + " forward",
        [&](const Device& d) -> std::vector<Tensor> {
          Tensor loss = Tensor::empty({1}, DType::F32, d);
          Tensor p = Tensor::empty({n, v}, DType::F32, d);
          ops::cross_entropy_forward(floats(logits, {n, v}, d), ints(targets, {n}, d), loss, p);
          return {loss, p};
        },
        {{1e-5, 1e-5}, {1e-8, 1e-5}});
    expect_parity(
        what + " backward",
        [&](const Device& d) -> std::vector<Tensor> {
          Tensor dlogits = Tensor::empty({n, v}, DType::F32, d);
          ops::cross_entropy_backward(floats({1.7f}, {1}, d), floats(probs, {n, v}, d),
                                      ints(targets, {n}, d), dlogits);
          return {dlogits};
        },
        // The CPU computes p*g - g for the target and the GPU (p - 1)*g: they differ by an
        // ulp of g = dloss / n, which can be large next to a target probability near 1.
        {{2e-7 * 1.7 / static_cast<double>(n), 1e-5}});
    // The loss reduction is deterministic.
    Tensor gl = floats(logits, {n, v}, kGpu);
    Tensor gt = ints(targets, {n}, kGpu);
    Tensor p = Tensor::empty({n, v}, DType::F32, kGpu);
    Tensor l1 = Tensor::empty({1}, DType::F32, kGpu);
    Tensor l2 = Tensor::empty({1}, DType::F32, kGpu);
    ops::cross_entropy_forward(gl, gt, l1, p);
    ops::cross_entropy_forward(gl, gt, l2, p);
    EXPECT_EQ(l1.item(), l2.item()) << what << " loss is not reproducible";
  }
}

// ==== Copies ============================================================================

TEST_F(CudaParity, CopiesAreBitExact) {
  const int64_t n = 12345;
  const auto x = uniform(n, 31);
  Tensor host = floats(x, {n}, kCpu);
  Tensor dev = Tensor::empty({n}, DType::F32, kGpu);
  ops::copy(host, dev);  // H2D from pageable memory
  Tensor dev2 = Tensor::empty({n}, DType::F32, kGpu);
  ops::copy(dev, dev2);  // D2D
  Tensor back = Tensor::empty({n}, DType::F32, kCpu);
  ops::copy(dev2, back);  // D2H into pageable memory: valid on return, no sync needed
  EXPECT_EQ(std::memcmp(back.raw_data(), x.data(), x.size() * sizeof(float)), 0);
  // A 2-byte dtype and a view at an odd offset.
  Tensor bf = Tensor::empty({n}, DType::BF16, kCpu);
  ops::cast(host, bf);
  Tensor bf_dev = Tensor::empty({n + 1}, DType::BF16, kGpu).flat_view(1, {n});
  ops::copy(bf, bf_dev);
  Tensor bf_back = Tensor::empty({n}, DType::BF16, kCpu);
  ops::copy(bf_dev, bf_back);
  EXPECT_EQ(std::memcmp(bf_back.raw_data(), bf.raw_data(), bf.nbytes()), 0);
}

TEST_F(CudaParity, PinnedCopiesAreAsyncAndCorrect) {
  const int64_t n = 1 << 20;
  const auto x = uniform(n, 32);
  Tensor pinned_in = Tensor::empty_pinned({n}, DType::F32);
  Tensor pinned_out = Tensor::empty_pinned({n}, DType::F32);
  ASSERT_TRUE(pinned_in.storage()->pinned());
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, pinned_in.raw_data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "empty_pinned did not return page-locked memory";
  std::memcpy(pinned_in.raw_data(), x.data(), x.size() * sizeof(float));

  auto stream = make_stream(kGpu, "pinned-copy");
  StreamGuard guard(stream);
  Tensor dev = Tensor::empty({n}, DType::F32, kGpu);
  ops::copy(pinned_in, dev);  // async H2D
  ops::scale(dev, 2.0f);
  ops::copy(dev, pinned_out);  // async D2H: only valid after a sync
  stream->synchronize();
  const float* got = pinned_out.data<float>();
  for (int64_t i = 0; i < n; i += 997) {
    ASSERT_EQ(got[i], 2.0f * x[static_cast<size_t>(i)]) << "element " << i;
  }
}

TEST_F(CudaParity, PeerCopy) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "peer copies need 2 GPUs, this machine has " << cuda_device_count();
  const int64_t n = 4097;
  const auto x = uniform(n, 33);
  Tensor a = floats(x, {n}, Device::cuda(0));
  Tensor b = Tensor::empty({n}, DType::F32, Device::cuda(1));
  ops::copy(a, b);
  EXPECT_TRUE(all_close(x, b.to_floats(), kExact));
  // The copy enabled peer access where the pair supports it, and the context says so.
  const SystemInfo info = system_info();
  const bool enabled = std::find(info.peer_access_enabled.begin(), info.peer_access_enabled.end(),
                                 std::pair<int, int>{0, 1}) != info.peer_access_enabled.end();
  EXPECT_EQ(enabled, static_cast<bool>(info.peer_access[0][1]));
}

// A NaN that enters an op comes out of it on CUDA as on CPU (tests/core/test_nan_propagation
// checks the CPU op by op): each op runs on both devices with one NaN in its input, and the
// NaN counts of the outputs must agree, the fused cuBLASLt epilogues included.
TEST_F(CudaParity, NanPropagatesAsOnCpu) {
  auto with_nan = [](std::vector<float> v) {
    v[1] = std::numeric_limits<float>::quiet_NaN();
    return v;
  };
  auto nans = [](const Tensor& t) {
    int64_t n = 0;
    for (float v : t.to_floats()) n += std::isnan(v) ? 1 : 0;
    return n;
  };
  const auto x = with_nan(uniform(64 * 32, 71));
  const auto w = uniform(32 * 48, 72);
  auto run = [&](const Device& d) {
    std::vector<int64_t> counts;
    Tensor tx = floats(x, {64, 32}, d), tw = floats(w, {32, 48}, d);
    for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
      Tensor c = Tensor::empty({64, 48}, DType::F32, d);
      ops::gemm(tx, false, tw, false, c, 1.0f, 0.0f, floats(uniform(48, 73), {48}, d), act);
      counts.push_back(nans(c));
    }
    Tensor y = Tensor::empty({64, 32}, DType::F32, d);
    ops::relu_forward(tx, y);
    counts.push_back(nans(y));
    ops::gelu_forward(tx, y);
    counts.push_back(nans(y));
    ops::softmax_forward(tx, y);
    counts.push_back(nans(y));
    Tensor mean = Tensor::empty({64}, DType::F32, d), rstd = Tensor::empty({64}, DType::F32, d);
    ops::layernorm_forward(tx, floats(uniform(32, 74), {32}, d), floats(uniform(32, 75), {32}, d),
                           y, mean, rstd, 1e-5f);
    counts.push_back(nans(y));
    return counts;
  };
  const auto cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  EXPECT_EQ(gpu, cpu) << "NaN counts per op: gemm, gemm+relu, gemm+gelu, relu, gelu, softmax, "
                         "layernorm";
  EXPECT_GT(cpu[1], 0) << "the CPU's fused ReLU keeps the NaN";
}

// ==== Optimizers ========================================================================

TEST_F(CudaParity, SgdStep) {
  const int64_t n = 5003;
  const auto p0 = uniform(n, 34);
  const auto g = uniform(n, 35);
  const auto buf0 = uniform(n, 36);
  const Tolerance tol{1e-7, 1e-6};  // FMA contraction on the GPU
  expect_parity("sgd without momentum",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor p = floats(p0, {n}, d);
                  ops::sgd_step(p, floats(g, {n}, d), Tensor(), 0.1f, 0.0f, 0.01f, true);
                  return {p};
                },
                {tol});
  expect_parity("sgd with momentum, first and later steps",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor p = floats(p0, {n}, d);
                  Tensor buf = floats(buf0, {n}, d);
                  Tensor grad = floats(g, {n}, d);
                  ops::sgd_step(p, grad, buf, 0.1f, 0.9f, 0.01f, /*first_step=*/true);
                  ops::sgd_step(p, grad, buf, 0.1f, 0.9f, 0.01f, /*first_step=*/false);
                  return {p, buf};
                },
                {tol});
}

TEST_F(CudaParity, AdamwStep) {
  const int64_t n = 5003;
  const auto p0 = uniform(n, 37);
  const auto g = uniform(n, 38);
  expect_parity("adamw, 3 steps",
                [&](const Device& d) -> std::vector<Tensor> {
                  Tensor p = floats(p0, {n}, d);
                  Tensor m = Tensor::zeros({n}, DType::F32, d);
                  Tensor v = Tensor::zeros({n}, DType::F32, d);
                  Tensor grad = floats(g, {n}, d);
                  for (int64_t step = 1; step <= 3; ++step) {
                    ops::adamw_step(p, grad, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
                  }
                  return {p, m, v};
                },
                {{1e-6, 1e-5}});
}

// Note [Multi-tensor apply] (core/cuda/cuda_optim.cu): the list steps against the per-tensor
// steps on the GPU, bit for bit. The list spans several launches: more tensors than a table
// has slots (36), a tensor of several chunks (65536 elements), one that fills a table's 320
// chunks and goes on in the next, empty tensors, and a parameter view 4 bytes off alignment.
std::vector<int64_t> multi_tensor_sizes() {
  std::vector<int64_t> sizes = {1, 3, 1000, 70000, 0, 65536, 65537};
  for (int i = 0; i < 40; ++i) sizes.push_back(7 + i);
  sizes.push_back(320 * 65536 + 5);
  sizes.push_back(3);
  return sizes;
}

// Tensor i of `sizes`, on kGpu, from seed + i; with `offset`, a view that far into its buffer.
std::vector<Tensor> gpu_tensors(const std::vector<int64_t>& sizes, uint64_t seed,
                                int64_t offset_of_first = 0) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t offset = i == 0 ? offset_of_first : 0;
    out.push_back(floats(uniform(sizes[i] + offset, seed + i), {sizes[i] + offset}, kGpu)
                      .flat_view(offset, {sizes[i]}));
  }
  return out;
}

::testing::AssertionResult same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].to_floats(), y = b[i].to_floats();
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "tensor " << i << " (" << a[i].numel() << " elements) differs";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(CudaParity, SgdStepMultiIsThePerTensorStepBitForBit) {
  const auto sizes = multi_tensor_sizes();
  const auto grads = gpu_tensors(sizes, 1000);
  for (float momentum : {0.0f, 0.9f}) {
    auto p_list = gpu_tensors(sizes, 2000, 1), p_each = gpu_tensors(sizes, 2000, 1);
    auto b_list = gpu_tensors(sizes, 3000), b_each = gpu_tensors(sizes, 3000);
    for (bool first : {true, false}) {
      ops::sgd_step_multi(p_list, grads, b_list, 0.1f, momentum, 0.01f, first);
      for (size_t i = 0; i < sizes.size(); ++i) {
        ops::sgd_step(p_each[i], grads[i], b_each[i], 0.1f, momentum, 0.01f, first);
      }
    }
    EXPECT_TRUE(same_bits(p_list, p_each)) << "parameters, momentum " << momentum;
    EXPECT_TRUE(same_bits(b_list, b_each)) << "momentum buffers, momentum " << momentum;
  }
}

TEST_F(CudaParity, AdamwStepMultiIsThePerTensorStepBitForBit) {
  const auto sizes = multi_tensor_sizes();
  const auto grads = gpu_tensors(sizes, 4000);
  auto p_list = gpu_tensors(sizes, 5000, 1), p_each = gpu_tensors(sizes, 5000, 1);
  auto m_list = gpu_tensors(sizes, 6000), m_each = gpu_tensors(sizes, 6000);
  std::vector<Tensor> v_list, v_each;
  for (int64_t n : sizes) {
    v_list.push_back(Tensor::zeros({n}, DType::F32, kGpu));
    v_each.push_back(Tensor::zeros({n}, DType::F32, kGpu));
  }
  for (int64_t step = 1; step <= 2; ++step) {
    ops::adamw_step_multi(p_list, grads, m_list, v_list, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
    for (size_t i = 0; i < sizes.size(); ++i) {
      ops::adamw_step(p_each[i], grads[i], m_each[i], v_each[i], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f,
                      step);
    }
  }
  EXPECT_TRUE(same_bits(p_list, p_each)) << "parameters";
  EXPECT_TRUE(same_bits(m_list, m_each)) << "first moments";
  EXPECT_TRUE(same_bits(v_list, v_each)) << "second moments";
}

// ==== Streams, events, allocator ========================================================

// --cuda-graph's mechanism on CUDA: a captured sequence (a cuBLASLt GEMM with a fused
// epilogue, element-wise ops and a temporary allocated inside the capture) replays to the
// same bits as running it eagerly, reads its inputs' current contents at each replay, and
// the temporary outlives its handle.
TEST_F(CudaParity, GraphCaptureReplaysTheEagerResult) {
  const int64_t m = 64, n = 96, k = 80;
  const auto a_host = uniform(m * k, 41), b_host = uniform(k * n, 42), bias = uniform(n, 43);
  // Every input exists before the capture: a host-to-device copy inside it would be a
  // synchronising call, which ends the capture.
  const Tensor bias_t = floats(bias, {n}, kGpu);
  auto step = [&](const Tensor& a, const Tensor& b, const Tensor& acc) {
    Tensor tmp = Tensor::empty({m, n}, DType::F32, kGpu);
    ops::gemm(a, false, b, false, tmp, 1.0f, 0.0f, bias_t, ops::Activation::GeLU);
    ops::axpy(0.5f, tmp, acc);
  };
  Tensor a = floats(a_host, {m, k}, kGpu), b = floats(b_host, {k, n}, kGpu);
  Tensor eager = Tensor::zeros({m, n}, DType::F32, kGpu);
  step(a, b, eager);  // also warms the GEMM plan and the workspace
  step(a, b, eager);
  Tensor acc = Tensor::zeros({m, n}, DType::F32, kGpu);
  Stream& s = current_stream(kGpu);
  s.synchronize();
  s.begin_capture();
  try {
    step(a, b, acc);
  } catch (...) {
    s.end_capture();  // leave capture mode, so that the tests after this one still run
    throw;
  }
  auto graph = s.end_capture();
  s.synchronize();
  EXPECT_EQ(acc.to_floats(), std::vector<float>(m * n, 0.0f)) << "capture must not run the work";
  graph->replay(s);
  graph->replay(s);
  const auto got = acc.to_floats(), want = eager.to_floats();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  // New input data in the same tensor reaches the next replay.
  ops::fill(a, 0.0f);
  ops::zero(acc);
  graph->replay(s);
  std::vector<float> gelu_bias(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float x = bias[static_cast<size_t>(j)];
      gelu_bias[static_cast<size_t>(i * n + j)] =
          0.25f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    }
  }
  EXPECT_TRUE(all_close(gelu_bias, acc.to_floats(), {1e-4, 1e-4}));
}

TEST_F(CudaParity, StreamsAndEvents) {
  auto producer = make_stream(kGpu, "producer");
  auto consumer = make_stream(kGpu, "consumer");
  ASSERT_NE(producer->native_handle(), nullptr);
  EXPECT_THROW(producer->enqueue([] {}), Error);

  const int64_t n = 1 << 22;
  Tensor data;
  Event start = Event::create(kGpu);
  Event done = Event::create(kGpu);
  {
    StreamGuard guard(producer);
    data = Tensor::empty({n}, DType::F32, kGpu);
    start.record(*producer);
    ops::fill(data, 1.0f);
    for (int i = 0; i < 20; ++i) ops::scale(data, 1.5f);
    done.record(*producer);
  }
  // The consumer waits for the producer on the GPU, then reads its result.
  consumer->wait(done);
  Tensor copy;
  {
    StreamGuard guard(consumer);
    copy = Tensor::empty({n}, DType::F32, kGpu);
    ops::copy(data, copy);
    Tensor sum = Tensor::empty({1}, DType::F32, kGpu);
    ops::sum_all(copy, sum);
    consumer->synchronize();
    const double expected = static_cast<double>(n) * std::pow(1.5, 20);
    EXPECT_NEAR(sum.item(), expected, expected * 1e-5);
  }
  done.synchronize();
  EXPECT_TRUE(done.query());
  const double ms = start.elapsed_ms(done);
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60'000.0);
  // The producer's data lives in the producer's pool; keep it alive until the consumer is
  // done, as core/allocator.h requires.
  producer->synchronize();

  // Waiting on a default (complete) event or on a CPU event recorded on an executor.
  consumer->wait(Event());
  std::atomic<bool> cpu_work_done{false};
  auto executor = make_stream(kCpu, "cpu-executor", StreamKind::Executor);
  executor->enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cpu_work_done = true;
  });
  Event cpu_event = Event::create(kCpu);
  cpu_event.record(*executor);
  consumer->wait(cpu_event);
  EXPECT_TRUE(cpu_work_done) << "a CUDA stream went past a CPU event that had not completed";
  executor->synchronize();
}

TEST_F(CudaParity, DeviceAllocatorReusesAndTracksPeak) {
  CachingAllocator& alloc = device_allocator(kGpu);
  const auto pool = reinterpret_cast<uintptr_t>(current_stream(kGpu).native_handle());
  const size_t mib = size_t{1} << 20;

  void* p = alloc.allocate(mib, pool);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << "device memory must not be managed or host";
  EXPECT_EQ(attr.device, 0);
  alloc.free(p);

  const MemoryStats before = alloc.stats();
  void* q = alloc.allocate(mib, pool);
  const MemoryStats after = alloc.stats();
  EXPECT_EQ(q, p) << "a freed block of the same size and pool was not reused";
  EXPECT_EQ(after.num_cache_hits, before.num_cache_hits + 1);
  EXPECT_EQ(after.num_backend_allocs, before.num_backend_allocs);

  // Another stream's pool never gets this stream's block.
  alloc.free(q);
  void* other = alloc.allocate(mib, pool + 1);
  EXPECT_NE(other, q);
  alloc.free(other);

  alloc.reset_peak();
  const int64_t base = alloc.stats().current_bytes;
  void* x = alloc.allocate(4 * mib, pool);
  void* y = alloc.allocate(4 * mib, pool);
  EXPECT_GE(alloc.stats().peak_bytes, base + static_cast<int64_t>(8 * mib));
  alloc.free(x);
  alloc.free(y);
  EXPECT_EQ(alloc.stats().current_bytes, base);
  EXPECT_GE(alloc.stats().peak_bytes, base + static_cast<int64_t>(8 * mib));
}

}  // namespace
}  // namespace ddpb
