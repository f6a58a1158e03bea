#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/system_info.h"
#include "test_util.h"

namespace ddpb {
namespace {

TEST(Tensor, ViewsShareStorageWithOffsets) {
  Tensor base = Tensor::from_floats({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  Tensor v = base.flat_view(2, {2, 2});
  EXPECT_TRUE(v.shares_storage_with(base));
  EXPECT_EQ(v.to_floats(), (std::vector<float>{2, 3, 4, 5}));
  ops::fill(v, 9.0f);
  EXPECT_EQ(base.to_floats(), (std::vector<float>{0, 1, 9, 9, 9, 9, 6, 7}));
  Tensor rows = base.view({4, 2}).narrow(1, 2);
  EXPECT_EQ(rows.to_floats(), (std::vector<float>{9, 9, 9, 9}));
  EXPECT_THROW(base.flat_view(6, {3}), Error);
  EXPECT_THROW(base.view({3, 3}), Error);
}

TEST(Tensor, CastRoundTripsThroughHalfTypes) {
  Tensor f = Tensor::from_floats({1.0f, -2.5f, 3.14159f, 65504.0f, 1e-3f}, {5});
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor h = Tensor::empty({5}, t, Device::cpu());
    ops::cast(f, h);
    auto back = h.to_floats();
    EXPECT_TRUE(testing::all_close(back, f.to_floats(), 0, t == DType::BF16 ? 8e-3f : 1e-3f));
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
}

// The bulk fp16 conversions (F16C where the CPU has it) agree bit for bit with the scalar
// reference on normals, subnormals, ties, overflow to infinity and signed zeros.
TEST(Tensor, BulkHalfConversionsMatchTheScalarOnes) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -2.5f,
                               65504.0f,
                               65520.0f,
                               1e6f,
                               -1e6f,
                               6.1e-5f,
                               5.96e-8f,
                               2.98e-8f,
                               1e-10f,
                               1.00048828125f,
                               1.000732421875f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 1000; ++i) values.push_back(std::ldexp(float(i % 97) - 48.5f, (i % 40) - 30));
  std::vector<uint16_t> bulk(values.size());
  f32_to_f16(values.data(), bulk.data(), static_cast<int64_t>(values.size()));
  std::vector<float> back(values.size());
  f16_to_f32(bulk.data(), back.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bulk[i], float_to_f16(values[i])) << values[i];
    const float ref = f16_to_float(bulk[i]);
    EXPECT_EQ(std::memcmp(&back[i], &ref, sizeof(float)), 0) << values[i];
  }
}

TEST(Device, ParsesAndRejects) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu(0));
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  EXPECT_THROW(parse_device("gpu"), UsageError);
  EXPECT_THROW(parse_device("cuda:-1"), UsageError);
  EXPECT_THROW(parse_device("cuda:x"), UsageError);
}

TEST(Device, AListIsParsedEntryByEntry) {
  EXPECT_EQ(parse_device_list("cuda:0,cuda:0,cpu:2"),
            (std::vector<Device>{Device::cuda(0), Device::cuda(0), Device::cpu(2)}));
  EXPECT_EQ(parse_device_list("cpu"), std::vector<Device>{Device::cpu(0)});
  EXPECT_THROW(parse_device_list("cpu:0,,cpu:1"), UsageError);  // an empty entry
  EXPECT_THROW(parse_device_list("cpu:0,"), UsageError);
  EXPECT_THROW(parse_device_list(""), UsageError);
}

