// exp and tanh for the CPU kernels' inner loops. libm's expf/tanhf are out-of-line calls
// that no loop can vectorise: with GELU in every GPT block they took 38% of a gpt-tiny
// training step (perf, 2026-11-30). These are inline and branch-free, so GCC turns the
// loops that call them into SIMD code at the baseline ISA.
//
// Accuracy (tests/core/test_cpu_math.cpp checks it over the whole float range):
//   fast_exp   relative error below 4e-7 for x in [-87, 88]; 0 below (so exp(-inf) = 0, as a
//              masked softmax needs), e^88 ~ 1.65e38 above; NaN stays NaN;
//   fast_tanh  absolute error below 3e-7 (relative below 1e-6 where |tanh x| > 2^-10).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace ddpb::cpu {

[[gnu::always_inline]] inline float fast_exp(float x) {
  // e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2]; ln 2 is
  // split in two (Cody-Waite) so that n ln 2 is exact to float precision.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // NaN is replaced before the float-to-int conversion below (which it would make undefined)
  // and put back at the end.
  const bool nan = x != x;
  const float xc = nan ? 0.0f : std::min(std::max(x, -87.0f), 88.0f);
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  // e^r by its Taylor series to r^7 / 7!: the first omitted term is below 6e-9 on the range.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from its bits; n is in [-126, 127] after the clamp.
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float result = x < -87.0f ? 0.0f : p * scale;
  return nan ? x : result;
}

[[gnu::always_inline]] inline float fast_tanh(float x) {
  // tanh x = (e^2x - 1) / (e^2x + 1). Near 0 the subtraction cancels, so small |x| takes the
  // series x - x^3/3 + 2x^5/15 - 17x^7/315 instead (error below 1e-9 for |x| < 0.05). Both
  // are computed and one selected: no branch in the loop. Beyond |x| = 9, tanh is 1 in float.
  const float c = std::min(std::max(x, -9.0f), 9.0f);
  const float e = fast_exp(2.0f * c);
  const float big = (e - 1.0f) / (e + 1.0f);
  const float x2 = x * x;
  const float small =
      x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f - x2 * (17.0f / 315.0f))));
  return std::abs(x) < 0.05f ? small : big;
}

}  // namespace ddpb::cpu
