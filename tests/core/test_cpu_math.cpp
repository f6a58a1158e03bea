// core/cpu/cpu_math.h against libm, over the whole range the kernels feed them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/cpu/cpu_math.h"

namespace ddpb::cpu {
namespace {

// Every 97th float in [-neg, pos], by bit pattern, so every exponent is covered (~2e7 values).
template <typename Fn>
void for_floats(float neg, float pos, Fn&& fn) {
  for (float sign : {-1.0f, 1.0f}) {
    const uint32_t last = std::bit_cast<uint32_t>(sign < 0 ? neg : pos);
    for (uint32_t bits = 0; bits <= last; bits += 97) fn(sign * std::bit_cast<float>(bits));
  }
}

TEST(CpuMath, FastExpWithinFourUlpsOfLibm) {
  double worst = 0;
  for_floats(87.0f, 88.0f, [&](float x) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(fast_exp(x) - ref) / ref);
  });
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(fast_exp(1000.0f)));
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CpuMath, FastTanhWithinFloatPrecisionOfLibm) {
  double worst_abs = 0, worst_rel = 0;
  for_floats(20.0f, 20.0f, [&](float x) {
    const double ref = std::tanh(static_cast<double>(x));
    const double err = std::fabs(fast_tanh(x) - ref);
    worst_abs = std::max(worst_abs, err);
    if (std::fabs(ref) > 1.0 / 1024) worst_rel = std::max(worst_rel, err / std::fabs(ref));
  });
  EXPECT_LT(worst_abs, 3e-7);
  EXPECT_LT(worst_rel, 1e-6);
  // Tiny arguments take the series: tanh x = x to float precision, sign kept.
  EXPECT_EQ(fast_tanh(1e-20f), 1e-20f);
  EXPECT_EQ(fast_tanh(-0.0f), 0.0f);
  EXPECT_EQ(fast_tanh(50.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-50.0f), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace ddpb::cpu
