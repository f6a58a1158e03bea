// Helpers shared by the core tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace ddpb::testing {

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f,
                            const Device& device = Device::cpu()) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rng_normal(seed, 7, i)) * scale;
  return Tensor::from_floats(v, shape, device);
}

// Compares with tolerance atol + |ref| * rtol and reports the worst elements on failure.
inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<float>& ref, float atol, float rtol) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  }
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + std::fabs(ref[i]) * rtol;
    double err = std::fabs(double(got[i]) - ref[i]);
    if (!(err <= tol)) {
      ++bad;
      if (err - tol > worst_excess || std::isnan(err)) {
        worst_excess = err - tol;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements outside atol " << atol << " + rtol " << rtol
         << "; worst at " << worst << ": got " << got[worst] << ", expected " << ref[worst];
}

inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(double(a[i]) - b[i]) / std::max(1e-6, std::fabs(double(b[i])));
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace ddpb::testing