TEST(Device, MissingGpuIsAUsageError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    require_device(Device::cuda(0));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(Check, MessageCarriesContextExpressionAndDevice) {
  DeviceGuard g(Device::cpu(1));
  try {
    int n = 3;
    DDPB_CHECK(n == 4) << "n is " << n;
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("n is 3"), std::string::npos) << m;
    EXPECT_NE(m.find("n == 4"), std::string::npos) << m;
    EXPECT_NE(m.find("test_tensor.cpp"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu:1"), std::string::npos) << m;
  }
}

TEST(Ops, ShapeMismatchNamesTheShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32, Device::cpu());
  Tensor b = Tensor::zeros({4, 5}, DType::F32, Device::cpu());
  Tensor c = Tensor::zeros({2, 5}, DType::F32, Device::cpu());
  try {
    ops::gemm(a, false, b, false, c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

TEST(Tensor, RoundToBf16MatchesTheScalarConversion) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f,         -0.0f,       1.0f,   -2.5f,       3.0e38f,
                               3.3961e38f,   -3.3961e38f, 1e-40f, 1.00390625f, 1.005859375f,
                               1.001953125f, inf,         -inf};
  for (int i = 0; i < 2000; ++i)
    values.push_back(std::ldexp(float(i % 997) - 498.3f, (i % 60) - 30));
  std::vector<float> rounded(values.size());
  round_to_bf16(values.data(), rounded.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const float ref = bf16_to_float(float_to_bf16(values[i]));
    EXPECT_EQ(std::memcmp(&rounded[i], &ref, sizeof(float)), 0) << values[i];
  }
  // Ties go to even: 1 + 2^-8 lies half-way between 1 and 1 + 2^-7.
  EXPECT_EQ(rounded[8], 1.0f);
  // A NaN whose payload sits only in the low 16 bits must not truncate to infinity.
  const float nan_low = std::bit_cast<float>(0x7F800001u);
  float out = 0.0f;
  round_to_bf16(&nan_low, &out, 1);
  EXPECT_TRUE(std::isnan(out));
  // In place is allowed.
  round_to_bf16(values.data(), values.data(), static_cast<int64_t>(values.size()));
  EXPECT_EQ(std::memcmp(values.data(), rounded.data(), values.size() * sizeof(float)), 0);
}

// --precision bf16 on CPU: every GEMM sees its operands rounded to bf16 and accumulates in
// f32, i.e. it equals an f32 GEMM of rounded copies, bit for bit; f32 mode does not round.
TEST(Ops, GemmInBf16ModeRoundsBothOperands) {
  struct ModeGuard {
    ~ModeGuard() { ops::set_math_mode(ops::MathMode::FP32); }
  } guard;
  const int64_t m = 33, n = 29, k = 47;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      Tensor a = testing::random_tensor(trans_a ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = testing::random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, 2);
      Tensor bias = testing::random_tensor({n}, 3);
      auto rounded = [](const Tensor& t) {
        std::vector<float> v = t.to_floats();
        round_to_bf16(v.data(), v.data(), static_cast<int64_t>(v.size()));
        return Tensor::from_floats(v, t.shape());
      };
      Tensor c_bf16 = Tensor::empty({m, n}, DType::F32, Device::cpu());
      Tensor c_ref = Tensor::empty({m, n}, DType::F32, Device::cpu());
      Tensor c_f32 = Tensor::empty({m, n}, DType::F32, Device::cpu());
      ops::set_math_mode(ops::MathMode::BF16);
      ops::gemm(a, trans_a, b, trans_b, c_bf16, 0.5f, 0.0f, bias, ops::Activation::GeLU);
      ops::set_math_mode(ops::MathMode::FP32);
      ops::gemm(rounded(a), trans_a, rounded(b), trans_b, c_ref, 0.5f, 0.0f, bias,
                ops::Activation::GeLU);
      ops::gemm(a, trans_a, b, trans_b, c_f32, 0.5f, 0.0f, bias, ops::Activation::GeLU);
      const auto got = c_bf16.to_floats(), ref = c_ref.to_floats(), f32 = c_f32.to_floats();
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0)
          << "trans_a " << trans_a << " trans_b " << trans_b;
      // Random operands are not bf16 values: the f32 result must differ, by about bf16's
      // relative precision (2^-9 per operand) against the largest output, not by more.
      double worst = 0, largest = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - f32[i]));
        largest = std::max(largest, std::fabs(double(f32[i])));
      }
      EXPECT_GT(worst / largest, 1e-5);
      EXPECT_LT(worst / largest, 1e-2);
    }
  }
}

TEST(Ops, GemmWithTransposesBiasAndRelu) {
  // a^T with a = [[1,2],[3,4],[5,6]] (3x2) -> 2x3; b = I3; bias = [0,-10,1].
  Tensor a = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = Tensor::from_floats({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3});
  Tensor bias = Tensor::from_floats({0, -10, 1}, {3});
  Tensor c = Tensor::empty({2, 3}, DType::F32, Device::cpu());
  ops::gemm(a, true, b, false, c, 1.0f, 0.0f, bias, ops::Activation::ReLU);
  EXPECT_EQ(c.to_floats(), (std::vector<float>{1, 0, 6, 2, 0, 7}));
}

