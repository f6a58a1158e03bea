#include "reports/step_noise.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ddpb::reports {

double student_t95(int64_t df) {
  // (df, t_0.975) from any statistics table; 1.962 at 1000 is the normal quantile's 1.960.
  static constexpr std::pair<int64_t, double> kTable[] = {
      {1, 12.706}, {2, 4.303},  {3, 3.182},  {4, 2.776},   {5, 2.571},   {6, 2.447},
      {7, 2.365},  {8, 2.306},  {9, 2.262},  {10, 2.228},  {12, 2.179},  {15, 2.131},
      {20, 2.086}, {30, 2.042}, {60, 2.000}, {120, 1.980}, {1000, 1.962}};
  double t = kTable[0].second;  // df < 1 has no quantile: the widest tabulated one
  for (const auto& [at, value] : kTable) {
    if (df >= at) t = value;
  }
  return t;
}

double step_spread_ms(const StepTimeStats& s) {
  if (s.count < 2 || !std::isfinite(s.stddev) || s.stddev <= 0) return 0;
  // p90 is 1.2816 standard deviations above the median of a normal distribution.
  constexpr double kP90Sigmas = 1.2816;
  const double body = std::max(s.p90 - s.median, s.median - s.min) / kP90Sigmas;
  return std::isfinite(body) && body >= 0 ? std::min(s.stddev, body) : s.stddev;
}

double step_noise_ms(const StepTimeStats& a, const StepTimeStats& b) {
  // Only a run of 2 steps or more has a spread, and only such runs set the degrees of freedom.
  int64_t df = -1;
  for (const StepTimeStats* s : {&a, &b}) {
    if (s->count >= 2) df = df < 0 ? s->count - 1 : std::min(df, s->count - 1);
  }
  if (df < 0) return 0;
  return student_t95(df) * std::hypot(step_spread_ms(a), step_spread_ms(b));
}

}  // namespace ddpb::reports