// The matrix-vector (n = 1) and outer-product (k = 1) shapes take their own CPU paths, the
// rest oneDNN's matmul plans, cached per shape, transposes, alpha and beta (Note [oneDNN
// matmul plans]): every transpose, alpha and beta against a plain triple loop, each general
// shape twice so that the second pass runs the cached plans and a plan built for one alpha or
// beta never serves another.
TEST(Ops, GemmShapesTransposesAlphasAndBetasMatchTheDefinition) {
  struct Dims {
    int64_t m, n, k;
  };
  for (const Dims d : {Dims{5, 1, 7}, Dims{6, 4, 1}, Dims{1, 1, 3}, Dims{7, 5, 6}, Dims{7, 5, 6},
                       Dims{33, 17, 65}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (const auto [alpha, beta] : {std::pair{2.0f, 0.0f}, std::pair{2.0f, 0.5f},
                                         std::pair{1.0f, 1.0f}, std::pair{0.5f, 0.0f}}) {
          std::vector<float> av(static_cast<size_t>(d.m * d.k)), bv(static_cast<size_t>(d.k * d.n)),
              cv(static_cast<size_t>(d.m * d.n));
          for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 5) - 1.5f;
          for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 3) + 0.25f;
          for (size_t i = 0; i < cv.size(); ++i) cv[i] = static_cast<float>(i) * 0.1f;
          Tensor a = Tensor::from_floats(av, ta ? Shape{d.k, d.m} : Shape{d.m, d.k});
          Tensor b = Tensor::from_floats(bv, tb ? Shape{d.n, d.k} : Shape{d.k, d.n});
          Tensor c = Tensor::from_floats(cv, {d.m, d.n});
          ops::gemm(a, ta, b, tb, c, alpha, beta);
          const auto got = c.to_floats();
          for (int64_t i = 0; i < d.m; ++i) {
            for (int64_t j = 0; j < d.n; ++j) {
              double want = beta * cv[static_cast<size_t>(i * d.n + j)];
              for (int64_t p = 0; p < d.k; ++p) {
                const float x = ta ? av[static_cast<size_t>(p * d.m + i)]
                                   : av[static_cast<size_t>(i * d.k + p)];
                const float y = tb ? bv[static_cast<size_t>(j * d.k + p)]
                                   : bv[static_cast<size_t>(p * d.n + j)];
                want += double(alpha) * x * y;
              }
              EXPECT_NEAR(got[static_cast<size_t>(i * d.n + j)], want, 1e-4 * (1 + std::fabs(want)))
                  << d.m << "x" << d.n << "x" << d.k << " ta " << ta << " tb " << tb << " alpha "
                  << alpha << " beta " << beta << " at " << i << "," << j;
            }
          }
        }
      }
    }
  }
}

// PowerSGD's Gram-Schmidt: [3,2] by hand. Column 0 = (3,0,4)/5; column 1 = (1,1,1) minus
// its projection (7/5) on column 0, normalised: (0.16, 1, -0.12) / sqrt(1.04).
TEST(Ops, OrthogonalizeColumnsIsGramSchmidt) {
  Tensor m = Tensor::from_floats({3, 1, 0, 1, 4, 1}, {3, 2});
  ops::orthogonalize_columns(m);
  const float n1 = std::sqrt(1.04f);
  const std::vector<float> want = {0.6f, 0.16f / n1, 0.0f, 1.0f / n1, 0.8f, -0.12f / n1};
  const auto got = m.to_floats();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

// Note [Orthogonalisation epsilon]: epsilon adds to the norm; a zero column stays zeros
// (without epsilon it would be 0/0).
TEST(Ops, OrthogonalizeColumnsEpsilonAndZeroColumns) {
  Tensor m = Tensor::from_floats({3, 0, 4, 0}, {2, 2});
  ops::orthogonalize_columns(m, 1.0f);
  EXPECT_EQ(m.to_floats(), (std::vector<float>{0.5f, 0.0f, 4.0f / 6.0f, 0.0f}));
  Tensor z = Tensor::zeros({4, 1}, DType::F32, Device::cpu());
  ops::orthogonalize_columns(z);
  EXPECT_EQ(z.to_floats(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_THROW(ops::orthogonalize_columns(Tensor::zeros({1, 2}, DType::F32, Device::cpu())), Error);
}

// CPU devices have no peers: nothing is enabled, and the context says so (an empty list).
TEST(SystemInfo, PeerAccessEnabledIsRecordedAndIgnoresCpuDevices) {
  enable_peer_access({Device::cpu(0), Device::cpu(1)});
  const nlohmann::json j = to_json(system_info());
  ASSERT_TRUE(j.contains("peer_access_enabled")) << j.dump();
  EXPECT_TRUE(j["peer_access_enabled"].is_array());
  if (cuda_device_count() == 0) EXPECT_TRUE(j["peer_access_enabled"].empty());
  // The cuDNN the convolutions would open (issue 49): "9.x.y" where libcudnn.so.9 is found.
  ASSERT_TRUE(j.contains("cudnn_version")) << j.dump();
  const std::string cudnn = j["cudnn_version"].get<std::string>();
  if (!cudnn.empty()) EXPECT_TRUE(cudnn.starts_with("9.")) << cudnn;
}

}  // namespace
}  // namespace ddpb
